"""docs/validation/vendors.md: per-architecture factors of the default preset for AMD CDNA 3/4
and Intel Gaudi 2/3 (data/presets/default.toml [<kind>-<arch>] tables), their fit on published
matmul microbenchmarks reproduced, in-sample and leave-one-device-out errors, the judged rows;
the table mechanism and its refusals by hand."""

from __future__ import annotations

from pathlib import Path

import pytest

import roofline as rl
from roofline.analysis.sensitivity import scaled_hardware
from roofline.engine.presets import default_tables, efficiency_for, read_arch_tables
from roofline.errors import SpecError
from roofline.validation import vendors as v
from roofline.validation.regenerate import quoted_figures

DOC = Path(__file__).parents[2] / "docs" / "validation" / "vendors.md"


@pytest.fixture(scope="module")
def rep():
    return v.vendors_report()


def test_doc_tables_are_generated(rep, doc_block) -> None:
    assert doc_block(DOC, "fit") == v.fit_table(rep)
    assert doc_block(DOC, "cases") == v.case_table(rep)
    assert doc_block(DOC, "judged") == v.judged_table(rep)
    # the judged errors the prose quotes (inline markers the regenerate command fills)
    doc = DOC.read_text(encoding="utf-8")
    figs = v.judged_figures(rep)
    quoted, stale = quoted_figures(doc, figs)
    assert "judged/amdperf" in quoted and not stale, stale
    # by hand: the AMD 2025 vLLM rows' |error| range, rounded to whole percent
    amd = [e for cid, _, _, _, e in rep.judged if cid.startswith("AMD vLLM")]
    assert figs["judged/amdperf"] == f"{min(amd) * 100:.0f}–{max(amd) * 100:.0f} %"


def test_fit_reproduces_the_shipped_factors(rep) -> None:
    got = {(f.arch, f.factor): f.refit for f in rep.fits}
    assert got == {(f.arch, f.factor): f.shipped for f in rep.fits}
    assert set(got) == {("gpu-cdna3", "gemm.max"), ("gpu-cdna3", "memory.max"),
                        ("gpu-cdna4", "gemm.max"), ("accelerator-gaudi2", "gemm.max"),
                        ("accelerator-gaudi3", "gemm.max")}


