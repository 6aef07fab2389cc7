"""A sweep's totals off the closed form (engine/split.py): the ops whose own time is not a
maximum of lines in B (whole waves of tiles) summed once per distinct op, the others by their
closed form — equal to the op-by-op sum, and the sweep equal to ``rl.solve``, on every part with
a tile set. (A GEMV floor keeps the closed form: tests/test_gemv_closed_form.py; the split still
prices such ops exactly when asked, below.)"""

from __future__ import annotations

import numpy as np
import pytest

import roofline as rl
from roofline.engine.core import TimeModel, time_model
from roofline.engine.efficiency import flat_efficiency
from roofline.engine.presets import efficiency_for
from roofline.engine.split import many_split, odd_ops
from roofline.engine.tiles import tiles_for
from roofline.graphs.graph import GraphBuilder
from roofline.specs import precision
from roofline.specs.hardware import Hardware, MemoryLevel, list_hardware

PRECS = ("fp16", "bf16", "fp8", "int8")
TILE_PARTS = [k for k in list_hardware() if tiles_for(rl.hardware(k)) is not None]
B = np.arange(1.0, 1025.0)


def _off_closed_form(model: str, **kw: object) -> list[tuple[str, str, TimeModel]]:
    out = []
    m = rl.model(model)
    for p in PRECS:
        g = m.graph(precision=precision(p), **kw)  # type: ignore[arg-type]
        for key in list_hardware():
            hw = rl.hardware(key)
            if hw.has(p):
                tm = TimeModel(g, hw, efficiency_for(hw, "default"))
                if not tm.envelope_ok:
                    out.append((key, p, tm))
    return out


@pytest.mark.parametrize("model,kw", [("resnet50", {}),
                                      ("llama-3.2-1b", {"phase": "decode", "context": 2048})])
def test_split_equals_the_op_by_op_sum(model: str, kw: dict[str, object]) -> None:
    cases = _off_closed_form(model, **kw)
    keys = {k for k, _, _ in cases}
    assert set(TILE_PARTS) <= keys  # every tile-set part's 16-bit rows leave the closed form
    for key, p, tm in cases:
        split = tm.totals_many(B)
        assert tm.many, (key, p)  # the split applies (no coupled terms on zoo parts)
        direct = tm.ops(B).rows()
        rows = [0, 1, 2, 3, 5, 6, 7, 8]  # all but the overhead, a difference of sums
        np.testing.assert_allclose(split[rows], direct[rows], rtol=1e-12, atol=0,
                                   err_msg=f"{model} {key} {p}")
        assert np.all(np.abs(split[4] - direct[4]) <= 1e-12 * direct[0]), (key, p)


def test_sweep_equals_solve_on_every_tile_set_part() -> None:
    batches = [*range(1, 33), 40, 63, 64, 65, 100, 127, 128, 129, 255, 256, 300, 511, 512, 513,
               700, 1000, 1023, 1024]
    s = rl.sweep("resnet50", TILE_PARTS, batch=batches, precision=list(PRECS))
    names = {rl.hardware(k).name: k for k in TILE_PARTS}
    label = {precision(p).label: p for p in PRECS}
    n = 0
    for row in s.to_dicts():
        if not row["feasible"] and np.isnan(row["latency"]):
            continue  # no peak for this dtype
        r = rl.solve("resnet50", names[row["hardware"]], batch=row["batch"],
                     precision=label[row["precision"]])
        assert row["latency"] == pytest.approx(r.latency, rel=1e-12, abs=0), row
        assert row["latency_bound"] == pytest.approx(r.latency_bound, rel=1e-12, abs=0)
        assert row["bottleneck"] == r.bottleneck
        assert row["feasible"] == r.feasible
        n += 1
    assert n >= len(TILE_PARTS) * 2 * len(batches)  # fp16 and bf16 at least, on every part


def test_odd_ops_and_counts_by_hand() -> None:
    """ResNet-50 on an H100: the classifier and the 53 convolutions (implicit GEMMs of at
    least 64 output channels, since session 26) are the ops priced in waves; a graph of the
    same linear op three times and another once at batch-1 rows below a GEMV floor: two
    distinct odd ops, counted 3 and 1."""
    hw = rl.hardware("h100-sxm5")
    g = rl.model("resnet50").graph(precision=precision("bf16"))
    tm = time_model(g, hw, efficiency_for(hw, "default"))
    odd = odd_ops(tm)
    tiled = [nm for nm, c in zip(g.names, g.classes, strict=True) if c in ("conv", "matmul")]
    assert len(tiled) == 54 and tiled[-1] == "fc"
    assert [g.names[i] for i in np.flatnonzero(odd)] == tiled
    sp = many_split(tm)
    # one odd op per distinct (kind, shape): repeated bottleneck convs are counted, not re-priced
    assert sp is not None and sp.counts.sum() == 54.0 and len(sp.counts) < 54
    assert sp.rest is not None and sp.rest.envelope_ok
    assert sp.rest.C0.shape[1] == len(g.names) - 54

    b = GraphBuilder("g", "forward", precision("fp16"))
    for i in range(3):
        b.add("linear", f"A{i}", tokens=1, d_in=4096, d_out=4096)
    b.add("linear", "C", tokens=1, d_in=4096, d_out=1024)
    b.add("elementwise", "E", elements=4096, op="relu")
    g2 = b.build()
    m2 = rl.hardware("apple-m2")
    tm2 = TimeModel(g2, m2, efficiency_for(m2, "default"))
    assert tm2.envelope_ok  # a GEMV floor keeps the closed form; the split, asked, still holds
    assert odd_ops(tm2).tolist() == [True, True, True, True, False]
    sp2 = many_split(tm2)
    assert sp2 is not None and sp2.counts.tolist() == [3.0, 1.0]
    np.testing.assert_allclose(sp2.totals_many(B)[:4], tm2.ops(B).rows()[:4], rtol=1e-13)


def test_coupled_terms_keep_the_op_by_op_sum() -> None:
    """Evicted dispatch couples an op to the bytes of the ops before it: no split."""
    hw = Hardware(key="evict-t", name="evict-t", kind="cpu", peak_flops_per_s={"fp32": 1e15},
                  memory=(MemoryLevel(name="DRAM", capacity_bytes=1e10, bytes_per_s=10e9),))
    eff = flat_efficiency(evicted_dispatch=10e-6, evicted_kind_dispatch=30e-6, evict_after=1e6,
                          dispatch=1e-6, synchronous=True, label="evict")
    b = GraphBuilder("g", "forward", precision("fp32"))
    b.add("linear", "A", tokens=1, d_in=1000, d_out=1000)
    b.add("elementwise", "E", elements=1000, op="relu")
    tm = TimeModel(b.build(), hw, eff)
    assert not tm.envelope_ok and many_split(tm) is None
    assert np.array_equal(tm.totals_many(B[:8]), tm.ops(B[:8]).rows())
