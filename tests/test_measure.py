"""`roofline measure`: the pipeline on injected fake timings (CPU and GPU), real quick runs,
atomic writing, and bad input."""

from __future__ import annotations

import math
import os
import subprocess
import sys
from pathlib import Path

import pytest

import roofline as rl
from roofline.calibrate.backends import FakeBackend, FakeMachine, NumpyBackend
from roofline.calibrate.measure import measure, write_atomic
from roofline.engine.presets import efficiency_for
from roofline.errors import SpecError

FIXED = dict(progress=False, date="2026-01-01", host="example")


def _fake_peak(m: FakeMachine, dtype: str, n: int) -> float:
    eff = m.gemm_max / (1 + m.gemm_a / n + m.gemm_b / n + m.gemm_c / n)
    return 2 * n**3 / (m.per_call_s + 2 * n**3 / (m.peaks[dtype] * eff))


def test_fake_cpu_spec_recovers_the_true_machine(tmp_path: Path) -> None:
    m = FakeMachine()
    out = tmp_path / "fake.toml"
    hw = measure(out, backends=[FakeBackend(m)], **FIXED)
    assert hw.kind == "cpu" and hw.key == "measured-example"
    # fp32 at 2048^3: eff = 0.9 / (1 + 36/2048) = 0.88445; rate = 2*2048^3 / (1 us + t_c)
    assert hw.peak("fp32") == pytest.approx(_fake_peak(m, "fp32", 2048), rel=1e-3)
    assert hw.peak("bf16") == pytest.approx(_fake_peak(m, "bf16", 2048), rel=1e-3)
    assert "fp16" not in hw.peak_flops_per_s  # the fake machine has no fp16
    names = [lv.name for lv in hw.memory]
    assert names == ["DRAM", "LLC", "L2"]  # L1 is hidden under the 1 us per-call cost
    assert [lv.bytes_per_s for lv in hw.memory] == pytest.approx([2.8e10, 5e10, 1.2e11],
                                                                 rel=1e-3)
    # L2 capacity: geometric midpoint of the largest working set at 120 GB/s (add, 12 B x
    # 2^18 = 3145728 B) and the next one measured (copy, 8 B x 2^19 = 4194304 B)
    assert hw.memory[2].capacity_bytes == pytest.approx(math.sqrt(3145728 * 4194304), rel=1e-3)
    assert hw.memory[0].capacity_bytes == pytest.approx(64e9, rel=1e-3)
    prov = hw.provenance["peak.fp32"]
    assert prov.measured and "2026-01-01" in prov.source and "example" in prov.source
    eff = efficiency_for(hw, "default")
    assert eff.launch.dispatch == pytest.approx(1e-6, rel=1e-3)
    assert eff.page_faults.seconds == pytest.approx(0.75e-6, rel=1e-3)
    assert eff.page_faults.fresh_min == 32 * 2**20
    peak = hw.peak("fp32")
    # elementwise: the rate of tanh-GELU (the class's most FLOP-heavy op per element), 7.5
    # GFLOP/s, from the slope between two sizes (the fixed per-call cost drops out)
    assert eff.vector.max == pytest.approx(7.5e9 / peak, rel=2e-3)
    # norm: LayerNorm's 20 GFLOP/s (8 FLOPs per element against BatchNorm's 2)
    assert eff.vector.norm == pytest.approx(20e9 / peak, rel=2e-3)
    # fixed per-call cost by class: intercepts of the two-size fits (norm 4 us, softmax 2 us,
    # elementwise the machine's 1 us) and minimal calls (attention 8 us, embedding 2 us, copy
    # 1.5 us), as FakeMachine.class_call_s sets them
    want = {"norm": 4e-6, "softmax": 2e-6, "elementwise": 1e-6, "pool": 1e-6,
            "attention": 8e-6, "embedding": 2e-6, "movement": 1.5e-6}
    assert dict(eff.launch.by_class) == pytest.approx(want, rel=2e-3)
    assert eff.vector.softmax == pytest.approx(12.5e9 / peak, rel=2e-3)
    assert eff.vector.pool == pytest.approx(0.7e9 / peak, rel=2e-3)
    assert eff.launch.synchronous and eff.label == "measured/measured-example"
    # one op reading cold weights: 0.6 of the DRAM STREAM bandwidth (FakeMachine); recorded in
    # [measurement], not applied (main_read_max stays neutral)
    assert eff.memory.main_read is None
    import tomllib

    raw = tomllib.loads(out.read_text())["measurement"]["cold_read_bytes_per_s"]
    assert raw == pytest.approx([0.6 * 2.8e10] * len(raw), rel=1e-2)
    # convolutions and fused attention run at 0.8 and 0.5 of the GEMM efficiency (FakeMachine)
    assert eff.conv.scale == pytest.approx(m.conv_scale, rel=0.03)
    assert eff.attention.scale == pytest.approx(m.attention_scale, rel=0.03)
    # the GEMM model reproduces the fake machine's efficiency on unseen shapes within 5 %
    for M, N, K in ((24, 3000, 700), (700, 48, 2000), (4096, 4096, 40)):
        true = m.gemm_max / (1 + m.gemm_a / M + m.gemm_b / N + m.gemm_c / K) * m.peaks["fp32"]
        fit = eff.gemm.max / (1 + eff.gemm.a / M + eff.gemm.b / N + eff.gemm.c / K) * peak
        assert fit == pytest.approx(true, rel=0.05)
    # the written file loads like a zoo entry and the default preset uses its model
    again = rl.hardware(str(out))
    assert again.peak_flops_per_s == hw.peak_flops_per_s
    assert efficiency_for(again, "default").vector.max == eff.vector.max
    r = rl.solve("resnet18", str(out), batch=1, precision="fp32")
    assert r.feasible and r.latency > r.latency_bound