def test_errors_within_stated_bounds(rep) -> None:
    fits = {f.arch: f for f in rep.fits if f.factor == "gemm.max"}
    mem = next(f for f in rep.fits if f.factor == "memory.max")
    # in sample every fitted row within 10 %; the CDNA 3 parts left out one at a time within 20 %
    assert all(abs(e) <= 0.10 for f in rep.fits for _, e in f.in_sample)
    assert all(abs(e) <= 0.20 for _, _, e in fits["gpu-cdna3"].left_out)
    assert len(fits["gpu-cdna3"].left_out) == 2
    # the symptom of issue 18 item 4: the NVIDIA-derived [gpu] factor priced the CDNA 3 GEMMs
    # 30-60 % too fast, the [accelerator] one Gaudi 2 ~25 % too slow
    assert all(0.30 <= e <= 0.60 for _, e in fits["gpu-cdna3"].before)
    assert fits["accelerator-gaudi2"].before[0][1] < -0.20
    # MI300X STREAM: the H200-derived 0.88 was 9-17 % too fast; fitted within 5 %
    assert all(0.08 <= e <= 0.20 for _, e in mem.before)
    assert all(abs(e) <= 0.05 for _, e in mem.in_sample)
    judged = {j[0]: j for j in rep.judged}
    # held out: the NVIDIA control rows of the same sources within 15 % (matmul) / 10 % (HBM)
    for cid in ("mamf H100 SXM bf16", "mamf A100 SXM bf16"):
        assert abs(judged[cid][4]) <= 0.15, judged[cid]
    hbm = [j[4] for j in rep.judged if " HBM " in j[0]]
    assert len(hbm) == 10 and max(abs(e) for e in hbm) <= 0.10
    # Azure's fp8 GEMMs, priced as solve prices them: on the MI300X by the CDNA 3 fp8 tile set
    # (fitted on AMD's ROCm/xla fp8 table and these rows: docs/validation/gemm.md, where each
    # is held out), on H100 / H200 by Hopper's own fp8 tile set (its max fitted on them and the
    # MAMF H200 row)
    from roofline.validation.gemm import sets_max

    amd = [j[4] for j in rep.judged if j[0].startswith("azure ND MI300X v5 fp8")]
    cases = {c.id: c for c in v.vendor_cases()}
    nv = {j[0]: j[4] for j in rep.judged if j[0].startswith("azure ND H") and " fp8 " in j[0]}
    big = [e for cid, e in nv.items() if sets_max(cases[cid])]
    assert len(amd) == 5 and len(nv) == 17 and len(big) == 9
    assert all(abs(e) <= 0.15 for e in amd)
    assert all(abs(e) <= 0.10 for e in big)
    # Azure's smaller sizes, judged at op time (the launch model on 5-20 µs kernels): the H100's
    # (CUDA 12.6) 20-25 % too slow, the H200's (CUDA 12.8, faster small-size kernels) 30-50 %;
    # the thin 802816 x 192 x 768 rows too fast: the H100's +2.7 % (memory-bound, at Hopper's
    # tiled-GEMM streaming fraction 0.80; +13 % at the copy's 0.88, +35 % while their fp16 D
    # was counted as 1-byte fp8: Precision.matmul_out_bytes), the H200's +15 %
    small = {cid: e for cid, e in nv.items() if not sets_max(cases[cid])}
    assert all(-0.25 <= e <= -0.18 for cid, e in small.items()
               if "H100" in cid and "802816" not in cid)
    assert all(-0.52 <= e <= -0.28 for cid, e in small.items()
               if "H200" in cid and "802816" not in cid)
    assert 0.0 <= small["azure ND H100 v5 fp8 802816x192x768"] <= 0.05
    assert 0.10 <= small["azure ND H200 v5 fp8 802816x192x768"] <= 0.20
    # the end-to-end fp8 rule leaves Gaudi 3's kernel-only fp8 matmul too slow; MAMF's H200
    # fp8 row, priced at the maximum boost clock its harness runs at, is -10...-20 % (-19.5 %
    # at the peaks' clock; its best shape leaves a partial second wave)
    g3, h200 = judged["mamf Gaudi 3 fp8"][4], judged["mamf H200 SXM fp8"][4]
    assert g3 < -0.25 and -0.20 <= h200 <= -0.10
    assert abs(judged["mamf H100 SXM fp8"][4]) <= 0.06
    # a second measurement no fit saw (the MAMF page's earlier v1 table, other software):
    # Gaudi 2 and Gaudi 3 within 5 %; the MI300X row, priced by solve's CDNA 3 tile set, 5-25 %
    # too slow (the Infinity Cache not modelled: docs/validation/gemm.md)
    assert abs(judged["mamf v1 Gaudi 2 bf16"][4]) <= 0.05
    assert abs(judged["mamf v1 Gaudi 3 bf16"][4]) <= 0.05
    assert -0.25 <= judged["mamf v1 MI300X bf16"][4] <= -0.05
    # Intel's Gaudi 3 fp8 throughput table, never fitted: within 20 %, median within 10 %; with
    # the accelerator kind's factors (no fp8 rule) the median was above 25 %
    intel = [j[4] for j in rep.judged if j[0].startswith("Intel ")]
    before = [e for cid, e in rep.judged_before if cid.startswith("Intel ")]
    assert len(intel) == len(before) == 10
    assert max(abs(e) for e in intel) <= 0.20 and v.median_abs(intel) <= 0.10
    assert v.median_abs(before) > 0.25


def test_matmul_priced_by_hand() -> None:
    """One MI300X bf16 matmul: 2mnk / (peak · max / (1 + a/M + b/N + c/K)) + the 2 µs kernel gap;
    the MI325X's at its engine clock over the MI300X's (AMD MAF medians, 1447 / 1207 MHz)."""
    c = next(x for x in v.vendor_cases() if x.id == "mamf MI300X bf16")
    m, n, k = 10240, 15360, 8192
    e = 0.51 / (1 + 32 / m + 32 / n + 16 / k)
    t = 2 * m * n * k / (1307.4e12 * e) + 2e-6
    assert v.predict(c) == pytest.approx(2 * m * n * k / t, rel=1e-6)
    c = next(x for x in v.vendor_cases() if x.id == "mamf MI325X bf16")
    m, n, k = 13312, 10240, 8192
    e = 0.51 * 1447 / 1207 / (1 + 32 / m + 32 / n + 16 / k)  # 0.6114 / 1.0071 = 0.607
    t = 2 * m * n * k / (1307.4e12 * e) + 2e-6
    assert v.predict(c) == pytest.approx(2 * m * n * k / t, rel=1e-6)


