"""``roofline zoo [hardware|models]``: what the built-in zoos hold."""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from typing import Any

from ..units import GB
from .output import add_output_args, emit

__all__ = ["hardware_rows", "model_rows", "register", "run"]


def hardware_rows() -> list[dict[str, Any]]:
    """One row per zoo device: key, name, kind, dtypes, main memory (GB, GB/s), TDP (W)."""
    from ..specs.resolve import hardware, list_hardware

    rows = []
    for key in list_hardware():
        hw = hardware(key)
        mem = hw.main_memory
        rows.append({
            "key": hw.key, "name": hw.name, "kind": hw.kind, "dtypes": list(hw.dtypes),
            "memory": mem.name, "memory_gb": mem.capacity_bytes / GB,
            "memory_gb_per_s": mem.bytes_per_s / GB, "tdp_w": hw.tdp_w,
            "aliases": list(hw.aliases),
        })
    return rows


def model_rows() -> list[dict[str, Any]]:
    """One row per zoo model: key, name, family, parameter count."""
    from ..graphs.resolve import list_models, model

    rows = []
    for key in list_models():
        m = model(key)
        rows.append({"key": m.key, "name": m.name, "family": m.family, "params": m.params,
                     "phases": list(m.phases), "aliases": list(m.aliases)})
    return rows


def _hw_table(rows: list[dict[str, Any]], wide: bool = False) -> str:
    head = ("key", "name", "kind", "memory GB", "GB/s", "TDP W") + (("dtypes",) if wide else ())
    body = [(r["key"], r["name"], r["kind"], f"{r['memory_gb']:.4g}",
             f"{r['memory_gb_per_s']:,.0f}" if r["memory_gb_per_s"] >= 10
             else f"{r['memory_gb_per_s']:.2g}",
             "-" if r["tdp_w"] != r["tdp_w"] else f"{r['tdp_w']:,.0f}" if r["tdp_w"] >= 10
             else f"{r['tdp_w']:.2g}")  # a microcontroller draws mW
            + ((",".join(r["dtypes"]),) if wide else ()) for r in rows]
    if not wide:  # names take what the other columns leave of 100 characters
        others = sum(max(len(h), *(len(b[j]) for b in body)) + 2
                     for j, h in enumerate(head) if j != 1)
        room = max(100 - others - 2, 12)
        body = [(b[0], b[1] if len(b[1]) <= room else b[1][:room - 1] + "…", *b[2:])
                for b in body]
    out = _grid(head, body, right=(3, 4, 5))
    if not wide:
        out += "\n(the dtypes each part has, and full names: --wide shows all)"
    return out


def _model_table(rows: list[dict[str, Any]]) -> str:
    head = ("key", "name", "family", "params")
    body = [(r["key"], r["name"], r["family"], _params(r["params"])) for r in rows]
    return _grid(head, body, right=(3,))


def _params(n: float) -> str:
    if n >= 1e9:
        return f"{n / 1e9:,.2f} B"
    return f"{n / 1e6:,.1f} M" if n >= 1e6 else f"{n / 1e3:,.1f} k"  # MLPerf Tiny: tens of k


def _grid(head: tuple[str, ...], body: Sequence[tuple[str, ...]],
          right: tuple[int, ...]) -> str:
    widths = [max(len(h), *(len(r[j]) for r in body)) for j, h in enumerate(head)]

    def line(cells: tuple[str, ...]) -> str:
        return "  ".join(c.rjust(w) if j in right else c.ljust(w)
                         for j, (c, w) in enumerate(zip(cells, widths))).rstrip()

    return "\n".join([line(head), line(tuple("-" * w for w in widths)), *map(line, body)])


def register(sub: Any) -> None:
    p = sub.add_parser("zoo", help="list the built-in hardware and models",
                       description="List the hardware zoo (dense peaks per dtype, main memory, "
                                   "TDP) and the model zoo (parameter counts).")
    p.add_argument("what", nargs="?", choices=("hardware", "models"), default=None,
                   help="only this zoo (default: both)")
    add_output_args(p)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from ..engine.table import Table

    want = (args.what,) if args.what else ("hardware", "models")
    data = {w: hardware_rows() if w == "hardware" else model_rows() for w in want}
    tables = []
    for w, rows in data.items():
        keys = [k for k in rows[0] if k not in ("aliases", "phases")] if rows else []
        units = {"memory_gb": "", "memory_gb_per_s": "", "tdp_w": "W", "params": ""}
        tables.append(Table({k: [",".join(r[k]) if isinstance(r[k], list) else r[k]
                                 for r in rows] for k in keys}, units, title=f"{w} zoo"))
    return emit(args, text=lambda: _text(data, getattr(args, "wide", False)),
                data=data if len(want) > 1 else data[want[0]], tables=tables, title="roofline zoo")


def _text(data: dict[str, list[dict[str, Any]]], wide: bool) -> str:
    parts = []
    if "hardware" in data:
        parts.append(f"hardware ({len(data['hardware'])}): dense peaks; memory = main memory "
                     "(GB = 1e9 B, GB/s decimal)\n" + _hw_table(data["hardware"], wide))
    if "models" in data:
        parts.append(f"models ({len(data['models'])})\n" + _model_table(data["models"]))
    return "\n\n".join(parts)
