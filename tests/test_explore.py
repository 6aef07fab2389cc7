"""Design-space exploration, local path (issue: "Explore design spaces beyond one machine")."""

from __future__ import annotations

import numpy as np
import pytest

import roofline as rl
from roofline.spaces.reduce import pareto_mask

OBJ = ["tokens_per_s_per_device", "-power_w"]


def _decode_space(**kw):
    base = dict(model=["llama-3.2-1b", "llama-3.1-8b"],
                hardware=["H100", rl.hardware_grid(base="H100", peak_scale=[0.5, 2],
                                                   bandwidth_scale=[1, 2])],
                scenario=dict(phase="decode", batch=[1, 4, 16, 64], context=[1024, 8192],
                              precision=["bf16", "fp8"], tp=[1, 2]), hw_per_chunk=3)
    base.update(kw)
    return rl.Space(**base)


def test_space_size_and_hypothetical_parts():
    g = rl.hardware_grid(base="H100", peak_scale=[0.5, 1, 2], bandwidth_scale=[1, 3],
                         capacity_gib=[80, 141])
    assert len(g) == 12
    h = g[0].build()
    assert "hypothetical" in h.name and "~" in h.key
    assert h.peak("bf16") == pytest.approx(0.5 * rl.hardware("H100").peak("bf16"))
    assert h.memory_capacity_bytes == 80 * 2**30
    s = _decode_space()
    # 2 models x 5 parts x 2 precisions x 2 tp x 4 batches x 2 contexts
    assert s.size == 2 * 5 * 2 * 2 * 4 * 2 == 320
    assert sum(c.size for c in s.chunks()) == s.size


def test_decode_points_equal_serve():
    res = rl.explore(_decode_space(), objectives=OBJ, keep=True)
    df = res.to_pandas()
    assert len(df) == 320 and res.evaluated == 320
    row = df[(df.model == "llama-3.1-8b") & (df.hardware == "NVIDIA H100 SXM5 80GB")
             & (df.precision == "bf16") & (df.tp == 1) & (df.batch == 16)
             & (df.context == 8192)].iloc[0]
    # a decode step at context S is serve's TPOT of a 2-token generation after S-1 prompt
    # tokens (its one decode step sees S tokens)
    s = rl.serve("llama-3.1-8b", "H100", batch=16, prompt_len=8191, output_len=2)
    assert row.tpot == pytest.approx(s.tpot, rel=1e-12)
    assert row.tokens_per_s_per_device == pytest.approx(16 / s.tpot, rel=1e-12)


def test_pareto_is_exactly_the_non_dominated_constrained_points():
    res = rl.explore(_decode_space(), objectives=OBJ, constraints=["tpot <= 0.020", "fits"],
                     keep=True)
    df = res.to_pandas()
    ok = df[(df.tpot <= 0.020) & df.fits]
    assert res.passed == len(ok)
    F = np.stack([ok.tokens_per_s_per_device.to_numpy(), -ok.power_w.to_numpy()], axis=1)
    expect = ok[pareto_mask(F)]
    front = res.pareto
    assert len(front) == len(expect) > 0
    for t, p in zip(front["tokens_per_s_per_device"], front["power_w"]):
        dominated = (ok.tokens_per_s_per_device >= t) & (ok.power_w <= p) & (
            (ok.tokens_per_s_per_device > t) | (ok.power_w < p))
        assert not dominated.any()
    top = res.top(5, by="tokens_per_s_per_device")
    best = np.sort(ok.tokens_per_s_per_device.to_numpy())[::-1][:5]
    assert np.array_equal(np.asarray(top["tokens_per_s_per_device"]), best)
    low = res.top(3, by="-power_w")
    assert np.asarray(low["power_w"]) == pytest.approx(np.sort(ok.power_w.to_numpy())[:3])


def test_solve_space_equals_solve():
    s = rl.Space(model="resnet50", hardware=["A100", "H100"],
                 scenario=dict(batch=[1, 8, 64], precision=["fp16", "fp8"]))
    res = rl.explore(s, objectives=["throughput"], constraints=["fits"], keep=True)
    df = res.to_pandas()
    r = rl.solve("resnet50", "H100", batch=8, precision="fp8")
    row = df[(df.hardware == r.hardware) & (df.batch == 8) & (df.precision == "fp8")].iloc[0]
    assert row.latency == pytest.approx(r.latency, rel=1e-12)
    # the A100 has no fp8: those points do not fit (cannot run), never a number
    a = df[(df.hardware.str.contains("A100")) & (df.precision == "fp8")]
    assert len(a) == 3 and not a.fits.any()