def test_architecture_tables_patch_only_their_parts() -> None:
    gpu = default_tables()["gpu"]
    mi = efficiency_for(rl.hardware("MI300X"), "default")
    h100 = efficiency_for(rl.hardware("H100"), "default")
    assert mi.gemm.max == pytest.approx(0.51) and mi.label == "default/gpu-cdna3/tiles"
    assert mi.tiles is not None and mi.tiles.arch == "cdna3" and mi.tiles.slots == 304
    # everything the table does not set is the kind's: tile sizes, memory, launch, fp8 rule
    assert (mi.gemm.a, mi.gemm.b, mi.gemm.c) == (gpu.gemm.a, gpu.gemm.b, gpu.gemm.c)
    assert mi.memory.max == pytest.approx(0.78)
    assert mi.memory.cache_fraction == gpu.memory.cache_fraction and mi.launch == gpu.launch
    assert mi.gemm_dtype == gpu.gemm_dtype
    # NVIDIA parts keep the [gpu] numbers
    assert h100.gemm.max == gpu.gemm.max == pytest.approx(0.80)
    g3 = efficiency_for(rl.hardware("gaudi3"), "default")
    assert g3.gemm_dtype.fp8 == pytest.approx(gpu.gemm_dtype.fp8)
    assert default_tables()["accelerator"].gemm_dtype.of("fp8") == 1.0
    g2 = efficiency_for(rl.hardware("gaudi2"), "default")
    assert g2.gemm.max == pytest.approx(0.995)
    assert g2.memory == default_tables()["accelerator"].memory
    # a hypothetical variant keeps its part's architecture
    s = scaled_hardware(rl.hardware("MI300X"), peak=1.3, tag="t")
    assert efficiency_for(s, "default").gemm.max == pytest.approx(0.51)
    # solve prices its matmuls with the CDNA 3 tile set (data/presets/tiles.toml): a
    # compute-bound prefill at most (1 + 32/256 + 32/256 + 256/4096) / 0.65 = 2.02 times the
    # per-tile time at the full peak (hipBLASLt's 256 x 256 tile, K >= 4096 in Llama 3.1 8B),
    # against 1 / 0.80 with the [gpu] factors and no tiles
    r = rl.solve("llama-3.1-8b", "MI300X", batch=8, seq_len=2048, precision="bf16")
    assert r.feasible and r.bottleneck == "compute"
    register = __import__("roofline.engine.presets", fromlist=["x"]).register_efficiency
    hw = rl.hardware("MI300X")
    register(hw, gpu)
    try:
        r0 = rl.solve("llama-3.1-8b", hw, batch=8, seq_len=2048, precision="bf16")
    finally:
        register(hw, None)
    t = __import__("roofline.engine.tiles", fromlist=["x"]).tiles_for(hw)
    assert (t.max, t.a, t.b, t.c) == pytest.approx((0.65, 32, 32, 256))
    assert 1.2 < r.latency / r0.latency < 0.80 * (1 + 32 / 256 + 32 / 256 + 256 / 4096) / 0.65


def test_architecture_table_refusals() -> None:
    base = default_tables()
    src = {"s": "a source"}
    q = {"value": 0.5, "unit": "1", "source": "s"}
    ok = read_arch_tables({"sources": src, "gpu-x": {"devices": ["a"], "gemm": {"max": q}}}, base)
    assert ok["a"][0] == "gpu-x" and ok["a"][1].gemm.max == pytest.approx(0.5)
    with pytest.raises(SpecError, match=r"\[gpu-x\].*'devices' must be a non-empty list"):
        read_arch_tables({"sources": src, "gpu-x": {"gemm": {"max": q}}}, base)
    with pytest.raises(SpecError, match="neither a hardware kind"):
        read_arch_tables({"sources": src, "gpux": {"devices": ["a"]}}, base)
    with pytest.raises(SpecError, match="listed in both"):
        read_arch_tables({"sources": src, "gpu-x": {"devices": ["a"]},
                          "gpu-y": {"devices": ["a"]}}, base)
    with pytest.raises(SpecError, match="unknown factor gemm.maxx"):
        read_arch_tables({"sources": src, "gpu-x": {"devices": ["a"],
                                                    "gemm": {"maxx": q}}}, base)


