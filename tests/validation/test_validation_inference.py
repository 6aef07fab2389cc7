"""rl.solve (default and bound presets) against published GPU inference measurements.

Cases, with their sources, live in src/roofline/data/validation/inference.toml (read by
roofline.validation.load_cases, which refuses a case without a source); the report is
docs/validation/inference.md. Its case table and summary (and the "tried" table) are generated
from the data by roofline.validation.inference (``python -m roofline.validation.regenerate
--only pages:inference.md`` rewrites them) and a test checks that the doc carries exactly that
text.

Error convention (roofline.validation.inference): r = predicted time per batch / measured time
per batch. r < 1: we predict faster than measured. The error factor is max(r, 1/r).

Tolerances (the numbers docs/validation/inference.md reports, rounded up to the next 0.05):
- default preset, cases not marked known_outlier: median error factor <= 1.20 (reported 1.07;
  1.06 before session 27's one QKV GEMM), geometric-mean error factor <= 1.25 (1.15), every
  case within a factor 1.65 (the worst, NVIDIA's L4 Offline, 1.635, since session 28 priced the
  T4 in whole waves; 2.05 before: the worst,
  ResNet-50 INT8 SingleStream on Dell's T4, added in session 26, is 2.002 since the T4's int8
  [sustained] fraction is measured (0.46 assumed -> 0.41, apache/tvm PR 4550); it was 2.11 with
  the assumed one, and the band 2.15; 2.00 before the case, when the worst was the A100 PCIe
  MultiStream case at 1.98, now -4 %);
- known outliers stay inside the band the data file documents for them (here: the host-bound
  Hugging Face ResNet-50 at batch 1 is predicted 4x to 10x too fast);
- the bound preset predicts less time than the default preset in every case, and is further
  from the measurements than the default preset in the median.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

import roofline as rl
from roofline.errors import SpecError
from roofline.validation import Case, parse_cases
from roofline.validation.inference import (
    TRT_QKV,
    Row,
    case_figures,
    case_table,
    factor,
    floor_figures,
    inference_cases,
    measured_seconds,
    predicted_seconds,
    query_floors,
    rows,
    seconds_variant,
    seconds_with,
    solve_kwargs,
    summary,
    tried_figures,
    tried_ratios,
    tried_table,
)
from roofline.validation.regenerate import quoted_figures

DOC = Path(__file__).parents[2] / "docs" / "validation" / "inference.md"
RUNTIMES = ("eager", "compiled")  # rl.solve's runtime
METRIC_UNITS = {"throughput": "1/s", "latency": "ms"}

MEDIAN_MAX = 1.20
GEOMEAN_MAX = 1.25
WORST_MAX = 1.65
OUTLIER_BANDS = {"hf-rn50-tf32-a100-b1": (1 / 10, 1 / 4)}  # allowed r for each known outlier


# ----------------------------------------------------------------------------- tests
@pytest.fixture(scope="module")
def computed() -> list[Row]:
    return rows()


def test_every_case_is_complete_and_sourced() -> None:
    doc = inference_cases()  # the loader refuses missing keys, unknown sources, units, duplicates
    assert len(doc.cases) >= 8
    for c in doc.cases:
        assert c.source in doc.sources and c.where and c.date, c.id
        assert c["runtime"] in RUNTIMES and isinstance(c["fuse"], bool), c.id
        if c["runtime"] == "compiled":  # only engines the source says run as CUDA graphs
            assert "graph" in c.where + c["engine"], c.id
        if c.source.startswith("mlperf30") and c.metric == "latency":
            # SingleStream / MultiStream configs set use_graphs = True (session 26)
            assert c["runtime"] == "compiled", c.id
        assert METRIC_UNITS[c.metric] == c.unit, c.id
        assert c.measured > 0 and c["batch"] >= 1
        if c.known_outlier:
            assert c.reason, f"{c.id}: an outlier needs its reason"
            assert c.id in OUTLIER_BANDS
        rl.hardware(c["hardware"])
        rl.model(c["model"])
    # breadth the validation claims: >= 3 GPU types, CNNs and transformers, batch 1 and large
    assert len({c["hardware"].split("-")[0] for c in doc.cases}) >= 3
    assert {"resnet50", "bert-large-uncased"} <= {c["model"] for c in doc.cases}
    assert min(c["batch"] for c in doc.cases) == 1
    assert max(c["batch"] for c in doc.cases) >= 128


def _one(metric: str, measured: float, unit: str, batch: int) -> Case:
    doc = {"sources": {"s": "a test document, Table 1"},
           "case": [{"id": "x", "source": "s", "where": "Table 1", "metric": metric,
                     "measured": measured, "unit": unit, "model": "resnet50",
                     "hardware": "A100", "batch": batch, "precision": "fp16", "fuse": False,
                     "runtime": "eager", "engine": "PyTorch eager"}]}
    return parse_cases(doc, "inference").cases[0]


def test_fuse_qkv_without_fuse_is_refused() -> None:
    """``fuse_qkv = true`` is a fold of the fused graph: with ``fuse = false`` it was dropped
    silently (the case priced three QKV GEMMs); now a SpecError naming the case."""
    c = next(c for c in inference_cases().cases if c.get("fuse_qkv", False))
    assert solve_kwargs(c)["fuse"] == TRT_QKV
    bad = replace(c, scenario={**c.scenario, "fuse": False})
    with pytest.raises(SpecError, match=rf"inference case {c.id!r}: fuse_qkv = true needs "
                                        "fuse = true"):
        solve_kwargs(bad)
    # fuse = false without fuse_qkv is a plain unfused case
    plain = replace(c, scenario={**c.scenario, "fuse": False, "fuse_qkv": False})
    assert solve_kwargs(plain)["fuse"] is False


def test_measured_time_conversion() -> None:
    # throughput: 2048 samples / 39152.4 samples/s = 0.052308 s per batch
    assert measured_seconds(_one("throughput", 39152.4, "1/s", 2048)) == \
        pytest.approx(0.052308, rel=1e-4)
    assert measured_seconds(_one("latency", 3.12, "ms", 1)) == pytest.approx(3.12e-3)


def test_default_preset_within_stated_tolerance(computed: list[Row]) -> None:
    s = summary([r for r in computed if not r.outlier])
    assert s["median"] <= MEDIAN_MAX, s
    assert s["geomean"] <= GEOMEAN_MAX, s
    bad = [(r.case.id, round(r.r_default, 2)) for r in computed
           if not r.outlier and factor(r.r_default) > WORST_MAX]
    assert not bad


def test_known_outliers_stay_in_their_documented_band(computed: list[Row]) -> None:
    for r in computed:
        if r.outlier:
            lo, hi = OUTLIER_BANDS[r.case.id]
            assert lo <= r.r_default <= hi, (r.case.id, r.r_default)


def test_bound_is_faster_than_default_and_further_from_reality(computed: list[Row]) -> None:
    for r in computed:
        assert r.bound_s < r.default_s, r.case.id
    inl = [r for r in computed if not r.outlier]
    assert summary(inl, "r_bound")["median"] > summary(inl, "r_default")["median"]


def test_t4_sustained_fraction_is_what_brings_the_t4_cases_in(computed: list[Row]) -> None:
    """The T4's [sustained] table (power cap, sourced in its hardware file) moves every T4
    tensor-core case towards the measurement but two; without it they sit 24-55 % too fast. The
    exceptions: Dell's MLPerf T4 Offline, INT8 at batch 256, is about -18 % without the cap and
    +53 % with it (session 26: +39 % while the int8 fraction was assumed equal to fp16's 0.46;
    the measured 0.41 of apache/tvm PR 4550 moved it, and the band, from 1.30-1.45 to
    1.45-1.60), and since session 28's whole waves on the T4 its MultiStream (batch 8), about
    -25 % without and +36 % with it (+0 % in the smooth model): these runs sustain more than
    that GEMM (docs/validation/inference.md, cause 3)."""
    t4 = rl.hardware("t4")
    assert t4.sustained("fp16") < 1
    uncapped = replace(t4, sustained_fraction={})
    worse = {}
    for r in computed:
        c = r.case
        if c["hardware"] != "t4" or c["precision"] == "fp32":
            continue
        raw = rl.solve(c["model"], uncapped, **solve_kwargs(c)).latency / r.measured_s
        if factor(r.r_default) >= factor(raw):
            worse[c.id] = (raw, r.r_default)
            continue
        assert raw < 0.8, (c.id, raw)
    assert set(worse) == {"rn50-int8-t4-dell-offline", "rn50-int8-t4-dell-multistream"}, worse
    raw, ours = worse["rn50-int8-t4-dell-offline"]
    assert 0.80 < raw < 0.90 and 1.45 < ours < 1.60
    raw, ours = worse["rn50-int8-t4-dell-multistream"]
    assert 0.70 < raw < 0.80 and 1.30 < ours < 1.45


def test_t4_fp32_fraction_on_the_eager_cases(computed: list[Row]) -> None:
    """t4.toml's fp32 = 0.66 (a fp32 torch.mm measured on T4s: (4.17 + 4.43) / 2 / 8.1 / 0.80 =
    0.664), judged on the Hugging Face fp32 rows it was not fitted on: the GEMM-bound ViT moves
    from about -35 % to within 10 %; the convolution-bound ResNet-50 overshoots (about +16 %,
    from -13 %), as the page says."""
    t4 = rl.hardware("t4")
    assert t4.sustained("fp32") == pytest.approx((4.17 + 4.43) / 2 / 8.1 / 0.80, abs=0.005)
    no_fp32 = replace(t4, sustained_fraction={k: v for k, v in t4.sustained_fraction.items()
                                              if k != "fp32"})
    got = {}
    for r in computed:
        c = r.case
        if c["hardware"] == "t4" and c["precision"] == "fp32":
            before = rl.solve(c["model"], no_fp32, **solve_kwargs(c)).latency / r.measured_s
            got[c["model"]] = (before, r.r_default)
    vit, rn50 = got["vit-b-16"], got["resnet50"]
    assert vit[0] < 0.7 and factor(vit[1]) < 1.10
    assert 0.8 < rn50[0] < 1.0 and 1.0 < rn50[1] < 1.20


def test_variant_pricing_is_rl_solve(computed: list[Row]) -> None:
    """seconds_variant without a variant is rl.solve's price, case by case; the three-GEMM
    variant changes only the TensorRT BERT rows (one QKV GEMM since session 27, as
    ``fuse_qkv`` says: qkv=True is the shipped price) and the T4 one (the T4 without its whole
    waves, the smooth model of session 26) only the T4's 16-bit and int8 rows."""
    for r in computed:
        c = r.case
        assert seconds_variant(c) == pytest.approx(r.default_s, rel=1e-9), c.id
        assert seconds_variant(c, qkv=True) == pytest.approx(r.default_s, rel=1e-9), c.id
        assert c.get("fuse_qkv", False) == (c.source == "trtbert"), c.id
        if c.source != "trtbert":
            assert seconds_variant(c, qkv=False) == pytest.approx(r.default_s, rel=1e-9)
        else:  # three GEMMs: two more kernels per layer, each with its fill or dispatch floor
            assert seconds_variant(c, qkv=False) > r.default_s, c.id
        assert seconds_variant(c, t4_waves=True) == pytest.approx(r.default_s, rel=1e-9)
        if c["hardware"] != "t4" or c["precision"] not in ("fp16", "bf16", "int8"):
            assert seconds_variant(c, t4_waves=False) == pytest.approx(r.default_s, rel=1e-9)
        # the T4 int8 fraction variant: t4.toml's 0.41 is the shipped price; a higher one
        # moves only the T4's int8 rows, and makes them faster
        assert seconds_variant(c, t4_int8=0.41) == pytest.approx(r.default_s, rel=1e-9)
        if c["hardware"] == "t4" and c["precision"] == "int8":
            assert seconds_variant(c, t4_int8=0.6) < r.default_s, c.id
        else:
            assert seconds_variant(c, t4_int8=0.6) == pytest.approx(r.default_s, rel=1e-9)
        # the TensorRT dispatch variant touches only the fused engines launched from the host,
        # and a larger dispatch never makes a case faster
        d8 = seconds_variant(c, trt_dispatch=8e-6)
        if not c["fuse"] or c["runtime"] != "eager":
            assert d8 == pytest.approx(r.default_s, rel=1e-9), c.id
        assert d8 >= r.default_s * (1 - 1e-12), c.id


