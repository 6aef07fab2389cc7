"""A content-keyed cache of the nested folds' pair refits (session 31;
docs/validation/uncertainty.md, "The serving folds' cache").

A nested fold refits a profile once per ordered pair of its sources (``uncertainty_folds``); the
serving-engine fit has 7 sources, 42 refits, seconds each on an idle machine and half an hour
on a loaded one: too slow to run at every ``regenerate``. Their results are stored in
data/validation/fold_cache.json, each under a key that is the SHA-256 of everything the refit
read, so that a stored result is used only when a fresh refit would compute it again:

* the job and the pair (held-out source s, source r), and the ids of the cases fitted and priced
  (the fold's source set, from ``Job.inputs``);
* every file of the repository the refit read, by content (SHA-256): every ``roofline`` module
  the worker process imported (the worker is a fresh interpreter, so that is exactly what the
  refit's code loaded: the fit, the engine, the scheduler, the specs) and every file it opened
  (an audit hook on ``open``: the case file, the presets, the hardware and model files);
* every directory it listed (an audit hook on ``os.listdir`` / ``os.scandir``), by its sorted
  names: a file added where the registry looks is an input too.

The worker runs in a fixed environment (``WORKER_ENV``: the import path, hash seed 0, one BLAS
thread), so no environment variable of the caller reaches it. The interpreter (implementation,
version, machine) and the versions of the third-party distributions imported (numpy) are
recorded beside the pairs (``env``, shown on the page: ``recorded_env``) but are NOT in the key:
the repository's other committed generated outputs (residuals.toml, the pages) are not keyed on
them either, and CI builds a fresh environment (any Python 3.11.x, ``numpy>=1.24``), where a key
holding them would call the cache stale for an environment difference, not a change of content.
A different numpy could move a refit's last digits; the rows are stored to 1e-9 and compared
to a fresh refit by a test (``test_one_serving_pair_refits_to_its_cached_value``).

Why this cannot go stale: the refit is a deterministic function of the files it reads (it draws
no random number and reads no clock). If every file it read and every directory it listed are
unchanged (and the interpreter and numpy are the recorded ones), a new run reads the same files
in the same order (which file it opens next is decided by the contents already read) and
computes the same numbers. A change that makes it read a new file is a change in a file it
already read. So a key equal to the stored one means the stored rows are what the refit computes
now (in the recorded environment; see above for why the environment is recorded, not keyed); any
byte changed in any input changes the key (``stale``). The worker records a superset where a
module is imported but not used: more keys change than need to, never fewer.

The check (``regenerate --check``, the residuals step) recomputes every key from the current
files and reports a stored entry whose key differs (``stale``), without refitting; writing
refits the stale pairs in one worker process and rewrites the file.
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..errors import SpecError

__all__ = ["Job", "JOBS", "CACHE_PATH", "digest", "entry_key", "stale", "cached_rows",
           "recorded_env", "refresh", "run_worker"]

PACKAGE = Path(__file__).resolve().parents[1]  #: src/roofline (or an installed copy)
#: manifest paths are relative to the folder holding the package (src/ in a checkout,
#: site-packages in an installed copy: the package's files have the same names in both)
BASE = PACKAGE.parent
#: the worker's whole environment besides PYTHONPATH
WORKER_ENV = {"PYTHONHASHSEED": "0", "OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1",
              "MKL_NUM_THREADS": "1", "LC_ALL": "C"}
CACHE_PATH = PACKAGE / "data" / "validation" / "fold_cache.json"


@dataclass(frozen=True, slots=True)
class Job:
    """A nested fold computed pair by pair: ``pairs()`` the ordered (s, r) pairs; ``inputs(s,
    r)`` the ids of the cases fitted and priced (part of the key); ``compute(s, r)`` the pair's
    refit: {"values": fitted factors, "note": ..., "rows": [[case id, e], ...]}. Each is named
    ``module:function`` so that the worker process can import it."""

    pairs: str
    inputs: str
    compute: str


def _resolve(name: str) -> Callable[..., Any]:
    import importlib

    mod, _, fn = name.partition(":")
    return getattr(importlib.import_module(mod), fn)  # type: ignore[no-any-return]


#: the jobs stored in the cache, by name
JOBS = {"serving": Job("roofline.validation.uncertainty_folds:serving_pairs",
                       "roofline.validation.uncertainty_folds:serving_pair_inputs",
                       "roofline.validation.uncertainty_folds:serving_pair")}


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _file_sha(root: Path, rel: str) -> str:
    p = root / rel
    return _sha(p.read_bytes()) if p.is_file() else "missing"


def _dir_sha(root: Path, rel: str) -> str:
    p = root / rel
    if not p.is_dir():
        return "missing"
    return _sha("\n".join(sorted(n for n in os.listdir(p) if n != "__pycache__")).encode())


def digest(files: Sequence[str], dirs: Sequence[str], root: Path = BASE) -> str:
    """SHA-256 of the current contents of ``files`` and listings of ``dirs`` (paths relative
    to ``root``; a missing one hashes as "missing"). The interpreter and package versions are
    not part of it (recorded beside the pairs, not keyed: the module docstring says why)."""
    doc = {"files": {f: _file_sha(root, f) for f in sorted(files)},
           "dirs": {d: _dir_sha(root, d) for d in sorted(dirs)}}
    return _sha(json.dumps(doc, sort_keys=True).encode())


def entry_key(job: str, s: str, r: str, inputs: Mapping[str, Any], manifest: str) -> str:
    """The key of pair (s, r) of ``job``: SHA-256 of the job, the pair, its ``inputs`` (case
    ids) and ``manifest`` (``digest`` of what the refit read)."""
    return _sha(json.dumps({"job": job, "held_out": s, "source": r, "inputs": dict(inputs),
                            "manifest": manifest}, sort_keys=True).encode())


def _interpreter() -> str:
    import platform

    return f"{platform.python_implementation()} {platform.python_version()} {platform.machine()}"


def _env_now(startup: set[str]) -> dict[str, Any]:
    """What outside the package the computation rests on: the interpreter and the versions of
    the third-party distributions imported since ``startup`` (the worker's environment is
    fixed)."""
    from importlib import metadata

    dists = metadata.packages_distributions()
    top = ({m.split(".")[0] for m in list(sys.modules) if m not in startup}
           - set(sys.stdlib_module_names))
    vers = {d: metadata.version(d) for t in sorted(top) for d in dists.get(t, [])
            if d != "roofline"}
    return {"python": _interpreter(), "packages": vers}


def _tree_digest(skip: Path) -> str:
    """SHA-256 of every file of the package but ``skip`` (the cache): taken before and after a
    worker runs, so that an edit made meanwhile cannot slip into a key."""
    h = hashlib.sha256()
    for p in sorted(PACKAGE.rglob("*")):
        if p.is_file() and "__pycache__" not in p.parts and p != skip:
            h.update(str(p.relative_to(PACKAGE)).encode() + b"\0" + p.read_bytes())
    return h.hexdigest()


def _load(path: Path) -> dict[str, Any]:
    if not path.exists():
        return {"jobs": {}}
    return json.loads(path.read_text(encoding="utf-8"))  # type: ignore[no-any-return]


def stale(job: str, path: Path = CACHE_PATH, root: Path = BASE,
          spec: Job | None = None) -> list[str]:
    """Why the stored pairs of ``job`` are not what a refit computes now: one line per pair
    missing, stored without being a pair now, or whose key differs from the key of the current
    inputs; empty: every stored row is current. Reads files, refits nothing. ``spec``: the
    job's functions when it is not one of ``JOBS``."""
    j = spec or JOBS[job]
    stored = _load(path)["jobs"].get(job)
    want = [tuple(p) for p in _resolve(j.pairs)()]
    if stored is None:
        return [f"{job}: no entry stored ({len(want)} pairs)"]
    man = digest(stored["files"], stored["dirs"], root)
    have = {(e["held_out"], e["source"]): e for e in stored["pairs"]}
    out = [f"{job}: ({s}, {r}) stored, not a pair now" for s, r in have if (s, r) not in want]
    for s, r in want:
        e = have.get((s, r))
        if e is None:
            out.append(f"{job}: ({s}, {r}) not stored")
        elif e["key"] != entry_key(job, s, r, _resolve(j.inputs)(s, r), man):
            out.append(f"{job}: ({s}, {r}) key differs (an input changed)")
    return out


