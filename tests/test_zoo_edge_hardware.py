"""Issue 16 item 5, hardware: the edge, desktop and superchip parts the seed zoo has. Each file's
derived peaks are recomputed here from the counts in its sources (an independent hand
calculation), and every part prices a model (feasible, or infeasible with the reason)."""

from __future__ import annotations

import math

import pytest

import roofline as rl
from roofline.engine.presets import efficiency_for

NEW = ["apple-m1", "apple-m1-max", "apple-m1-ultra", "apple-m2", "apple-m2-ultra", "apple-m3",
       "apple-m3-ultra", "apple-m4", "apple-m4-max", "apple-a17-pro", "gh200",
       "jetson-orin-nx-16gb", "core-i9-13900k", "snapdragon-8-gen-3", "esp32-s3", "nrf52840",
       "coral-edge-tpu"]


@pytest.mark.parametrize("key", NEW)
def test_every_new_part_prices_a_model(key):
    hw = rl.hardware(key)
    assert hw.key in rl.list_hardware()
    dtype = "int8" if hw.kind in ("mcu", "npu") else "fp16" if hw.has("fp16") else "fp32"
    r = rl.solve("resnet18", hw, batch=1, precision=dtype)
    assert math.isfinite(r.latency) and r.latency > 0
    if not r.feasible:  # ResNet-18 (11.7 M weights) fits no SRAM-only part
        assert "needs" in r.reason and hw.name in r.reason
        assert hw.kind in ("mcu", "npu")  # SRAM-only parts
    else:
        assert r.memory_footprint <= hw.memory_capacity_bytes


def test_derived_peaks_match_a_hand_count():
    T = 1e12
    # i9-13900K fp32: 8 P x 3.0 GHz x 32 + 16 E x 2.2 GHz x 16 = 768 + 563.2 = 1331.2 GFLOP/s
    assert rl.hardware("core-i9-13900k").peak("fp32") == pytest.approx(1.3312 * T, rel=2e-3)
    # i9 int8: 8 x 3.0 x 128 + 16 x 2.2 x 64 = 3072 + 2252.8 = 5324.8 GOP/s
    assert rl.hardware("core-i9-13900k").peak("int8") == pytest.approx(5.3248 * T, rel=2e-3)
    # Snapdragon 8 Gen 3 fp32: 3.3 x 32 + (3 x 3.2 + 2 x 3.0) x 16 + 2 x 2.3 x 8 = 392.0 GFLOP/s
    assert rl.hardware("snapdragon-8-gen-3").peak("fp32") == pytest.approx(392.0e9, rel=1e-3)
    # M4 Max: 40 cores x 128 ALUs x 2 x 1.678 GHz = 17.18 TFLOP/s
    assert rl.hardware("apple-m4-max").peak("fp32") == pytest.approx(17.18 * T, rel=2e-3)
    # M2 Ultra: 76 x 128 x 2 x 1.398 GHz = 27.20 TFLOP/s
    assert rl.hardware("apple-m2-ultra").peak("fp32") == pytest.approx(27.20 * T, rel=2e-3)
    # Orin NX GPU int8: 170 sparse x 32/64 x 0.918/1.3 / 2 = 30.0 TOP/s
    assert rl.hardware("jetson-orin-nx-16gb").peak("int8") == pytest.approx(
        170 * 0.5 * 0.918 / 1.3 / 2 * T, rel=2e-3)
    # ESP32-S3 int8: 2 cores x 240 MHz x 16 MACs x 2 = 15.36 GOP/s
    assert rl.hardware("esp32-s3").peak("int8") == pytest.approx(15.36e9, rel=3e-3)
    # nRF52840: 64 MHz x 2 MACs x 2 = 256 MOP/s; SRAM 32 bit x 64 MHz = 256 MB/s
    nrf = rl.hardware("nrf52840")
    assert nrf.peak("int8") == pytest.approx(256e6)
    assert nrf.memory_bytes_per_s == pytest.approx(256e6)
    assert nrf.memory_capacity_bytes == 256 * 1024
    # GH200: 96 GiB HBM3 at 4 TB/s, NVLink-C2C 900 GB/s bidirectional -> 450 per direction
    gh = rl.hardware("gh200")
    assert gh.memory_capacity_bytes == 96 * 2**30 and gh.memory_bytes_per_s == 4e12
    assert gh.host_link is not None and gh.host_link.bytes_per_s == 450e9
    # M3 Ultra: 1024-bit x 6400 MT/s / 8 = 819.2 GB/s (Apple: "over 800")
    assert rl.hardware("apple-m3-ultra").memory_bytes_per_s == pytest.approx(819.2e9, rel=1e-3)


def test_every_new_number_has_a_source():
    for key in NEW:
        hw = rl.hardware(key)
        for fld, prov in hw.provenance.items():
            assert prov.source.strip(), f"{key} {fld} has no source"


def test_microcontrollers_run_synchronously_with_a_small_workspace():
    for key in ("esp32-s3", "nrf52840"):
        hw = rl.hardware(key)
        assert hw.kind in ("mcu", "npu")  # SRAM-only parts
        eff = efficiency_for(hw, "default")
        assert eff.launch.synchronous
        # a GPU-style 1 GiB workspace would make every model infeasible on 512 KB of SRAM
        assert eff.workspace < 0.1 * hw.memory_capacity_bytes
    coral = efficiency_for(rl.hardware("coral-edge-tpu"), "default")
    assert coral.workspace < 1e6 and not coral.launch.synchronous


def test_coral_prices_int8_only():
    r = rl.solve("mobilenet_v2", "coral-edge-tpu", batch=1, precision="fp16")
    assert not r.feasible and "no fp16 peak" in r.reason
    r = rl.solve("mobilenet_v2", "coral-edge-tpu", batch=1, precision="int8")
    assert r.feasible  # 3.5 M int8 weights fit the 8 MiB parameter cache
    r = rl.solve("resnet50", "coral-edge-tpu", batch=1, precision="int8")
    assert not r.feasible and "weights" in r.reason  # 25.6 MB of int8 weights do not
