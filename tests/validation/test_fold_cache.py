"""The content-keyed cache of the nested folds' pair refits (roofline.validation.fold_cache;
docs/validation/uncertainty.md, "The serving folds' cache")."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from roofline.validation import fold_cache as FC
from roofline.validation import uncertainty_folds as F

#: a small job (the llama.cpp profile's 6 pair refits, seconds) for the worker end to end
SMALL = FC.Job("roofline.validation.uncertainty_folds:llamacpp_pairs",
               "roofline.validation.uncertainty_folds:llamacpp_pair_inputs",
               "roofline.validation.uncertainty_folds:llamacpp_pair")


def _tree(root: Path) -> tuple[list[str], list[str]]:
    (root / "pkg" / "data").mkdir(parents=True)
    (root / "pkg" / "fit.py").write_text("X = 1\n")
    (root / "pkg" / "data" / "cases.toml").write_text("a = 2.5\n")
    return ["pkg/fit.py", "pkg/data/cases.toml"], ["pkg/data"]


def test_one_byte_of_any_input_changes_the_key(tmp_path):
    """A byte changed in a module or a data file, a file added to a listed folder, a file
    deleted, another pair or another case set: each gives another key."""
    files, dirs = _tree(tmp_path)
    base = FC.digest(files, dirs, tmp_path)
    assert FC.digest(files, dirs, tmp_path) == base  # deterministic
    keys = {base}
    (tmp_path / "pkg" / "fit.py").write_text("X = 2\n")  # one byte of the code
    keys.add(FC.digest(files, dirs, tmp_path))
    (tmp_path / "pkg" / "fit.py").write_text("X = 1\n")
    assert FC.digest(files, dirs, tmp_path) == base
    (tmp_path / "pkg" / "data" / "cases.toml").write_text("a = 2.6\n")  # one byte of data
    keys.add(FC.digest(files, dirs, tmp_path))
    (tmp_path / "pkg" / "data" / "cases.toml").write_text("a = 2.5\n")
    (tmp_path / "pkg" / "data" / "new.toml").write_text("")  # a file where the registry looks
    keys.add(FC.digest(files, dirs, tmp_path))
    (tmp_path / "pkg" / "data" / "new.toml").unlink()
    assert FC.digest(files, dirs, tmp_path) == base
    (tmp_path / "pkg" / "fit.py").unlink()
    keys.add(FC.digest(files, dirs, tmp_path))
    assert len(keys) == 5
    ins = {"fit": ["a", "b"], "priced": ["c"]}
    k = FC.entry_key("serving", "s", "r", ins, base)
    assert len({k, FC.entry_key("serving", "r", "s", ins, base),
                FC.entry_key("serving", "s", "r", {**ins, "fit": ["a"]}, base),
                FC.entry_key("serving", "s", "r", ins, base[:-1] + "0")}) == 4


def test_cached_value_is_a_fresh_refit_and_staleness_is_seen(tmp_path, monkeypatch):
    """The worker (a fresh interpreter) on the llama.cpp profile's 6 pairs stores what
    ``nested`` refits in this process, and reads what a refit reads (the case file, the
    profile's module); then a changed key or a missing pair is stale, another interpreter is
    not (recorded, not keyed)."""
    path = tmp_path / "cache.json"
    assert FC.stale("small", path, spec=SMALL) == ["small: no entry stored (6 pairs)"]
    assert len(FC.refresh("small", path, spec=SMALL)) == 6
    assert FC.stale("small", path, spec=SMALL) == []
    assert FC.refresh("small", path, spec=SMALL) == []  # current: nothing refitted
    fresh = {(s, i): e for s, i, _, e in F.llamacpp_folds()}
    cached = {(s, i): e for s, i, _, e in FC.cached_rows("small", path)}
    assert cached.keys() == fresh.keys()
    for k, e in fresh.items():
        assert cached[k] == pytest.approx(e, abs=1e-9), k
    doc = json.loads(path.read_text())
    job = doc["jobs"]["small"]
    assert "roofline/validation/llamacpp.py" in job["files"]
    assert "roofline/data/validation/llamacpp.toml" in job["files"]
    assert "roofline/data/hardware/apple" in job["dirs"]
    job["pairs"][0]["key"] = "0" * 64
    path.write_text(json.dumps(doc))
    assert FC.stale("small", path, spec=SMALL) == ["small: (xd2, xd3) key differs (an input "
                                                   "changed)"]
    del job["pairs"][0]
    path.write_text(json.dumps(doc))
    assert FC.stale("small", path, spec=SMALL) == ["small: (xd2, xd3) not stored"]
    monkeypatch.setattr(FC, "_interpreter", lambda: "CPython 3.12.1 x86_64")  # not keyed
    assert FC.stale("small", path, spec=SMALL) == ["small: (xd2, xd3) not stored"]


def test_environment_is_recorded_not_keyed(tmp_path):
    """CI builds a fresh venv (any Python 3.11.x, numpy>=1.24): the serving cache with other
    recorded interpreter and numpy versions is still current, and the versions are kept as
    metadata; one byte of a keyed module (in a copy of the package) makes every pair stale."""
    import shutil

    doc = json.loads(FC.CACHE_PATH.read_text())
    job = doc["jobs"]["serving"]
    assert set(FC.recorded_env("serving")) == {"python", "packages"}
    assert "numpy" in job["env"]["packages"]
    job["env"] = {"python": "CPython 3.11.2 x86_64", "packages": {"numpy": "1.24.0"}}
    other = tmp_path / "fold_cache.json"
    other.write_text(json.dumps(doc))
    assert FC.stale("serving", other) == []
    assert FC.recorded_env("serving", other)["packages"] == {"numpy": "1.24.0"}
    root = tmp_path / "src"
    shutil.copytree(FC.PACKAGE, root / "roofline",
                    ignore=shutil.ignore_patterns("__pycache__"))
    assert FC.stale("serving", other, root=root) == []
    mod = "roofline/validation/serving.py"
    assert mod in job["files"]
    f = root / mod
    f.write_bytes(f.read_bytes() + b" ")  # one byte
    got = FC.stale("serving", other, root=root)
    assert len(got) == 42 and all(g.endswith("key differs (an input changed)") for g in got)


def test_serving_cache_is_current_and_in_the_residuals():
    """The stored serving pair refits are current (every key equals the key of the files as
    they are: regenerate --only residuals refits them otherwise), there is one per ordered
    pair of the 7 serving sources, and residuals.toml's serving folds are their rows."""
    from roofline.uncertainty import _data

    assert FC.stale("serving") == []
    rows = FC.cached_rows("serving")
    assert {(s, r) for s, _, r, _ in rows} == set(F.serving_pairs())
    assert len(F.serving_pairs()) == 42
    want = {(s, i): e for s, i, _, e in rows}
    for cls in ("serving-ttft", "serving-decode"):
        stored = {(f["held_out"], f["id"]): f["e"] for f in _data()["class"][cls]["fold"]}
        assert stored and all(stored[k] == pytest.approx(want[k], abs=2e-6) for k in stored)
    n_ids = sum(len(_data()["class"][c]["case"]) for c in ("serving-ttft", "serving-decode"))
    assert len(want) == 6 * n_ids  # every case, in each of the 6 folds not its own


def test_one_serving_pair_refits_to_its_cached_value():
    """A fresh refit of one serving pair (nim and vllm2192 left out: the two smallest
    sources, the largest fit) equals its cached rows."""
    got = F.serving_pair("nim", "vllm2192")
    cached = {i: e for s, i, r, e in FC.cached_rows("serving") if (s, r) == ("nim", "vllm2192")}
    assert {i for i, _ in got["rows"]} == cached.keys()
    for i, e in got["rows"]:
        assert cached[i] == pytest.approx(e, abs=1e-9)


def test_regenerate_check_reports_a_stale_entry(tmp_path, monkeypatch):
    """regenerate --check's residuals step names the cache when a stored key differs, and
    refits nothing."""
    from roofline.validation import regenerate as R
    from roofline.validation import uncertainty as V

    doc = json.loads(FC.CACHE_PATH.read_text())
    doc["jobs"]["serving"]["pairs"][3]["key"] = "f" * 64
    bad = tmp_path / "fold_cache.json"
    bad.write_text(json.dumps(doc))
    stale = FC.stale
    monkeypatch.setattr(FC, "stale", lambda job, *a, **kw: stale(job, bad))
    monkeypatch.setattr(FC, "refresh", lambda *a, **kw: pytest.fail("check mode refitted"))
    monkeypatch.setattr(V, "residuals_text", lambda: V.RESIDUALS_PATH.read_text())
    st = R._State(check=True)
    R._residuals(st)
    assert any(x.startswith("fold_cache.json (1 serving pair refits stale") for x in st.stale)
