"""Fused-attention kernels (docs/validation/attention.md): the fitted fractions and length
curve against the published kernel speeds (in-sample and leave-one-source-out), the shipped
table equal to the fit, the argument in solve / serve / train, the page generated."""

from __future__ import annotations

import os
import statistics
from pathlib import Path

import pytest

import roofline as rl
from roofline.engine import attention as ea
from roofline.errors import RooflineError, SpecError
from roofline.graphs.backward import backward_graph
from roofline.graphs.graph import GraphBuilder
from roofline.specs.dtypes import precision
from roofline.validation import attention as v

DOC = Path(__file__).parents[2] / "docs" / "validation" / "attention.md"


@pytest.fixture(scope="module")
def rows():
    return v.attention_rows()


@pytest.fixture(scope="module")
def loso():
    return v.loso_rows()


HOPPER_SOURCES = {"fa3paper", "torchbench", "fa1791"}
BLACKWELL_SOURCES = {"cudnnfe", "cudnnprefill", "fa1589", "tb171"}


def test_in_sample_and_leave_one_source_out(rows, loso) -> None:
    fit_ids = {c.id for c in v.fitted()}
    by_arch: dict[str, list[float]] = {}
    for r in rows:
        if r["case"].id in fit_ids:
            by_arch.setdefault(v.case_work(r["case"])[2], []).append(abs(r["error"]))
    # in-sample (each architecture's shipped fit over all its sources): Hopper median 3.7 %
    # (41 cases), Blackwell 7.0 % (104 cases)
    assert len(by_arch["hopper"]) == 41 and statistics.median(by_arch["hopper"]) <= 0.05
    assert len(by_arch["blackwell"]) == 104 and statistics.median(by_arch["blackwell"]) <= 0.10
    # each source judged by the fit over the others: Hopper medians 6.6 / 10.2 / 7.6 %,
    # Blackwell 14.8 / 6.7 / 18.2 / 13.1 % (one curve for cuDNN and FA2 there, whose rise
    # differs: stated on the page)
    assert set(loso) == HOPPER_SOURCES | BLACKWELL_SOURCES
    for s, errs in loso.items():
        assert len(errs) >= 6, s
        bound = 0.12 if s in HOPPER_SOURCES else 0.20
        assert statistics.median(abs(e) for _, e in errs) <= bound, s
    # the one Hopper case the model misses: FA2's causal forward (its tail of short query tiles)
    hop = [r for r in rows if r["case"].id in fit_ids and r["case"].source in HOPPER_SOURCES]
    worst = max(hop, key=lambda r: abs(r["error"]))
    assert worst["case"].id == "fa2 fwd h128 s8192 causal (fa1791)" and worst["error"] < 0.35


def test_judged_and_outlier_cases(rows) -> None:
    """Cases no fit uses: H200 cuDNN (another Hopper part) within 10 %; H100 PCIe FA3 in bf16
    and in FP8 ~18 % too fast with the card's [sustained] 0.81 (fitted on a GEMM harness run on
    the PCIe card and the SXM5, validation/sustained.py; without it 45 % too fast); A100
    'auto' (the matmul model) 25 % faster than cuDNN measures; the host-bound B200 batch-1
    calls are outliers with their reason."""
    def med(pred):
        return statistics.median(abs(r["error"]) for r in rows if pred(r["case"]))
    assert med(lambda c: c["hardware"] == "h200-sxm") <= 0.10
    assert 0.10 <= med(lambda c: c["hardware"] == "h100-pcie" and "dtype" not in c.scenario) \
        <= 0.22
    # FA3's FP8 forward on the same PCIe card (PR #1075): 13-27 % too fast (39-57 % before the
    # card's [sustained] fraction, which is assumed for fp8 as fitted for bf16 / fp16)
    assert 0.10 <= med(lambda c: c.source == "fa1075") <= 0.22
    assert 0.15 <= med(lambda c: c["hardware"] == "a100-pcie-80gb") <= 0.35
    out = [c for c in v.attention_cases() if c.known_outlier]
    assert len(out) == 14 and all("host-bound" in c.reason and c["batch"] == 1 for c in out)
    assert not {c.id for c in out} & {c.id for c in v.fitted()}


def test_shipped_table_is_the_fit() -> None:
    fs = v.arch_fits()
    assert set(fs) == {"hopper", "blackwell"}
    assert v.fit() == fs["hopper"]  # the default: the Hopper cases
    for arch, f in fs.items():
        assert ea.curve(arch) == (f["x0"], f["p"])
        for (kernel, a, field), frac in f["fractions"].items():
            shipped = ea._tables()["kernels"][(kernel, a)][field]
            assert shipped == pytest.approx(frac, abs=6e-4), (kernel, a, field)


def test_blackwell_cudnn_by_hand() -> None:
    # GB200, B = 1, 128 heads, T = S = 16384 causal, H = 128: x = (T + 1) / 2 = 8192.5;
    # rate = 0.613 · 2500e12 / (1 + (460 / 8192.5)^1.05) = 1461.4e12 FLOP/s; FP8 forward
    # 0.381 · 5000e12 · the same factor = 1816.7e12
    f = 1 / (1 + (460 / 8192.5) ** 1.05)
    c = next(c for c in v.attention_cases()
             if c.id == "cudnn fwd h128 s16384 causal GB200 (cudnnfe)")
    assert v.predict_tflops(c) == pytest.approx(0.613 * 2500e12 * f, rel=1e-6)
    c = next(c for c in v.attention_cases()
             if c.id == "cudnn fp8 fwd h128 s16384 causal GB200 (cudnnfe)")
    assert v.predict_tflops(c) == pytest.approx(0.381 * 5000e12 * f, rel=1e-6)
    # auto on Blackwell is cuDNN; FA3 has no Blackwell entry
    kw = dict(phase="prefill", seq_len=16384, precision="bf16")
    lat = {k: rl.solve("llama-3.1-8b", "b200", attention_kernel=k, **kw).latency
           for k in ("auto", "cudnn", "fa2")}
    assert lat["auto"] == lat["cudnn"] < lat["fa2"]
    with pytest.raises(SpecError, match="no measured entry"):
        rl.solve("llama-3.1-8b", "b200", attention_kernel="fa3", **kw)