def test_fake_gpu_path() -> None:
    m = FakeMachine(kind="gpu", peaks={"fp64": 6.7e13, "fp32": 6.7e13, "bf16": 9.89e14,
                                       "fp16": 9.89e14},
                    levels=((50e6, 1.0e13), (141e9, 4.3e12)), per_call_s=1e-6, page_s=0.0,
                    name="fake-h200")
    hw = measure(backends=[FakeBackend(m)], **FIXED)
    assert hw.kind == "gpu"
    assert [lv.name for lv in hw.memory] == ["HBM", "L2"]
    assert hw.memory_bytes_per_s == pytest.approx(4.3e12, rel=1e-3)
    assert hw.memory[1].bytes_per_s == pytest.approx(1.0e13, rel=1e-3)
    # bf16 at 8192^3: the fake machine's efficiency at 8192; the launch overlaps the kernel
    n = 8192
    eff_t = m.gemm_max / (1 + (m.gemm_a + m.gemm_b + m.gemm_c) / n)
    assert hw.peak("bf16") == pytest.approx(m.peaks["bf16"] * eff_t, rel=1e-3)
    eff = efficiency_for(hw, "default")
    assert not eff.launch.synchronous and eff.page_faults is None
    assert eff.launch.dispatch == pytest.approx(1e-6, rel=1e-3)
    r = rl.solve("llama-3.1-8b", hw, batch=1, precision="bf16", phase="decode", context=1024)
    assert r.feasible and r.bottleneck == "memory"


def test_numpy_only_measures_and_says_what_it_skipped() -> None:
    hw = measure(backends=[NumpyBackend(min_time_s=0.002, min_reps=3)], quick=True, **FIXED)
    assert set(hw.peak_flops_per_s) == {"fp64", "fp32"}
    tbl = hw.efficiency_table or {}
    assert "needs" not in str(tbl["vector"].get("max"))  # taken from the default preset, cited
    assert "default" in tbl["vector"]["max"]["source"]
    assert efficiency_for(hw, "default").vector.max == pytest.approx(0.3)


def test_quick_real_measurement_with_torch() -> None:
    pytest.importorskip("torch")
    hw = measure(quick=True, **FIXED)
    assert hw.peak("fp32") > 1e9 and hw.memory_bytes_per_s > 1e8
    assert "bf16" in hw.peak_flops_per_s
    eff = efficiency_for(hw, "default")
    assert 0 < eff.gemm.max <= 1 and eff.launch.dispatch > 0
    assert "BLAS" in hw.provenance["peak.fp32"].source


class _Boom(FakeBackend):
    def stream(self, kernel: str, n: int):  # type: ignore[no-untyped-def]
        raise KeyboardInterrupt


class _MustNotRun(FakeBackend):
    def tiny(self):  # type: ignore[no-untyped-def]
        raise AssertionError("measured before checking the output path")


def test_unwritable_output_fails_before_measuring(tmp_path: Path) -> None:
    with pytest.raises(SpecError, match="does not exist"):
        measure(tmp_path / "nope" / "x.toml", backends=[_MustNotRun()], **FIXED)
    with pytest.raises(SpecError, match="is a directory"):
        measure(tmp_path, backends=[_MustNotRun()], **FIXED)
    if os.geteuid() != 0:  # root ignores directory permissions
        ro = tmp_path / "ro"
        ro.mkdir()
        ro.chmod(0o500)
        with pytest.raises(SpecError, match="cannot write"):
            measure(ro / "x.toml", backends=[_MustNotRun()], **FIXED)


