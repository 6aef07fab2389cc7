"""The hardware zoo and loader: sources required, units explicit, aliases, clear errors."""

import math
import tomllib
from pathlib import Path

import pytest

import roofline as rl
from roofline.errors import SourceError, SpecError, UnknownNameError, UnsupportedDtypeError
from roofline.units import GiB

ZOO = Path(rl.__file__).parent / "data" / "hardware"
REQUIRED = ["V100", "T4", "A10G", "L4", "L40S", "a100-sxm4-40gb", "a100-sxm4-80gb", "h100-sxm5",
            "h100-pcie", "H200", "B200", "GB200", "MI250X", "MI300X", "MI325X", "tpu-v4",
            "tpu-v5e", "tpu-v5p", "tpu-v6e", "gaudi2", "gaudi3", "trainium2",
            "jetson-agx-orin-64gb", "jetson-orin-nano-8gb", "apple-m2-max", "apple-m3-max",
            "xeon-platinum-8480plus", "epyc-9654", "raspberry-pi-5"]


def test_zoo_size_and_required_parts():
    assert len(rl.list_hardware()) >= 30
    for name in REQUIRED:
        assert rl.hardware(name).key in rl.list_hardware()


def test_seed_figures_pinned_to_data():
    a100 = rl.hardware("A100")
    assert a100.key == "a100-sxm4-80gb"
    assert a100.peak("fp16") == 312e12 and a100.memory_bytes_per_s == 2039e9
    assert a100.memory_capacity_bytes == 80 * GiB
    assert a100.ridge_point("fp16") == pytest.approx(312e12 / 2039e9)  # 153.0 FLOP/B
    h100 = rl.hardware("h100")
    assert h100.peak("bf16") == 989e12 and h100.memory_bytes_per_s == 3.35e12


@pytest.mark.parametrize("path", sorted(ZOO.rglob("*.toml")), ids=lambda p: p.stem)
def test_every_number_has_a_source(path):
    doc = tomllib.loads(path.read_text())
    hw = rl.hardware(doc["key"])
    # every peak and memory number in the file reached the spec with its provenance
    for dtype in hw.peak_flops_per_s:
        assert hw.provenance[f"peak.{dtype}"].source
    for i, level in enumerate(hw.memory):
        assert hw.provenance[f"memory.{i}.capacity"].source
        if not math.isnan(level.bytes_per_s):
            assert hw.provenance[f"memory.{i}.bandwidth"].source
    # values in the spec equal the file's numbers times their unit
    from roofline.units import UNIT_SCALE
    for dtype, raw in doc["peak"].items():
        assert hw.peak(dtype) == pytest.approx(raw["value"] * UNIT_SCALE[raw["unit"]])


def test_aliases_case_insensitive_and_typos_suggested():
    assert rl.hardware("a100") is rl.hardware("A100")
    with pytest.raises(UnknownNameError, match="A100") as e:
        rl.hardware("A1000")
    assert isinstance(e.value, KeyError)


def test_missing_dtype_names_what_the_part_has():
    with pytest.raises(UnsupportedDtypeError, match="fp16") as e:
        rl.hardware("A100").peak("fp8")
    assert "has no fp8" in str(e.value) and isinstance(e.value, ValueError)


GOOD = """
schema = 1
key = "my-gpu"
name = "My GPU"
kind = "gpu"
[sources]
ds = "My GPU datasheet, table 1"
[peak]
fp16 = { value = 100, unit = "TFLOP/s", source = "ds" }
[[memory]]
name = "HBM"
capacity = { value = 16, unit = "GiB", source = "ds" }
bandwidth = { value = 1000, unit = "GB/s", source = "ds" }
"""


def test_user_spec_file(tmp_path):
    p = tmp_path / "my_gpu.toml"
    p.write_text(GOOD)
    hw = rl.hardware(str(p))
    assert hw.peak("fp16") == 100e12 and hw.memory_capacity_bytes == 16 * 2**30
    assert hw.memory_bytes_per_s == 1e12  # decimal GB/s
    assert hw.provenance["peak.fp16"].source == "My GPU datasheet, table 1"
    r = rl.solve("resnet50", hw, batch=4)
    assert r.feasible and r.latency > 0