def test_length_factor_and_row_work_by_hand() -> None:
    x0, p = ea.curve("hopper")
    assert float(ea.length_factor(x0, x0, p)) == pytest.approx(0.5)
    assert float(ea.length_factor(0.0, x0, p)) == pytest.approx(1 / (1 + x0 ** p))  # x >= 1
    b = GraphBuilder("a", "forward", precision("bf16"))
    for nm, h, causal in (("full", 128, False), ("causal", 128, True), ("h64", 64, False)):
        b.add("attention", nm, n_heads=8, n_kv_heads=8, head_dim=h, q_len=4096, kv_len=4096,
              causal=causal)
    g = backward_graph(b.build()).graph
    w = dict(zip(g.names, ea.row_work(g), strict=True))
    assert w["full"] == pytest.approx(4096)
    assert w["causal"] == pytest.approx(4097 / 2)  # causal_pairs(T, T) / T = (T + 1) / 2
    assert w["h64"] == pytest.approx(2048)  # half the work per key
    assert w["full.bwd"] == pytest.approx(4096)  # the 2.5x backward FLOPs divided out


def test_fa3_forward_by_hand() -> None:
    # B = 1, N = 16, T = S = 16384, H = 128: x = 16384; rate = 0.637 · 989.4e12 /
    # (1 + (190 / 16384)^1.15) = 0.637 · 989.4e12 · 0.99409 = 626.5e12 FLOP/s
    c = next(c for c in v.attention_cases() if c.id == "fa3 fwd h128 s16384 (fa3paper)")
    assert v.predict_tflops(c) == pytest.approx(0.637 * 989.4e12 * 0.99409, rel=2e-3)
    # at 512 tokens: 1 / (1 + (190/512)^1.15) = 0.75768 of it
    c = next(c for c in v.attention_cases() if c.id == "fa3 fwd h128 s512 (fa3paper)")
    assert v.predict_tflops(c) == pytest.approx(0.637 * 989.4e12 * 0.75768, rel=2e-3)


def test_kernel_argument_in_solve_serve_train() -> None:
    kw = dict(phase="prefill", seq_len=16384, precision="bf16")
    lat = {k: rl.solve("llama-3.1-8b", "H100", attention_kernel=k, **kw).latency
           for k in ("auto", "fa3", "fa2", "cudnn", "gemm", "unfused")}
    assert lat["auto"] == lat["fa3"]  # Hopper's default
    assert lat["fa2"] > lat["cudnn"] and lat["fa2"] > lat["fa3"]  # 0.376 < 0.637, 0.640
    assert lat["unfused"] > lat["fa2"]
    # A100: no measured table; auto and fa2 are the matmul model
    a = {k: rl.solve("llama-3.1-8b", "A100", attention_kernel=k, **kw).latency
         for k in ("auto", "gemm", "fa2")}
    assert a["auto"] == a["gemm"] == a["fa2"]
    with pytest.raises(SpecError, match="no measured entry"):
        rl.solve("llama-3.1-8b", "A100", attention_kernel="fa3", **kw)
    with pytest.raises(RooflineError, match="attention_kernel"):
        rl.solve("llama-3.1-8b", "H100", attention_kernel="xformers")
    s2, s3 = (rl.serve("llama-3.1-8b", "H100", prompt_len=8192, output_len=8,
                       attention_kernel=k).ttft for k in ("fa2", "fa3"))
    assert s2 > s3
    t2, t3 = (rl.train("llama-3.1-8b", "dgx-h100", global_batch=64, seq_len=16384,
                       attention_kernel=k).step_time for k in ("fa2", "fa3"))
    assert t2 > t3


def test_page_shows_what_the_code_computes(rows, loso) -> None:
    text = DOC.read_text(encoding="utf-8")
    table = v.attention_table(rows, loso)
    if os.environ.get("ROOFLINE_UPDATE_DOCS"):
        head, rest = text.split("<!-- table: generated", 1)
        line, rest = rest.split("\n", 1)
        _, tail = rest.split("<!-- end table -->", 1)
        text = f"{head}<!-- table: generated{line}\n{table}\n<!-- end table -->{tail}"
        DOC.write_text(text, encoding="utf-8")
    assert f"{table}\n<!-- end table -->" in text
    # the prose quotes the fits, errors and judged medians through inline markers
    fits = v.arch_fits()
    figs = v.attention_figures(rows, loso, fits)
    for k, val in figs.items():
        if f"<!--v:{k}-->" in text:
            assert f"<!--v:{k}-->{val}<!--/v-->" in text, k
    # by hand: the Hopper curve at 512 keys (head dim 128: x = 512) and the H200 judged median
    h = fits["hopper"]
    assert figs["att.hopper.at512"] == f"{100 / (1 + (h['x0'] / 512) ** h['p']):.0f} %"
    e = sorted(abs(r["error"]) for r in rows if r["case"]["hardware"] == "h200-sxm")
    assert len(e) == 4 and figs["att.judged.h200-sxm.cudnnprefill"] == \
        f"{(e[1] + e[2]) / 2 * 100:.0f} %"
