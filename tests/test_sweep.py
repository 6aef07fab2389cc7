"""Sweeps are per-op, vectorised, and agree with single solves; crossover detection."""

import pytest

import roofline as rl


@pytest.mark.parametrize("preset", ["bound", "default"])
def test_sweep_matches_solve(preset):
    batches = [1, 2, 4, 8, 16, 32, 64, 128, 256]
    s = rl.sweep("resnet50", ["A100", "H100"], batch=batches, precision="fp16", preset=preset)
    assert len(s) == 18
    for row in s.to_dicts():
        hw = "A100" if "A100" in row["hardware"] else "H100"
        r = rl.solve("resnet50", hw, batch=row["batch"], preset=preset)
        assert row["latency"] == pytest.approx(r.latency, rel=1e-12)
        assert row["bottleneck"] == r.bottleneck
        assert row["memory_footprint"] == pytest.approx(r.memory_footprint)


def test_crossover_bert():
    batches = [1, 2, 4, 8, 16, 32, 64, 128]
    s = rl.sweep("bert-base-uncased", ["A100", "H100"], batch=batches, seq_len=128,
                 preset="bound", fuse=True)
    cross = s.crossover()
    a100, h100 = (cross[rl.hardware(h).name] for h in ("A100", "H100"))
    # the higher ridge point of H100 (295 vs 153 FLOP/B) needs a bigger batch
    assert a100 is not None and h100 is not None and h100 >= a100
    # crossover is the first compute-bound batch
    for hw, b0 in cross.items():
        rows = [r for r in s.to_dicts() if r["hardware"] == hw]
        assert all(r["bottleneck"] != "compute" for r in rows if r["batch"] < b0)


def test_sweep_precisions_and_missing_dtype():
    s = rl.sweep("resnet18", ["A100", "H100"], batch=[1, 64], precision=["fp16", "fp8"])
    rows = s.to_dicts()
    fp8_a100 = [r for r in rows if r["precision"] == "fp8" and "A100" in r["hardware"]]
    assert fp8_a100 and all(not r["feasible"] and "fp8" in r["reason"] for r in fp8_a100)
    fp8_h100 = [r for r in rows if r["precision"] == "fp8" and "H100" in r["hardware"]]
    assert all(r["feasible"] for r in fp8_h100)
    assert set(s.crossover()) == {f"{rl.hardware(h).name} {p}" for h in ("A100", "H100")
                                  for p in ("fp16", "fp8")}


def test_sweep_to_pandas():
    pd = pytest.importorskip("pandas")
    df = rl.sweep("resnet18", "T4", batch=[1, 2]).to_pandas()
    assert isinstance(df, pd.DataFrame) and list(df["batch"]) == [1, 2]


def test_sweep_mlsysim_preset_rows():
    s = rl.sweep("resnet50", ["A100", "H100"], batch=[1, 2, 4], preset="mlsysim")
    assert s.crossover() == {rl.hardware("A100").name: 2, rl.hardware("H100").name: 4}