def test_seconds_with_is_rl_solve_and_keeps_the_tiles(computed: list[Row]) -> None:
    """The refit grid's pricing without changes is rl.solve's, on the parts with a whole-wave
    tile model too (it used to drop the tiles: A100 BERT batch 1 at 0.59 ms instead of 1.05)."""
    for r in computed:
        assert seconds_with(r.case) == pytest.approx(r.default_s, rel=1e-9), r.case.id
    c = next(r.case for r in computed if r.case.id == "bertB-fp16-a100-s128-b1")
    # the preset's own value changes nothing; a longer kernel gap (every op pays it) adds time
    assert seconds_with(c, dispatch=5e-6) == pytest.approx(predicted_seconds(c, "default"))
    assert seconds_with(c, kernel_gap=4e-6) > predicted_seconds(c, "default")


def test_query_floors_by_hand(computed: list[Row]) -> None:
    """floor = measured query latency - batch x (Offline seconds per image), per MLPerf system:
    A100 PCIe t_img = 1 / 39152.4 s = 25.541 us; SingleStream 471.335 - 25.541 = 445.79 us,
    MultiStream (8 images) 686.225 - 8 x 25.541 = 481.90 us; L4 t_img = 1 / 13157.8 s =
    76.001 us, SingleStream 355.504 - 76.001 = 279.50 us, MultiStream 798.77 - 608.01 =
    190.76 us."""
    f = query_floors(computed)
    a, l4 = f["a100-pcie-80gb"], f["l4"]
    assert a["t_img"] == pytest.approx(25.541e-6, rel=1e-4)
    assert a["rn50-int8-a100pcie-singlestream"] == pytest.approx(445.79e-6, rel=1e-4)
    assert a["rn50-int8-a100pcie-multistream"] == pytest.approx(481.90e-6, rel=1e-4)
    assert l4["t_img"] == pytest.approx(76.001e-6, rel=1e-4)
    assert l4["rn50-int8-l4-singlestream"] == pytest.approx(279.50e-6, rel=1e-4)
    assert l4["rn50-int8-l4-multistream"] == pytest.approx(190.76e-6, rel=1e-4)
    assert set(f["h100-sxm5"]) == {"t_img"}  # no latency scenario on that system


