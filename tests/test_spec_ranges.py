"""Issue 11 §1 and §3: every spec field is range-checked where it is loaded, spec files that
are not what they claim are refused without echoing their contents, a cluster's device path is
resolved against the cluster file."""

import math

import pytest

import roofline as rl
from roofline.errors import RooflineError, SpecError

HW = """schema = 1
key = "myhw"
name = "My accelerator"
kind = "gpu"
[sources]
ds = "a datasheet"
[peak]
fp16 = { value = 100, unit = "TFLOP/s", source = "ds" }
fp32 = { value = 20, unit = "TFLOP/s", source = "ds" }
[[memory]]
name = "HBM"
capacity = { value = 80, unit = "GB", source = "ds" }
bandwidth = { value = 2, unit = "TB/s", source = "ds" }
[power]
tdp = { value = 400, unit = "W", source = "ds" }
"""

CLUSTER = """schema = 1
key = "mycl"
name = "My cluster"
device = "{device}"
devices_per_node = {{ value = 8, unit = "1", source = "ds" }}
[sources]
ds = "a datasheet"
[scale_up]
bandwidth = {{ value = 400, unit = "GB/s", source = "ds" }}
latency = {{ value = 2, unit = "us", source = "ds" }}
[scale_out]
bandwidth = {{ value = 50, unit = "GB/s", source = "ds" }}
latency = {{ value = 6, unit = "us", source = "ds" }}
"""


def write(tmp_path, name, text, mode="w"):
    p = tmp_path / name
    if mode == "wb":
        p.write_bytes(text)
    else:
        p.write_text(text)
    return p


def test_base_files_load(tmp_path):
    hw = rl.hardware(write(tmp_path, "myhw.toml", HW))
    assert hw.peak("fp16") == 100e12
    cl = rl.cluster(write(tmp_path, "cl.toml", CLUSTER.format(device="myhw.toml")))
    assert cl.device.key == "myhw"


@pytest.mark.parametrize("edit, words", [
    # [sustained] fp16 = 1e-300 gave a 1e296 s latency marked feasible
    ("\n[sustained]\nfp16 = { value = 1e-300, unit = \"1\", source = \"ds\" }\n",
     ["sustained.fp16", "1e-300", "[0.05, 1]"]),
    ("\n[sustained]\nfp16 = { value = 1.5, unit = \"1\", source = \"ds\" }\n",
     ["sustained.fp16", "1.5", "[0.05, 1]"]),
])
def test_sustained_fraction_out_of_range_is_refused(tmp_path, edit, words):
    p = write(tmp_path, "myhw.toml", HW + edit)
    with pytest.raises(SpecError) as e:
        rl.hardware(p)
    msg = str(e.value)
    assert str(p) in msg
    for w in words:
        assert w in msg, msg


@pytest.mark.parametrize("edit, words", [
    ("\n[clock]\npeak = { value = 1830, unit = \"MHz\", source = \"ds\" }\n",
     ["[clock]", "'peak' and 'max'", "['peak']"]),
    ("\n[clock]\npeak = { value = 1830, unit = \"MHz\", source = \"ds\" }\n"
     "max = { value = 1500, unit = \"MHz\", source = \"ds\" }\n",
     ["clock.max", "clock.peak", "at least"]),
    ("\n[clock]\npeak = { value = 1830, unit = \"W\", source = \"ds\" }\n"
     "max = { value = 1980, unit = \"MHz\", source = \"ds\" }\n", ["clock.peak", "W"]),
    ("\n[clock]\npeak = { value = 1e9, unit = \"MHz\", source = \"ds\" }\n"
     "max = { value = 1e9, unit = \"MHz\", source = \"ds\" }\n",
     ["clock.peak", "plausible range"]),
])
def test_bad_clock_is_refused(tmp_path, edit, words):
    p = write(tmp_path, "myhw.toml", HW + edit)
    with pytest.raises(SpecError) as e:
        rl.hardware(p)
    for w in words:
        assert w in str(e.value), str(e.value)


def test_clock_ratio_by_hand(tmp_path):
    """[clock] peak 1830 MHz, max 1980 MHz: 1980 / 1830 = 1.0820 (without [clock]: 1)."""
    edit = ("\n[clock]\npeak = { value = 1830, unit = \"MHz\", source = \"ds\" }\n"
            "max = { value = 1.98, unit = \"GHz\", source = \"ds\" }\n")
    hw = rl.hardware(write(tmp_path, "myhw.toml", HW + edit))
    assert hw.clock_hz == {"peak": 1.83e9, "max": 1.98e9}
    assert hw.clock_ratio() == pytest.approx(1.0820, abs=1e-4)
    assert rl.hardware(write(tmp_path, "plain.toml", HW)).clock_ratio() == 1.0


@pytest.mark.parametrize("old, new, words", [
    ('value = 100, unit = "TFLOP/s"', 'value = 1e300, unit = "TFLOP/s"',
     ["peak.fp16", "1e+300", "TFLOP/s", "plausible range"]),
    ('value = 2, unit = "TB/s"', 'value = 1e-12, unit = "TB/s"',
     ["memory.0.bandwidth", "1e-12", "TB/s"]),
    ('value = 80, unit = "GB"', 'value = 1e-9, unit = "GB"', ["memory.0.capacity", "1e-09"]),
    ('value = 400, unit = "W"', 'value = 1e12, unit = "W"', ["power.tdp", "1e+12", "W"]),
    ('value = 400, unit = "W"', 'value = inf, unit = "W"', ["power.tdp", "finite"]),
    ('value = 400, unit = "W"', 'value = nan, unit = "W"', ["power.tdp", "finite"]),
    ('unit = "W"', 'unit = []', ["power.tdp", "unit", "not a known unit"]),
    ('kind = "gpu"', 'kind = "gpu"\nyear = -5', ["year", "-5"]),
    ('kind = "gpu"', 'kind = "gpu"\nlinks = 5', ["links", "table"]),
    ('kind = "gpu"', 'kind = "gpu"\nvendor = [1]', ["vendor", "string"]),
])
def test_hardware_field_out_of_range_names_file_field_value_range(tmp_path, old, new, words):
    assert old in HW
    p = write(tmp_path, "myhw.toml", HW.replace(old, new, 1))
    with pytest.raises(SpecError) as e:
        rl.hardware(p)
    msg = str(e.value)
    assert str(p) in msg
    for w in words:
        assert w in msg, msg