def test_serve_and_train_spaces():
    s = rl.Space(model="llama-3.1-8b", hardware=["H100", "A100"],
                 scenario=dict(batch=[1, 8], prompt_len=[512], output_len=[64], tp=[1, 2]))
    assert s.kind == "serve" and s.size == 8
    res = rl.explore(s, objectives=["tokens_per_s_per_device"], keep=True)
    df = res.to_pandas()
    one = rl.serve("llama-3.1-8b", "A100", batch=8, prompt_len=512, output_len=64, tp=2)
    row = df[(df.hardware == one.hardware) & (df.batch == 8) & (df.tp == 2)].iloc[0]
    assert row.ttft == pytest.approx(one.ttft, rel=1e-12)
    t = rl.Space(model="llama-3.1-8b", hardware="dgx-h100",
                 points=[dict(global_batch=256, seq_len=4096, tp=tp) for tp in (1, 2, 4)])
    assert t.kind == "train"
    tr = rl.explore(t, objectives=["tokens_per_s"], keep=True).to_pandas()
    assert tr.step_time.iloc[1] == pytest.approx(
        rl.train("llama-3.1-8b", "dgx-h100", global_batch=256, seq_len=4096, tp=2).step_time)


def test_a_failing_chunk_is_reported_with_its_coordinates():
    from roofline.spaces.evaluate import evaluate_chunk

    def flaky(chunk):
        if chunk.index == 2:
            raise RuntimeError("boom")
        return evaluate_chunk(chunk)

    s = _decode_space()
    res = rl.explore(s, objectives=OBJ, _chunk_fn=flaky)
    assert len(res.failed) == 1
    f = res.failed[0]
    assert f["chunk"] == 2 and "boom" in f["error"] and "model" in f and "hardware" in f
    lost = [c for c in s.chunks() if c.index == 2][0].size
    assert res.evaluated == s.size - lost


def test_parquet_out_streams_every_point(tmp_path):
    pytest.importorskip("pyarrow")
    import pandas as pd

    path = tmp_path / "points.parquet"
    res = rl.explore(_decode_space(), objectives=OBJ, out=str(path), keep=True)
    back = pd.read_parquet(path)
    assert len(back) == res.evaluated
    np.testing.assert_array_equal(back.tpot.to_numpy(), res.to_pandas().tpot.to_numpy())


@pytest.mark.parametrize("kw, match", [
    (dict(scenario=dict(phase="decode", batch=[], context=[1], tp=[1])), "empty"),
    (dict(hardware=[]), "hardware"),
    (dict(scenario=dict(phase="decode", batch=[1], context=[1], tp=[1], bogus=1)), "bogus"),
])
def test_bad_spaces(kw, match):
    with pytest.raises(rl.RooflineError, match=match):
        _decode_space(**kw)


def test_bad_objectives_constraints_and_scheduler():
    s = _decode_space()
    with pytest.raises(rl.RooflineError, match="unknown field 'tokens_per_sec'"):
        rl.explore(s, objectives=["tokens_per_sec"])
    with pytest.raises(rl.RooflineError, match="not a comparison"):
        rl.explore(s, objectives=OBJ, constraints=["tpot is small"])
    with pytest.raises(rl.RooflineError, match="unknown field"):
        rl.explore(s, objectives=OBJ, constraints=["latency <= 1"])  # decode has tpot
    with pytest.raises(rl.RooflineError, match="yes/no"):
        rl.explore(s, objectives=OBJ, constraints=["tpot"])
    with pytest.raises(rl.RooflineError, match="empty"):
        rl.hardware_grid(base="H100", peak_scale=[])
    pytest.importorskip("dask.distributed")
    with pytest.raises(rl.RooflineError, match="does not answer"):
        rl.explore(s, objectives=OBJ, scheduler="tcp://127.0.0.1:9", timeout=1.0)


def test_vectorised_allreduce_equals_the_scalar_formula():
    """serve_sweep prices a tp all-reduce for every batch at once: the array form reads each
    algorithm's α-β line off ops.collectives and must equal the scalar call everywhere."""
    from roofline.scenarios.serving import plan as sp
    from roofline.scenarios.serving.comm import allreduce_time, allreduce_times

    n = np.array([0, 1e3, 8192 * 2, 8192 * 2 * 64, 8192 * 2 * 512, 1e8])
    for eng in ("trtllm", "vllm", "eager"):
        f = sp.serving_factors(eng)
        for hw in ("H100", "A100", "MI300X", "gaudi3"):
            h = rl.hardware(hw)
            for tp in (1, 2, 4, 8):
                want = np.array([allreduce_time(x, tp, h, f) for x in n])
                np.testing.assert_allclose(allreduce_times(n, tp, h, f), want, rtol=1e-12)


