"""The cut reading of packaged TOML files (``_data.toml_tables``): a fast path that parses only
the tables a call needs must give what parsing the whole file gives."""

from __future__ import annotations

import tomllib
from pathlib import Path

import pytest

from roofline._data import read_toml, read_toml_tables, toml_key_lines, toml_tables
from roofline.analysis import data as econ_data

ECON = econ_data.ECON


def _merge(into: dict, new: dict) -> None:
    for k, v in new.items():
        if isinstance(v, dict) and isinstance(into.get(k), dict):
            _merge(into[k], v)
        else:
            assert k not in into, k
            into[k] = v


@pytest.mark.parametrize("name", ["prices.toml", "grids.toml"])
def test_the_tables_parsed_apart_are_the_whole_file(name: str) -> None:
    path = ECON / name
    whole = read_toml(path)
    tables = toml_tables(path)
    assert "".join(tables.values()) == path.read_text(encoding="utf-8")
    merged = tomllib.loads(tables[""])
    for k in tables:
        if k:
            _merge(merged, read_toml_tables(path, k))
    assert merged == whole
    # one top-level table and its children at a time
    for top, body in whole.items():
        if isinstance(body, dict):
            for child in body:
                part = read_toml_tables(path, f"{top}.{child}") if isinstance(
                    body[child], dict) else None
                if part is not None:
                    assert part == {top: {child: body[child]}}, (top, child)


def test_part_prices_from_two_tables_equal_the_whole_file_record() -> None:
    every = econ_data._prices()
    assert len(every) > 50
    for key, pp in every.items():
        assert econ_data.part_prices(key) == pp, key
    none = econ_data.part_prices("no-such-part")
    assert none.quotes == () and "no record" in (none.no_rental or "")


def test_the_source_lines_parsed_one_by_one_are_the_sources_table() -> None:
    path = ECON / "prices.toml"
    whole = read_toml(path)["sources"]
    lines = toml_key_lines(path, "sources")
    assert list(lines) == list(whole)
    for k, line in lines.items():
        assert tomllib.loads(line) == {k: whole[k]}, k


def test_list_regions_equals_the_parsed_regions() -> None:
    assert econ_data.list_regions() == sorted(econ_data._regions()[0])
    assert len(econ_data.list_regions()) > 20


def test_the_cutter_refuses_what_it_cannot_cut(tmp_path: Path) -> None:
    ok = tmp_path / "ok.toml"
    ok.write_text('a = 1\n[x.y]  # c\nb = [\n  1,\n]\n[x.z]\nc = "[not a header]"\n')
    assert set(toml_tables(ok)) == {"", "x.y", "x.z"}
    assert read_toml_tables(ok, "x") == {"x": {"y": {"b": [1]}, "z": {"c": "[not a header]"}}}
    assert read_toml_tables(ok, "x.z") == {"x": {"z": {"c": "[not a header]"}}}
    for i, bad in enumerate(('[[x.y]]\nb = 1\n', '[x."q"]\nb = 1\n', 's = """\n[x]\n"""\n',
                             '[x]\n[x]\n')):
        p = tmp_path / f"bad{i}.toml"
        p.write_text(bad)
        with pytest.raises(ValueError, match="plain table header"):
            toml_tables(p)
    lines = tmp_path / "lines.toml"
    lines.write_text('[s]\na = "x"  # c\n\n# note\nb-2 = { v = 1 }\n[t]\nc = [\n  1,\n]\n')
    assert toml_key_lines(lines, "s") == {"a": 'a = "x"  # c\n', "b-2": "b-2 = { v = 1 }\n"}
    with pytest.raises(ValueError, match="one-line key"):
        toml_key_lines(lines, "t")