def cached_rows(job: str, path: Path = CACHE_PATH) -> list[tuple[str, str, str, float]]:
    """(held-out source, case id, source, e) of every stored pair of ``job`` (as stored: call
    ``stale`` to know whether they are current, ``refresh`` to make them so)."""
    stored = _load(path)["jobs"].get(job)
    if stored is None:
        raise SpecError(f"fold_cache: job {job!r} has no entry in {path}; run python -m "
                        "roofline.validation.regenerate --only residuals to compute it")
    return [(e["held_out"], cid, e["source"], float(v)) for e in stored["pairs"]
            for cid, v in e["rows"]]


def recorded_env(job: str, path: Path = CACHE_PATH) -> dict[str, Any]:
    """The interpreter and package versions ``job``'s stored refits ran under (metadata: not
    in the key)."""
    stored = _load(path)["jobs"].get(job)
    if stored is None:
        raise SpecError(f"fold_cache: job {job!r} has no entry in {path}; run python -m "
                        "roofline.validation.regenerate --only residuals to compute it")
    return dict(stored["env"])


_BOOT = """
import os, sys
STARTUP = set(sys.modules)  # the interpreter's own (site's .pth hooks): not read by the job
READ, LISTED = set(), set()
def _hook(ev, args):
    if ev == "open" and args and isinstance(args[0], (str, bytes, os.PathLike)):
        READ.add(os.path.abspath(os.fsdecode(args[0])))
    elif ev in ("os.listdir", "os.scandir") and args and isinstance(args[0], (str, bytes,
                                                                             os.PathLike)):
        LISTED.add(os.path.abspath(os.fsdecode(args[0])))
sys.addaudithook(_hook)
from roofline.validation.fold_cache import _worker
_worker(sys.argv[1], READ, LISTED, STARTUP)
"""