def test_non_utf8_hardware_file_is_a_spec_error(tmp_path):
    p = write(tmp_path, "myhw.toml", HW.encode().replace(b"My accelerator", b"My \xff acc"),
              "wb")
    with pytest.raises(SpecError, match="not UTF-8"):
        rl.hardware(p)


def test_measured_efficiency_overhead_out_of_range_is_refused(tmp_path):
    # dispatch_norm = 1.7e308 s gave latency = inf, marked feasible
    p = write(tmp_path, "myhw.toml", HW + '\n[efficiency]\ndispatch_norm = '
              '{ value = 1.7e308, unit = "s", source = "ds" }\n')
    with pytest.raises(SpecError) as e:
        rl.solve("resnet50", rl.hardware(p))
    msg = str(e.value)
    assert "dispatch_norm" in msg and "1.7e+308" in msg and "[0, 60] s" in msg


def test_cluster_device_path_is_relative_to_the_cluster_file(tmp_path, monkeypatch):
    (tmp_path / "hw").mkdir()
    (tmp_path / "clusters").mkdir()
    write(tmp_path, "hw/myhw.toml", HW)
    p = write(tmp_path, "clusters/cl.toml", CLUSTER.format(device="../hw/myhw.toml"))
    monkeypatch.chdir(tmp_path / "hw")  # "../hw/myhw.toml" from here would not exist
    cl = rl.cluster(str(p))
    assert cl.device.key == "myhw"


def test_a_file_of_another_kind_is_refused_without_echoing_it(tmp_path):
    write(tmp_path, "secret.toml", 'api_token = "hunter2"\n[database]\npassword_hash = "x"\n')
    p = write(tmp_path, "cl.toml", CLUSTER.format(device="secret.toml"))
    with pytest.raises(SpecError) as e:
        rl.cluster(str(p))
    msg = str(e.value)
    assert "not a hardware spec" in msg
    for leak in ("api_token", "database", "password", "hunter2"):
        assert leak not in msg
    with pytest.raises(SpecError) as e:
        rl.cluster(str(tmp_path / "secret.toml"))
    assert "not a cluster spec" in str(e.value) and "api_token" not in str(e.value)
    with pytest.raises(SpecError) as e:
        rl.hardware(str(tmp_path / "secret.toml"))
    assert "api_token" not in str(e.value)


@pytest.mark.parametrize("old, new, words", [
    ('devices_per_node = {{ value = 8,', 'devices_per_node = {{ value = 1e9,',
     ["devices_per_node", "1e+09"]),
    ('latency = {{ value = 2, unit = "us"', 'latency = {{ value = 1e6, unit = "s"',
     ["scale_up.latency", "1e+06"]),
])
def test_cluster_field_out_of_range(tmp_path, old, new, words):
    write(tmp_path, "myhw.toml", HW)
    assert old in CLUSTER
    p = write(tmp_path, "cl.toml", CLUSTER.replace(old, new, 1).format(device="myhw.toml"))
    with pytest.raises(SpecError) as e:
        rl.cluster(str(p))
    for w in words:
        assert w in str(e.value), str(e.value)


def test_every_zoo_spec_is_within_the_plausible_ranges():
    # the ranges are bounds on typos, never on the published parts
    for k in rl.list_hardware():
        hw = rl.hardware(k)
        assert all(math.isfinite(v) and v > 0 for v in hw.peak_flops_per_s.values())
    for k in rl.list_clusters():
        assert rl.cluster(k).devices >= 1
    with pytest.raises(RooflineError):
        rl.hardware("no-such-part-anywhere")


def test_hardware_source_id_must_be_defined(tmp_path):
    """A hardware field's ``source`` names a key of ``[sources]`` (as in cluster specs): an
    undefined id was taken silently as its own citation text, so a typo printed 'dss' as the
    source of a number. Now a SpecError naming the field, the id and the ids defined, in the
    ``[efficiency]`` table too."""
    bad = HW.replace('fp32 = { value = 20, unit = "TFLOP/s", source = "ds" }',
                     'fp32 = { value = 20, unit = "TFLOP/s", source = "dss" }')
    with pytest.raises(SpecError, match=r"peak\.fp32\.source='dss' is not a key of "
                                        r"\[sources\]; defined: ds"):
        rl.hardware(write(tmp_path, "typo.toml", bad))
    eff = HW + '\n[efficiency.gemm]\nmax = { value = 0.8, unit = "1", source = "dz" }\n'
    with pytest.raises(SpecError, match=r"efficiency\.gemm\.max\.source='dz' .* defined: ds"):
        rl.hardware(write(tmp_path, "eff.toml", eff))
    # a defined id still resolves to its citation
    assert rl.hardware(write(tmp_path, "ok.toml", HW)).provenance["peak.fp32"].source \
        == "a datasheet"
