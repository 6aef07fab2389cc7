"""docs/validation/client.md: solve(client=True) against published end-to-end ResNet-50 Triton
latencies; the fit reproduced, in-sample and leave-one-source-out errors; the terms by hand."""

from __future__ import annotations

from pathlib import Path

import pytest

import roofline as rl
from roofline.validation import client as v

DOC = Path(__file__).parents[2] / "docs" / "validation" / "client.md"


@pytest.fixture(scope="module")
def rep():
    return v.client_holdout()



def test_doc_tables_are_generated(rep, doc_block) -> None:
    assert doc_block(DOC, "holdout") == v.holdout_table(rep)
    assert doc_block(DOC, "cases") == v.case_table(rep)
    # the medians the prose quotes: inline markers of today's values
    from roofline.validation.holdout import holdout_figures

    doc = DOC.read_text(encoding="utf-8")
    figs = holdout_figures(rep, "client")
    quoted = [k for k in figs if f"<!--v:{k}-->" in doc]
    assert set(quoted) == {"client.in_sample", "client/tf.held_out", "client/pyt.held_out"}
    for k in quoted:
        assert f"<!--v:{k}-->{figs[k]}<!--/v-->" in doc, k


def test_fit_reproduces_the_shipped_factors(rep) -> None:
    assert rep.refit.values == pytest.approx(rep.shipped, rel=1e-3)


def test_errors_within_stated_bounds(rep) -> None:
    # in-sample median ≤ 30 % (without the option: the device side alone is 3-12x too fast)
    assert rep.shipped_in_sample.median_abs <= 0.30
    assert rep.loso.median_abs <= 0.55
    dev_only = [v._parts(c.id)[0] / c.value_si for c in v.cases()]
    assert max(dev_only) < 0.6  # every device-only latency is far below the published one


def test_client_terms_by_hand() -> None:
    kw = dict(batch=4, precision="fp16", fuse=True, runtime="compiled")
    dev = rl.solve("resnet50", "a100-sxm4-80gb", **kw)
    cli = rl.solve("resnet50", "a100-sxm4-80gb", client=True, **kw)
    assert dev.client_time == 0.0 and "client=True" not in str(dev)
    # ResNet-50 at fp16: input 3·224·224·2 = 301,056 B, output 1000·2 = 2,000 B per image;
    # 4 images = 1,212,224 B over PCIe 4.0 (32 GB/s per direction, the hardware file) and the
    # serving stack (0.6116 GB/s), + the 1.80 ms floor (1.95 before session 28's T4 waves,
    # 2.05 before session 26)
    n = 4 * (3 * 224 * 224 * 2 + 1000 * 2)
    want = n / 32e9 + n / 0.6116e9 + 1.80e-3
    assert cli.client_time == pytest.approx(want, rel=1e-6)
    assert cli.latency == pytest.approx(dev.latency + want, rel=1e-9)
    assert cli.throughput == pytest.approx(4 / cli.latency)
    assert "client=True" in str(cli) and cli.uncertainty == {}