def _worker(request: str, read: set[str], listed: set[str], startup: set[str]) -> None:
    """In the worker process: compute the pairs of ``request`` (JSON: job, pairs) and print
    one JSON document: each pair's result and the manifest of what was read."""
    req = json.loads(request)
    compute = _resolve(req["compute"])
    results = [{"held_out": s, "source": r, **compute(s, r)} for s, r in req["pairs"]]
    pkg = str(PACKAGE)

    def ours(p: str) -> bool:  # the package's files; a file elsewhere is the interpreter's
        return (p + os.sep).startswith(pkg + os.sep) and "__pycache__" not in p

    files = {p for p in read if ours(p)}
    for m in list(sys.modules.values()):
        f = getattr(m, "__file__", None)
        if f and ours(os.path.abspath(f)):
            files.add(os.path.abspath(f))
    checkout = str(PACKAGE.parents[1]) + os.sep  # the repository, in a checkout
    outside = sorted(p for p in read if not ours(p) and p.startswith(checkout)
                     and not p.startswith(sys.prefix + os.sep) and "__pycache__" not in p)
    if outside:  # e.g. a page of docs/: not an input the key could follow in an installed copy
        raise SpecError(f"fold_cache: job {req['job']!r} read files outside the package and "
                        f"the interpreter: {outside[:5]}; a cached refit may read only those")
    rel = sorted(os.path.relpath(p, BASE) for p in files if not p.endswith(".pyc"))
    dirs = sorted(os.path.relpath(p, BASE) for p in listed if ours(p))
    print(json.dumps({"results": results, "files": rel, "dirs": dirs,
                      "env": _env_now(startup)}))


def run_worker(job: str, pairs: Sequence[tuple[str, str]], spec: Job | None = None
               ) -> dict[str, Any]:
    """Compute ``pairs`` of ``job`` in a fresh interpreter (so that its imports are the
    refit's), recording what it reads; its JSON document."""
    env = {**WORKER_ENV, "PYTHONPATH": str(BASE)}
    req = json.dumps({"job": job, "compute": (spec or JOBS[job]).compute,
                      "pairs": [list(p) for p in pairs]})
    out = subprocess.run([sys.executable, "-c", _BOOT, req], cwd=BASE, env=env,
                         capture_output=True, text=True)
    if out.returncode != 0:
        raise SpecError(f"fold_cache: the worker for job {job!r} failed (exit "
                        f"{out.returncode}): {out.stderr.strip()[-2000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])  # type: ignore[no-any-return]


def refresh(job: str, path: Path = CACHE_PATH, spec: Job | None = None) -> list[str]:
    """When ``stale`` reports anything, refit every pair of ``job`` in one worker process (the
    pairs share what they read: an input changed for one changed for all) and rewrite
    ``path``; the pairs refitted (empty: the stored ones are current)."""
    if not stale(job, path, spec=spec):
        return []
    j = spec or JOBS[job]
    pairs = [tuple(p) for p in _resolve(j.pairs)()]
    before = _tree_digest(path)
    doc = run_worker(job, pairs, spec)
    if _tree_digest(path) != before:  # the key must hash what the worker read, not a later edit
        raise SpecError(f"fold_cache: a file of the package changed while job {job!r} ran; "
                        "nothing was stored, run it again")
    man = digest(doc["files"], doc["dirs"])
    entries = []
    for res in doc["results"]:
        s, r = res["held_out"], res["source"]
        entries.append({"held_out": s, "source": r,
                        "key": entry_key(job, s, r, _resolve(j.inputs)(s, r), man),
                        "values": res["values"], "note": res["note"],
                        "rows": [[cid, round(float(e), 9)] for cid, e in res["rows"]]})
    full = _load(path)
    full["about"] = ("The nested folds' pair refits, keyed on everything each read: "
                     "roofline.validation.fold_cache (generated by python -m "
                     "roofline.validation.regenerate --only residuals; do not edit).")
    full.setdefault("jobs", {})[job] = {"files": doc["files"], "dirs": doc["dirs"],
                                        "env": doc["env"], "pairs": entries}
    path.write_text(json.dumps(full, indent=1, sort_keys=True) + "\n", encoding="utf-8")
    return [f"({e['held_out']}, {e['source']})" for e in entries]