def test_doc_carries_the_tried_table(doc_block, computed: list[Row]) -> None:
    ratios = tried_ratios()
    assert doc_block(DOC, "tried") == tried_table(ratios), "regenerate with " \
        "`python -m roofline.validation.regenerate --only pages:inference.md`"
    # the figures its reading quotes sit in inline markers holding today's values
    text = DOC.read_text(encoding="utf-8")
    figs = tried_figures(ratios) | case_figures(computed) | floor_figures(computed)
    quoted, stale = quoted_figures(text, figs)
    assert len(quoted) >= 20 and not stale, stale
    # by hand: a variant's per-case figure is its r - 1 in whole percent; "as shipped" is the
    # case table's default error
    one = "bertB-fp16-a100-s128-b1"
    assert figs[f"tried/three/{one}"] == f"{ratios['three'][one] - 1:+.0%}".replace("%", " %")
    r = next(x for x in computed if x.case.id == one)
    assert ratios["shipped"][one] == pytest.approx(r.r_default, rel=1e-9)
    # the target paragraph's count, by hand from the case table: these 19 within +-10 % (every
    # A100 / H100 MLPerf row since session 26's int8 / conv tiles; since session 28's T4 waves
    # its SingleStream and BERT-Large INT8 batch 1 are in, its MultiStream out)
    mlperf = {f"rn50-int8-{s}-{x}" for s in ("a100pcie", "a100sxm", "h100pcie-smc")
              for x in ("offline", "singlestream", "multistream")}
    ok = mlperf | {"rn50-int8-h100pcie-offline", "rn50-int8-h100sxm-offline",
                   "rn50-int8-l4-dell-singlestream", "rn50-int8-t4-dell-singlestream",
                   "bertL-int8-t4-s128-b1",
                   "bertB-fp16-a100-s128-b128", "bertL-fp16-t4-s384-b128",
                   "bertB-int8-t4-s384-b32", "hf-vit-fp32-a100-b16", "hf-vit-fp32-t4-b16"}
    assert {r.case.id for r in computed if not r.outlier and abs(r.r_default - 1) <= 0.10} == ok
    assert figs["inference.within10"] == "19 of the 34"