def test_serve_honours_a_table_registered_after_a_first_serve() -> None:
    """The serving efficiency cache keys on the register_efficiency epoch (it did not: a
    registered table was ignored by serve once the part had been served)."""
    from roofline.engine.presets import register_efficiency

    hw = rl.hardware("gaudi3")
    p = rl.precision("fp8", activations="bf16", kv="fp8")
    kw = dict(batch=256, prompt_len=2048, output_len=128, precision=p, engine="vllm")
    t0 = rl.serve("llama-3.1-8b", hw, **kw).tokens_per_s
    register_efficiency(hw, default_tables()["accelerator"])
    try:
        t1 = rl.serve("llama-3.1-8b", hw, **kw).tokens_per_s
    finally:
        register_efficiency(hw, None)
    assert t1 > 1.2 * t0  # the kind's table prices fp8 GEMMs at the 16-bit fraction
    assert rl.serve("llama-3.1-8b", hw, **kw).tokens_per_s == pytest.approx(t0, rel=1e-12)


def test_every_listed_device_is_a_zoo_part_of_its_kind() -> None:
    from roofline.engine.presets import arch_tables

    for key, (name, _) in arch_tables().items():
        assert rl.hardware(key).kind == name.split("-", 1)[0], (key, name)


def test_cdna3_training_fraction_is_the_kernel_ratio_derivation() -> None:
    """training.toml [gpu-cdna3]: 0.51 (CDNA 3 kernel, at the MI300X's clock) × 0.69 / 0.80 (the
    [gpu] training over kernel fraction) = 0.440; a hypothetical variant keeps it; NVIDIA parts
    do not."""
    from roofline.scenarios.training.factors import factor_table_for, training_factors

    f = training_factors("gpu", "mi300x")
    g = training_factors("gpu", None)
    k = default_tables()["gpu"].gemm.max
    assert f.gemm.max == pytest.approx(v.shipped_value("gpu-cdna3") * g.gemm.max / k, abs=5e-4)
    assert (f.gemm.a, f.gemm.b, f.gemm.c) == (g.gemm.a, g.gemm.b, g.gemm.c)
    assert factor_table_for("gpu", "mi325x") == factor_table_for("gpu", "mi300x~t") == "gpu-cdna3"
    assert factor_table_for("gpu", "h100-sxm5") == "gpu-hopper"
    assert factor_table_for("gpu", "a100-sxm4-80gb") == "gpu"
    # a training step on one MI300X prices its matmuls at that fraction: below the best kernel
    t = rl.train("gpt2-xl", "mi300x", global_batch=14, micro_batch=14, seq_len=1024)
    assert t.feasible and t.mfu < f.gemm.max


def test_read_section_figures_are_the_codes(rep) -> None:
    """The CDNA / Gaudi / NVIDIA-control figures of the "Read" section are inline markers holding
    what vendors_read_figures computes from the page's report; two by hand."""
    from roofline.validation.vendors_figures import vendors_read_figures

    text = DOC.read_text(encoding="utf-8")
    figs = vendors_read_figures(rep)
    quoted, stale = quoted_figures(text, figs)
    assert len(quoted) >= 30 and not stale, stale
    err = {cid: e for cid, _, _, _, e in rep.judged}
    assert figs["v.row.H200_SXM_fp8.1"] == f"{err['mamf H200 SXM fp8'] * 100:+.1f} %" \
        .replace("-", "−")
    mem = next(f for f in rep.fits if f.arch == "gpu-cdna3" and f.factor == "memory.max")
    b = [abs(e) for _, e in mem.before]
    assert figs["v.gpu-cdna3.memory.before"] == f"{min(b) * 100:.0f}–{max(b) * 100:.0f} %"
