"""Issue 11 §3: output hygiene — no injection into written TOML or CSV, no terminal control
characters in printed results, names safe for matplotlib, plots of user hardware."""

from __future__ import annotations

import tomllib

import pytest
from hypothesis import given
from hypothesis import strategies as st

import roofline as rl
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


HW = """schema = 1
key = "myhw"
name = "{name}"
kind = "gpu"
[sources]
ds = "a datasheet"
[peak]
fp16 = {{ value = 100, unit = "TFLOP/s", source = "ds" }}
[[memory]]
name = "HBM"
capacity = {{ value = 80, unit = "GB", source = "ds" }}
bandwidth = {{ value = 2, unit = "TB/s", source = "ds" }}
"""


def _hw(tmp_path, name="My accelerator"):
    p = tmp_path / "myhw.toml"
    p.write_text(HW.format(name=toml_escape(name)))
    return rl.hardware(p)


def test_printed_results_carry_no_terminal_control_characters(tmp_path):
    hw = _hw(tmp_path, "evil \x1b[2J\x1b]0;pwned\x07 part\x07\x9b")
    for obj in (rl.solve("resnet50", hw), rl.sweep("gpt2", hw, batch=[1, 2]),
                rl.solve("gpt2", hw).ops):
        text = str(obj)
        assert "\x1b" not in text and "\x07" not in text and "\x9b" not in text
        assert "evil" in text and "part" in text
    text = str(rl.serve("gpt2", hw))
    assert "\x1b" not in text and "evil" in text


def test_sweep_csv_neutralises_formula_cells(tmp_path, capsys):
    from roofline.cli import main

    p = tmp_path / "hw.toml"
    p.write_text(HW.format(name=toml_escape('=HYPERLINK("http://x")')))
    assert main(["sweep", "gpt2", str(p), "--batch", "1", "--csv"]) == 0
    out = capsys.readouterr().out
    assert "'=HYPERLINK" in out
    assert ",=HYPERLINK" not in out and "\n=HYPERLINK" not in out


def test_csv_cell_rules():
    from roofline._text import csv_cell

    for bad in ("=1+1", "+1", "-1", "@SUM(A1)", "\tx", "\rx"):
        assert csv_cell(bad) == "'" + bad
    assert csv_cell("gpt2") == "gpt2" and csv_cell(-1.5) == -1.5


def test_result_plot_on_user_hardware_and_dollar_names(tmp_path):
    pytest.importorskip("matplotlib")
    hw = _hw(tmp_path, "my $5 chip $x^2")  # an odd number of $ broke mathtext
    r = rl.solve("resnet50", hw, batch=2)
    out = tmp_path / "r.png"
    r.plot(str(out))  # used to look "myhw" up in the zoo
    assert out.stat().st_size > 1000
    fig = rl.plot_roofline([r, hw], path=str(tmp_path / "b.png"))
    assert r"\$5" in fig.axes[0].get_title()
    s = rl.sweep("gpt2", hw, batch=[1, 8])
    rl.plot_roofline(s, path=str(tmp_path / "s.png"))