def test_doc_carries_the_generated_table(computed: list[Row]) -> None:
    text = DOC.read_text(encoding="utf-8")
    block = case_table(computed)
    assert block in text, "docs/validation/inference.md is stale: regenerate with " \
        "`python -m roofline.validation.regenerate --only pages:inference.md`"
    for c in inference_cases().cases:
        assert c.id in text


def test_t4_tiles_are_the_a100_set_on_its_40_sms() -> None:
    """Session 28: data/presets/tiles.toml's [arch.turing] is the A100's set carried over (the
    transfer the page states: nothing fitted on Turing) on the T4's 40 SMs, for fp16 and
    int8; T4_SMS, which the "tried" variants used, is that count."""
    from roofline.engine.tiles import tiles_for
    from roofline.validation.inference import T4_SMS

    t4, a100 = tiles_for(rl.hardware("t4")), tiles_for(rl.hardware("a100-sxm4-40gb"))
    assert t4 is not None and a100 is not None
    assert t4.slots == T4_SMS == 40 and a100.slots == 108
    for dt in ("fp16", "int8"):
        mine, theirs = t4.for_dtype(dt), a100.for_dtype(dt)
        assert mine is not None and theirs is not None
        assert (mine.shapes, mine.splits, mine.max, mine.a, mine.b, mine.c, mine.fill,
                mine.stream_k) == (theirs.shapes, theirs.splits, theirs.max, theirs.a, theirs.b,
                                   theirs.c, theirs.fill, theirs.stream_k)
    assert t4.for_dtype("int4") is None and t4.for_dtype("fp32") is None  # smooth model