def test_cli_explore(tmp_path, capsys):
    from roofline.cli import main

    f = tmp_path / "space.toml"
    f.write_text('''kind = "decode"
model = ["llama-3.2-1b"]
hardware = ["H100"]
objectives = ["tokens_per_s_per_device", "-power_w"]
constraints = ["tpot <= 0.010", "fits"]

[[grid]]
base = "H100"
bandwidth_scale = [2]

[scenario]
phase = "decode"
batch = {start = 1, stop = 9}
context = [1024]
tp = [1]
''', encoding="utf-8")
    out_file = tmp_path / "points.parquet"
    assert main(["explore", str(f), "--json", "-o", str(out_file)]) == 0
    import json

    got = json.loads(capsys.readouterr().out)
    assert got["size"] == 2 * 8 and got["evaluated"] == 16
    assert got["pareto"] and all(r["tpot"] <= 0.010 for r in got["pareto"])
    assert out_file.exists()
    f.write_text('model = ["llama-3.2-1b"]\nhardware = ["H100"]\nobjectives = ["speed"]\n'
                 '[scenario]\nphase = "decode"\nbatch = [1]\ncontext = [8]\ntp = [1]\n',
                 encoding="utf-8")
    assert main(["explore", str(f)]) == 2
    assert "unknown field 'speed'" in capsys.readouterr().err


def test_decode_cost_per_million_tokens_from_the_sourced_price():
    from roofline.analysis.economics import device_price

    s = rl.Space(model="llama-3.1-8b", hardware=["H100", rl.hardware_grid(base="H100")],
                 scenario=dict(phase="decode", batch=[64], context=[2048], tp=[2]))
    df = rl.explore(s, objectives=["-cost_per_million_output_tokens"], keep=True).to_pandas()
    usd, _ = device_price(rl.hardware("H100"), None)
    real = df[~df.hypothetical].iloc[0]
    # 2 devices x USD/h / 3600 s/h / (tokens/s) x 1e6 tokens
    assert real.cost_per_million_output_tokens == pytest.approx(
        2 * usd / 3600 / real.tokens_per_s * 1e6, rel=1e-12)
    assert np.isnan(df[df.hypothetical].iloc[0].cost_per_million_output_tokens)  # no price


def test_power_and_energy_are_the_power_models_as_solve_and_serve_sweep_price_them():
    """power_w: the power model at the point's activity (not TDP); decode energy per token:
    serve_sweep's facility figure (device power x PUE / tokens/s); solve energy per sample:
    rl.solve's own."""
    from roofline.analysis.economics import economics
    from roofline.analysis.power import power_model
    from roofline.scenarios.serving import serve_sweep

    s = rl.Space(model="llama-3.1-8b", hardware=["H100", "MI300X"],
                 scenario=dict(phase="decode", batch=[1, 64], context=[2048], tp=[2]))
    df = rl.explore(s, objectives=["tokens_per_s_per_device"], keep=True).to_pandas()
    sw = serve_sweep("llama-3.1-8b", ["H100", "MI300X"], batch=[1, 64], context=[2048],
                        precision=["fp16"], tp=2)
    for i, name in enumerate(("H100", "MI300X")):
        hw = rl.hardware(name)
        pm, pue = power_model(hw), economics(hw, devices=1, units_per_s=1.0,
                                             utilisation=0.5, unit="token").pue
        rows = df[df.hardware == hw.name].sort_values("batch")
        a = sw["power_activity"][i, 0, :, 0]
        want_w = 2 * (pm.idle_w + (pm.peak_w - pm.idle_w) * a)
        assert rows.power_w.to_numpy() == pytest.approx(want_w, rel=1e-12)
        assert np.all(rows.power_w.to_numpy() < 2 * hw.tdp_w)  # below TDP at these points
        assert rows.energy_per_output_token.to_numpy() == pytest.approx(
            sw["energy_per_token"][i, 0, :, 0], rel=1e-12)
        assert rows.energy_per_output_token.to_numpy() == pytest.approx(
            rows.power_w.to_numpy() * pue / rows.tokens_per_s.to_numpy(), rel=1e-9)
    s2 = rl.Space(model="resnet50", hardware=["A100", "H100"], scenario=dict(batch=[1, 32]))
    for _, r in rl.explore(s2, objectives=["throughput"], keep=True).to_pandas().iterrows():
        x = rl.solve("resnet50", r.hardware, batch=int(r.batch))
        assert r.energy_per_sample == pytest.approx(x.energy_per_sample, rel=1e-9)
        assert r.power_w == pytest.approx(x.energy / x.latency, rel=1e-9)
