"""The layout rules of the developers' guide, checked on the source: no file over 600 lines, no
function (or method) over 120 lines, no two public functions with the same name in different
modules. Classes are not functions: each of their methods is held to the function limit and
the file that holds them to the file limit."""

from __future__ import annotations

import ast
from collections import defaultdict
from functools import lru_cache
from pathlib import Path

SRC = Path(__file__).resolve().parents[1] / "src" / "roofline"
MAX_FILE_LINES = 600
MAX_FUNCTION_LINES = 120
#: names many modules define on purpose, as one interface that callers reach through the module
#: (``v.rows()``), never imported bare: each CLI subcommand module's ``register(sub)`` and
#: ``run(args)`` (cli/__init__.py calls them by module), an entry point's ``main``, and the
#: interface of a validation suite (``roofline.validation.<suite>``, and the power and
#: reliability suites in ``analysis``): its cases, rows, summary and tables
CLI = ("roofline/cli/",)
SUITES = ("roofline/validation/", "roofline/analysis/power_validation.py",
          "roofline/analysis/reliability.py")
PROTOCOL = {"register": CLI, "run": CLI, "main": ("roofline/",)} | {
    name: SUITES for name in ("cases", "rows", "summary", "report_table", "predict",
                              "holdout_table", "case_table", "validation_rows",
                              "validation_markdown")}


#: functions over the limit, each with the reason it stays whole (shrink this list, never grow it)
EXEMPT: dict[str, str] = {}


@lru_cache(maxsize=1)
def _modules() -> list[tuple[Path, ast.Module, int]]:
    out = []
    for p in sorted(SRC.rglob("*.py")):
        text = p.read_text(encoding="utf-8")
        out.append((p, ast.parse(text), text.count("\n")))
    return out


def _rel(p: Path) -> str:
    return str(p.relative_to(SRC.parent))


def _forwards(fn: ast.FunctionDef) -> bool:
    """A lazy re-export: the body imports the same name from another module and calls it."""
    return any(isinstance(n, ast.ImportFrom) and any(a.name == fn.name for a in n.names)
               for n in ast.walk(fn))


def test_no_file_over_the_limit() -> None:
    big = [(_rel(p), n) for p, _, n in _modules() if n > MAX_FILE_LINES]
    assert not big, f"files over {MAX_FILE_LINES} lines: {big}"


def test_no_function_over_the_limit() -> None:
    long = []
    for p, tree, _ in _modules():
        for node in ast.walk(tree):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                n = (node.end_lineno or node.lineno) - node.lineno + 1
                where = f"{_rel(p)}:{node.name}"
                if n > MAX_FUNCTION_LINES and where not in EXEMPT:
                    long.append((where, n))
    assert not long, f"functions over {MAX_FUNCTION_LINES} lines: {long}"


def test_no_two_public_functions_share_a_name() -> None:
    where: dict[str, list[str]] = defaultdict(list)
    for p, tree, _ in _modules():
        for node in tree.body:
            if isinstance(node, ast.FunctionDef) and not node.name.startswith("_") \
                    and not _forwards(node):
                where[node.name].append(_rel(p))
    dup = {}
    for name, mods in where.items():
        if name in PROTOCOL:
            mods = [m for m in mods if not m.startswith(PROTOCOL[name])]
        if len(mods) > 1:
            dup[name] = mods
    assert not dup, f"public functions defined in more than one module: {dup}"


def test_the_checker_sees_what_it_checks() -> None:
    """The rules above run over the whole package (a wrong path would pass vacuously)."""
    mods = _modules()
    assert len(mods) > 100
    names = {n.name for _, t, _ in mods for n in t.body if isinstance(n, ast.FunctionDef)}
    assert {"solve", "serve", "train", "transformer_graph", "run_plan"} <= names
