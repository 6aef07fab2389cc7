"""Issue 11 §3: output hygiene — no injection into written TOML or CSV, no terminal control
characters in printed results, names safe for matplotlib, plots of user hardware."""

from __future__ import annotations

import tomllib

import pytest
from hypothesis import given
from hypothesis import strategies as st

from roofline._data import toml_escape
from roofline.calibrate.backends import FakeBackend, FakeMachine
from roofline.calibrate.measure import last_text, measure
from roofline.errors import SpecError

FIXED = dict(progress=False, date="2026-01-01", host="example")
INJECT = 'x"\nnotes = "injected'


@given(st.text(alphabet=st.characters(exclude_categories=("Cs",)), max_size=60))
def test_toml_escape_round_trips_every_string(s):
    assert tomllib.loads(f'k = "{toml_escape(s)}"\n')["k"] == s


def test_toml_escape_refuses_lone_surrogates():
    with pytest.raises(SpecError, match="surrogate"):
        toml_escape("a\ud800b")


def test_measure_key_cannot_inject_a_line():
    # the key reaches the file escaped; the loader then refuses it as a key
    with pytest.raises(SpecError, match="key="):
        measure(backends=[FakeBackend(FakeMachine())], key=INJECT, **FIXED)
    assert "\nnotes" not in last_text()


@pytest.mark.parametrize("field", ["name", "host"])
def test_measure_name_and_host_round_trip_verbatim(field):
    kw = {**FIXED, field: INJECT}
    measure(backends=[FakeBackend(FakeMachine())], key="measured-x", **kw)
    doc = tomllib.loads(last_text())
    assert "notes" not in doc
    if field == "name":
        assert doc["name"] == INJECT
    else:
        assert doc["measurement"]["host"] == INJECT


def test_measure_date_must_be_a_date():
    with pytest.raises(SpecError, match="YYYY-MM-DD"):
        measure(backends=[FakeBackend(FakeMachine())], date='2026"\nx = 1', progress=False)