@pytest.mark.parametrize("edit, match, exc", [
    (('unit = "TFLOP/s", source = "ds" }', 'unit = "TFLOP/s" }'), "source", SourceError),
    (('unit = "TFLOP/s"', 'unit = "TFLOPS"'), "unit", SpecError),
    (('unit = "GiB"', 'unit = "GB/s"'), "bytes unit", SpecError),
    (('fp16 =', 'fp17 ='), "fp17", SpecError),
    (('kind = "gpu"', 'kind = "gpus"'), "kind", SpecError),
    (('value = 100', 'value = -100'), ">= 0", SpecError),
    (('[peak]', '[peek]'), "peek", SpecError),
])
def test_bad_spec_files_are_clear_errors(tmp_path, edit, match, exc):
    p = tmp_path / "bad.toml"
    p.write_text(GOOD.replace(*edit, 1))
    with pytest.raises(exc, match=match):
        rl.hardware(str(p))


def test_malformed_toml_and_missing_file(tmp_path):
    p = tmp_path / "broken.toml"
    p.write_text("key = [unclosed")
    with pytest.raises(SpecError, match="not valid TOML"):
        rl.hardware(str(p))
    with pytest.raises(SpecError, match="cannot read"):
        rl.hardware(str(tmp_path / "nope.toml"))


def test_sparse_figures_are_not_values():
    # every note that mentions sparsity sits beside a dense value, e.g. H100 fp16 989 (1979 sparse)
    for key in rl.list_hardware():
        hw = rl.hardware(key)
        for dtype, prov in hw.provenance.items():
            if "sparsity" in prov.note.lower() and dtype.startswith("peak."):
                # the sparse number in the note is about twice the value used
                assert prov.value > 0


def test_runtime_workspace_is_a_per_part_datum(tmp_path):
    from roofline.engine.presets import efficiency_for

    # the kind's default (1 GiB for a GPU) unless the file gives its own
    assert efficiency_for(rl.hardware("A100"), "default").workspace == 2**30
    p = tmp_path / "small.toml"
    p.write_text(GOOD + '[runtime]\nworkspace = { value = 200, unit = "MiB", source = "ds", '
                 'derivation = "assumed" }\n')
    hw = rl.hardware(str(p))
    eff = efficiency_for(hw, "default")
    assert hw.workspace_bytes == eff.workspace == 200 * 2**20
    assert eff.provenance["workspace"].derivation == "assumed"
    r = rl.solve("resnet50", hw, batch=1, precision="fp16")
    assert r.memory_breakdown["workspace"] == 200 * 2**20
    p.write_text(GOOD + '[runtime]\nslack = { value = 1, unit = "MiB", source = "ds" }\n')
    with pytest.raises(SpecError, match=r"\[runtime\] takes one key, workspace"):
        rl.hardware(str(p))


def test_groq_lpu_fits_a_small_model_under_the_default_preset():
    # 230 MB of SRAM and no GPU-style 1 GiB workspace: ResNet-50's 51 MB of fp16 weights fit
    r = rl.solve("resnet50", "groq-lpu", batch=1, precision="fp16")
    assert r.feasible and r.memory_breakdown["workspace"] == 0.0
    assert not rl.solve("llama-3.2-1b", "groq-lpu", batch=1, precision="fp16").feasible


def test_register_efficiency_keys_on_the_spec_content() -> None:
    """Two parts with the same key but different numbers never share a registered table."""
    from dataclasses import replace

    from roofline.engine.presets import efficiency_for, register_efficiency

    a = rl.hardware("A100")
    b = replace(a, peak_flops_per_s={k: 2 * v for k, v in a.peak_flops_per_s.items()})
    assert a.key == b.key and a != b
    base_a, base_b = efficiency_for(a, "default"), efficiency_for(b, "default")
    # the smooth model at a lower max (tiles=None: a table that keeps the base's tile sets
    # prices GPU matmuls and dense convs by those sets, which do not read gemm.max)
    mine = replace(base_a, gemm=replace(base_a.gemm, max=0.4), tiles=None, label="registered")
    before = rl.solve("resnet50", a, batch=64, precision="fp16").latency
    register_efficiency(a, mine)
    try:
        assert efficiency_for(a, "default") == mine
        assert efficiency_for(b, "default") == base_b  # same key, other spec: not registered
        assert efficiency_for(replace(a), "default") == mine  # an equal copy: same content
        assert rl.solve("resnet50", a, batch=64, precision="fp16").latency > before
    finally:
        register_efficiency(a, None)
    assert efficiency_for(a, "default") == base_a
    with pytest.raises(SpecError, match="hw must be a Hardware"):
        register_efficiency("A100", mine)  # type: ignore[arg-type]
