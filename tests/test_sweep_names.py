"""A sweep labels rows by the part's name: two different specs under one name are refused."""
import dataclasses

import pytest

import roofline as rl
from roofline.errors import SpecError


def test_two_specs_with_one_name_are_refused_naming_the_fix():
    h = rl.hardware("h100")
    faster = h.with_peak("fp16", 2 * h.peak("fp16"), source="hypothetical: twice the peak")
    with pytest.raises(SpecError, match=r"hardware: two different specs.*dataclasses\.replace"):
        rl.sweep("resnet50", [h, faster], batch=[1, 8])


def test_renamed_hypothetical_part_keeps_its_own_spec_and_rows():
    h = rl.hardware("h100")
    faster = dataclasses.replace(
        h.with_peak("fp16", 2 * h.peak("fp16"), source="hypothetical: twice the peak"),
        name="H100 2x")
    s = rl.sweep("resnet50", [h, faster], batch=[256])
    assert s.hardware_specs["H100 2x"] is faster and s.hardware_specs[h.name] is h
    rows = {r["hardware"]: r for r in s.to_dicts()}
    # twice the compute peak: the compute-bound batch-256 row is faster, never slower
    assert rows["H100 2x"]["latency"] < rows[h.name]["latency"]


def test_the_same_part_twice_is_allowed():
    s = rl.sweep("resnet50", ["h100", "h100"], batch=[1])
    assert len(s) == 2