def test_interrupted_run_leaves_no_file(tmp_path: Path) -> None:
    out = tmp_path / "m.toml"
    with pytest.raises(KeyboardInterrupt):
        measure(out, backends=[_Boom()], **FIXED)
    assert list(tmp_path.iterdir()) == []


def test_write_atomic_keeps_old_file_on_failure(tmp_path: Path,
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    p = tmp_path / "spec.toml"
    p.write_text("old")

    def fail(*a: object) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr(os, "replace", fail)
    with pytest.raises(KeyboardInterrupt):
        write_atomic(p, "new")
    assert p.read_text() == "old" and [x.name for x in tmp_path.iterdir()] == ["spec.toml"]


def test_cli_measure(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                     capsys: pytest.CaptureFixture[str]) -> None:
    from roofline.calibrate import measure as mm
    from roofline.cli import main

    monkeypatch.setattr(mm, "default_backends", lambda *a, **k: [FakeBackend()])
    out = tmp_path / "cli.toml"
    assert main(["measure", "-o", str(out), "-q"]) == 0
    assert rl.hardware(str(out)).kind == "cpu"
    assert main(["measure", "-o", str(tmp_path / "no" / "x.toml")]) == 2
    assert "does not exist" in capsys.readouterr().err
    monkeypatch.setattr(mm, "default_backends", lambda *a, **k: [_Boom()])
    assert main(["measure", "-o", str(tmp_path / "y.toml"), "-q"]) == 130
    assert "interrupted; nothing was written" in capsys.readouterr().err
    assert not (tmp_path / "y.toml").exists()


def test_import_roofline_does_not_import_torch() -> None:
    code = ("import sys, roofline; import roofline.calibrate.measure; "
            "print('torch' in sys.modules, 'matplotlib' in sys.modules)")
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True)
    assert res.stdout.split() == ["False", "False"]


def test_without_torch_measure_falls_back_to_numpy(monkeypatch: pytest.MonkeyPatch) -> None:
    from roofline.calibrate.measure import default_backends

    monkeypatch.setitem(sys.modules, "torch", None)
    notes: list[str] = []
    bes = default_backends(quick=True, notes=notes)
    assert [b.name for b in bes] == ["numpy"]
    assert "PyTorch is not installed" in notes[0] and "roofline[torch]" in notes[0]
    with pytest.raises(SpecError, match="no CUDA device"):
        default_backends("cuda")


def test_bf16_gets_its_own_gemm_model(tmp_path: Path) -> None:
    # a machine whose bf16 (AMX-like) GEMMs fill up far more slowly than its fp32 ones: the
    # fp32 model would predict bf16 GEMMs off the validation shapes by ~1.5x; the bf16 model
    # fitted to other shapes predicts them within a few per cent
    from roofline.calibrate.validate import _predict
    from roofline.calibrate.workloads import _linear

    m = FakeMachine()
    slow = FakeMachine(gemm_a=40.0, gemm_b=300.0, gemm_c=200.0)  # its GEMMs, any dtype

    class Mixed(FakeBackend):
        def gemm(self, dtype: str, mm: int, n: int, k: int):  # type: ignore[no-untyped-def]
            if dtype == "bf16":
                return FakeBackend(slow).gemm(dtype, mm, n, k)
            return super().gemm(dtype, mm, n, k)

    hw = measure(tmp_path / "mixed.toml", backends=[Mixed(m)], **FIXED)
    eff = efficiency_for(hw, "default")
    assert eff.gemm_bf16 is not None and eff.gemm_bf16.max > 0
    assert "fitted" not in eff.provenance["gemm_bf16.a"].source
    assert "bf16 GEMM shapes" in eff.provenance["gemm_bf16.a"].derivation
    for mm, n, k in ((1024, 1024, 1024), (128, 3072, 768)):
        truth = FakeBackend(slow).gemm("bf16", mm, n, k).median_s
        pred = _predict(_linear(mm, n, k, "bf16"), hw)[0]
        assert pred == pytest.approx(truth, rel=0.06)
    # fp32 matmuls keep the fp32 model
    assert eff.gemm_for("fp32") is eff.gemm and eff.gemm_for("bf16") is eff.gemm_bf16


