"""rl.train on non-decoder models (the generic data-parallel model) against NVIDIA's published
ResNet-50 and BERT-large DGX A100 training throughput (data/validation/training_graphs.toml,
docs/validation/training.md "Any graph"). Nothing is fitted to these cases."""

from __future__ import annotations

from pathlib import Path

import pytest

from roofline.validation import load_cases
from roofline.validation.regenerate import quoted_figures
from roofline.validation.training_graphs import cases, report_table, rows, summary

DOC = Path(__file__).parents[2] / "docs" / "validation" / "training.md"


def test_cases_come_from_the_one_loader_with_their_rows() -> None:
    doc = load_cases("training_graphs")
    assert [c["published"] for c in cases()] == [c.value_si for c in doc.cases]
    for c in doc.cases:
        assert c.source in ("rn50", "rn50dgx1", "bert") and "row" in c.where, c.id
        assert f"{c.measured:g}" in c.where, c.id  # the row quotes the published number


def test_validation_against_published_throughput() -> None:
    """docs/validation/training.md: median |error| ≤ 30 %, every case within 65 %."""
    rs = rows()
    s = summary(rs)
    assert s["median_abs_error"] <= 0.30
    assert all(abs(r["error"]) <= 0.65 for r in rs)
    assert report_table() in DOC.read_text(encoding="utf-8")


def test_host_input_ceiling_on_the_resnet_rows() -> None:
    """docs/validation/training.md "The host input pipeline as a ceiling": the block is the code's;
    the source's own time per image and worker (workers / published img/s on the AMP rows) lies
    between the two measured pipelines of another source; at DALI's rate the AMP rows are
    input-bound and closer to the published ones, the TF32 rows device-bound and unchanged."""
    from roofline.scenarios.training.input_pipeline import loader_table
    from roofline.validation.training_graphs import RN50_WORKERS, loader_rows, loader_table_md

    assert loader_table_md() in DOC.read_text(encoding="utf-8")
    lo, hi = loader_table()["dali-cpu"][0], loader_table()["pytorch"][0]
    rs = {r["id"]: r for r in loader_rows()}
    assert len(rs) == 4
    for r in rs.values():
        implied = RN50_WORKERS * r["dp"] / r["published"]  # s per image per worker
        if r["precision"] == "fp16":
            assert lo < implied < hi, r["id"]
            assert abs(r["dali-cpu"] / r["published"] - 1) < abs(r["none"] / r["published"] - 1)
            assert r["dali-cpu"] < r["none"]
        else:
            assert r["dali-cpu"] == r["none"], r["id"]


def test_prose_figures_are_the_codes() -> None:
    """The figures the "Any graph" and input-pipeline sections quote are inline markers holding
    what graphs_figures computes from the table's rows; two by hand."""
    from roofline.validation.training_graphs import graphs_figures, loader_rows

    text = DOC.read_text(encoding="utf-8")
    rs = rows()
    figs = graphs_figures(rs, loader_rows())
    quoted, stale = quoted_figures(text, figs)
    assert len(quoted) >= 20 and not stale, stale
    rn = [r for r in rs if r["model"] == "resnet50"]
    e = sorted(abs(r["error"]) for r in rn)
    assert len(e) == 6  # 4 DGX A100 rows, 2 DGX-1 rows: the median of an even count
    assert figs["tg.rn50.median"] == f"{(e[2] + e[3]) / 2:.1%}".replace("%", " %")
    one, eight = (next(r for r in rn if r["precision"] == "fp16" and r["dp"] == g
                       and r["source"] == "rn50") for g in (1, 8))
    assert figs["tg.rn50.scaling"] == f"{eight['ours'] / one['ours']:.2f}"


def test_rn50_source_is_pinned_to_the_commit_of_its_figures() -> None:
    """The ResNet-50 figures (938 / 7248 TF32, 2470 / 16621 AMP img/s) first appear in the
    README at DeepLearningExamples 7bdfc81 (2021-04-20); the layouts the rows take are read
    from configs.yml and main.py, which say the same at that commit."""
    src = load_cases("training_graphs").sources
    pin = "7bdfc81d258746323bf0d3ca57e0ad302a4c3a74"
    assert pin in src["rn50"] and "/tree/master/" not in src["rn50"]
    assert pin in src["rn50dgx1"] and "DGX-1 32GB" in src["rn50dgx1"]
    assert pin in src["dle_configs"] and pin in src["dle_main"]


def test_per_term_table_adds_up_and_is_the_pages() -> None:
    """docs/validation/training.md "Per term": each ResNet-50 row's terms are op_seconds' ops
    by kind and add up to the device time of one micro-batch, which with the optimizer and the
    exposed all-reduce is our step per micro-batch; the gap share by hand for one row."""
    from roofline.validation.training_graphs import term_rows, term_table_md

    rs = rows()
    trs = term_rows(rs)
    assert [r["id"] for r in trs] == [r["id"] for r in rs if r["model"] == "resnet50"]
    for r in trs:
        assert sum(r["terms"].values()) + r["other"] == pytest.approx(r["device"])
        assert r["other"] < 0.01 * r["device"]  # ResNet-50 is convolutions, norms, pointwise
        bd = r["breakdown"]
        n_mb = r["accumulation"]
        ours = (bd["forward"] + bd["backward"]) / n_mb
        assert r["device"] == pytest.approx(ours, rel=1e-9)
        assert r["our_step"] == pytest.approx(sum(bd.values()) / n_mb, rel=1e-9)
        assert (r["terms"]["NCHW copies"] > 0) == (r["conv_layout"] == "nchw"
                                                   and r["precision"] != "fp32")
    one = next(r for r in trs if r["id"] == "resnet50 fp16 1 GPU")
    mem = one["device"] - one["terms"]["convolutions"] - one["other"]
    share = (256 / 2470 - one["our_step"]) / mem  # published step: 256 images at 2,470 img/s
    assert f"{share:+.0%} |" in term_table_md(trs).splitlines()[2]
    assert term_table_md(trs) in DOC.read_text(encoding="utf-8")


def test_op_seconds_refuses_a_decoder() -> None:
    from roofline.errors import SpecError
    from roofline.scenarios.training.generic import op_seconds

    with pytest.raises(SpecError, match="decoder LM"):
        op_seconds("llama-2-7b", "dgx-a100", micro_batch=1, seq_len=2048)


def test_op_seconds_checks_its_arguments_as_train_does() -> None:
    """op_seconds and train_graph share one check of precision, preset and seq_len
    (generic._device_args): a seq_len for an image model, a missing one for a sequence model,
    the inference-only preset and a dtype the device lacks are refused, naming the argument."""
    from roofline.errors import RooflineError, SpecError
    from roofline.scenarios.training.generic import op_seconds

    with pytest.raises(SpecError, match="seq_len does not apply"):
        op_seconds("resnet50", "dgx-a100", micro_batch=8, seq_len=128)
    with pytest.raises(SpecError, match="preset='mlsysim'"):
        op_seconds("resnet50", "dgx-a100", micro_batch=8, preset="mlsysim")
    with pytest.raises(RooflineError, match="no fp8 peak"):
        op_seconds("resnet50", "dgx-a100", micro_batch=8, precision="fp8")
    tg, op_t = op_seconds("resnet50", "dgx-a100", micro_batch=8)
    assert len(op_t) == len(tg.graph.names) and (op_t > 0).all()