def test_vector_sizes_stay_inside_the_innermost_stream_plateau() -> None:
    from roofline.calibrate.measure import PARALLEL_MIN_ELEMS, vector_sizes
    from roofline.calibrate.timing import Sample

    def stream(curve: dict[float, float]) -> list[tuple[str, float, Sample]]:
        return [("copy", ws, Sample(median_s=ws / bw, p10_s=ws / bw, p90_s=ws / bw, n=5))
                for ws, bw in curve.items()]

    KiB = 1024.0
    # best rate up to 1.5 MiB, then a cache boundary: 1.5 MiB / 8 B = 196,608 -> 2^17
    two_threads = {512 * KiB: 60e9, 1536 * KiB: 94e9, 2048 * KiB: 72e9, 4096 * KiB: 47e9}
    assert vector_sizes(stream(two_threads), 2**18) == (2**17, PARALLEL_MIN_ELEMS)
    # one core's plateau ends at 768 KiB: 98,304 elements -> 2^16, raised to twice the
    # parallel minimum so the two sizes still differ by 2x
    one_thread = {384 * KiB: 69e9, 768 * KiB: 67e9, 1024 * KiB: 46e9, 2048 * KiB: 27e9}
    assert vector_sizes(stream(one_thread), 2**18) == (2 * PARALLEL_MIN_ELEMS,
                                                       PARALLEL_MIN_ELEMS)
    # a large cache: capped at the plan's largest size, the smaller a quarter of it
    big_cache = {4096 * KiB: 200e9, 16384 * KiB: 190e9, 65536 * KiB: 40e9}
    assert vector_sizes(stream(big_cache), 2**18) == (2**18, 2**16)


def _flat(tbl: dict) -> dict:
    """A grouped ``[efficiency]`` table written back in the flat keys of earlier files."""
    from roofline.engine.efficiency import FLAT_KEYS

    name = {f"{g}.{f}": k for k, (g, f, _) in FLAT_KEYS.items()}
    out = {}
    for k, v in tbl.items():
        if k == "workspace":
            out[k] = v
        elif k == "cpu":
            for sub, fields in v.items():
                out.update({name[f"cpu.{sub}.{f}"]: q for f, q in fields.items()})
        else:
            out.update({(f if f.startswith("dispatch_") else name[f"{k}.{f}"]): q
                        for f, q in v.items()})
    return out


def test_the_writer_writes_grouped_tables_that_read_as_the_flat_ones(tmp_path) -> None:
    """measure writes [efficiency.gemm], ..., [efficiency.cpu.cold]; the same factors written
    flat (the format of files before the grouping, still read) give the same Efficiency."""
    from roofline.engine.efficiency import read_efficiency
    from roofline.specs.hardware import SYNCHRONOUS_KINDS

    out = tmp_path / "m.toml"
    hw = measure(out, backends=[FakeBackend()], **FIXED)
    text = out.read_text(encoding="utf-8")
    for group in ("gemm", "gemm_bf16", "conv", "attention", "vector", "memory", "launch",
                  "cpu.page_faults", "cpu.cold", "cpu.evicted"):
        assert f"\n[efficiency.{group}]\n" in text
    for flat in ("gemm_max", "vector_max", "cold_after", "page_fault", "evicted_dispatch"):
        assert f"\n{flat} = " not in text
    tbl = dict(hw.efficiency_table or {})
    assert set(tbl) == {"workspace", "gemm", "gemm_bf16", "conv", "attention", "vector",
                        "memory", "launch", "cpu"}
    sources = {"m": "measured", "default": "default preset", "glibc": "glibc"}
    kw = dict(sources=sources, origin="test", label=f"measured/{hw.key}",
              synchronous=hw.kind in SYNCHRONOUS_KINDS)
    grouped = read_efficiency(tbl, **kw)
    flat = read_efficiency(_flat(tbl), **kw)
    assert grouped == flat
    assert grouped == efficiency_for(hw, "default")
    assert grouped.cold is not None and grouped.page_faults is not None
    # the sub-tables' source ids resolve to the file's citations, as the flat keys' did
    prov = efficiency_for(hw, "default").provenance
    assert prov["gemm.max"].source.startswith("measured: roofline measure")
    assert prov["cpu.cold.read_max"].source.startswith("measured: roofline measure")
    assert prov["workspace"].source.startswith("roofline data/presets/default.toml")


def test_an_old_flat_measured_file_still_loads() -> None:
    """docs/validation/cpu-run/measured.toml was written flat (gemm_max, cold_after, ...)."""
    path = Path(__file__).parents[1] / "docs" / "validation" / "cpu-run" / "measured.toml"
    text = path.read_text(encoding="utf-8")
    assert "\ngemm_max = " in text and "[efficiency.gemm]" not in text
    hw = rl.hardware(path)
    eff = efficiency_for(hw, "default")
    tbl = hw.efficiency_table or {}
    assert eff.gemm.max == pytest.approx(tbl["gemm_max"]["value"])
    assert eff.launch.dispatch == pytest.approx(tbl["dispatch"]["value"] * 1e-6)
    assert eff.cold is not None and eff.cold.read_max == pytest.approx(
        tbl["cold_read_max"]["value"])
