"""Objectives, constraints and the per-chunk reductions (Pareto front, top-k).

Objectives are field names, maximised; ``"-power_w"`` maximises minus the power (minimises
it). Constraints are ``"FIELD OP NUMBER"`` (``<``, ``<=``, ``>``, ``>=``, ``==``, ``!=``) or a
boolean field (``"fits"``, ``"not hypothetical"``). Both are parsed and checked against the
kind's fields before any work starts.

Reductions are exact and order-independent: a chunk's Pareto front is merged into the running
front (a point dominated anywhere is dominated in the union), and every retained row carries
its (chunk, row) position, which breaks ties — so the local path and the Dask path, whatever
the order chunks finish in, give the same rows in the same order.
"""

from __future__ import annotations

import math
import operator
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..errors import SpecError, closest

__all__ = ["Objective", "Constraint", "parse_objectives", "parse_constraints", "pareto_mask",
           "Reducer"]

_OPS = {"<=": operator.le, ">=": operator.ge, "==": operator.eq, "!=": operator.ne,
        "<": operator.lt, ">": operator.gt}
_CMP = re.compile(r"^\s*([A-Za-z_][A-Za-z0-9_]*)\s*(<=|>=|==|!=|<|>)\s*(\S+)\s*$")


@dataclass(frozen=True, slots=True)
class Objective:
    field: str
    sign: float  #: +1 maximise, -1 minimise

    def values(self, cols: dict[str, np.ndarray]) -> np.ndarray:
        v = np.asarray(cols[self.field], dtype=np.float64) * self.sign
        return np.where(np.isfinite(v), v, -np.inf)

    def __str__(self) -> str:
        return ("-" if self.sign < 0 else "") + self.field


@dataclass(frozen=True, slots=True)
class Constraint:
    field: str
    op: str  #: one of _OPS, or "true" / "false" for a boolean field
    value: float = math.nan

    def mask(self, cols: dict[str, np.ndarray]) -> np.ndarray:
        v = cols[self.field]
        if self.op == "true":
            return np.asarray(v, dtype=bool)
        if self.op == "false":
            return ~np.asarray(v, dtype=bool)
        x = np.asarray(v, dtype=np.float64)
        with np.errstate(invalid="ignore"):
            return _OPS[self.op](x, self.value) & np.isfinite(x)

    def __str__(self) -> str:
        if self.op in ("true", "false"):
            return ("" if self.op == "true" else "not ") + self.field
        return f"{self.field} {self.op} {self.value:g}"


def _check_field(name: str, fields: Sequence[str], what: str) -> None:
    if name not in fields:
        raise SpecError(f"{what}: unknown field {name!r}.{closest(name, fields)} Fields: "
                        f"{', '.join(fields)}")


def parse_objectives(objs: Any, fields: Sequence[str]) -> list[Objective]:
    if isinstance(objs, str):
        objs = [objs]
    if not isinstance(objs, Sequence) or not objs:
        raise SpecError("objectives: give at least one field name, e.g. "
                        "['tokens_per_s_per_device', '-power_w']")
    out = []
    for o in objs:
        if not isinstance(o, str) or not o.strip():
            raise SpecError(f"objectives: {o!r} is not a field name")
        o = o.strip()
        sign = -1.0 if o.startswith("-") else 1.0
        name = o.lstrip("+-").strip()
        _check_field(name, fields, "objectives")
        out.append(Objective(name, sign))
    return out


def parse_constraints(cons: Any, fields: Sequence[str],
                      booleans: Sequence[str]) -> list[Constraint]:
    if cons is None:
        return []
    if isinstance(cons, str):
        cons = [cons]
    out = []
    for c in cons:
        if not isinstance(c, str):
            raise SpecError(f"constraints: {c!r} is not text like 'tpot <= 0.020' or 'fits'")
        text = c.strip()
        neg = text.startswith("not ")
        bare = text[4:].strip() if neg else text
        if re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", bare):
            _check_field(bare, fields, "constraints")
            if bare not in booleans:
                raise SpecError(f"constraints: {bare!r} is a number, not a yes/no field; write "
                                f"a comparison such as '{bare} <= 1.0'")
            out.append(Constraint(bare, "false" if neg else "true"))
            continue
        m = _CMP.match(text)
        if not m:
            raise SpecError(f"constraints: {c!r} is not a comparison; write FIELD OP NUMBER "
                            "(OP one of <, <=, >, >=, ==, !=), e.g. 'tpot <= 0.020', or a "
                            "yes/no field such as 'fits'")
        name, op, num = m.groups()
        _check_field(name, fields, "constraints")
        try:
            value = float(num)
        except ValueError:
            raise SpecError(f"constraints: {c!r}: {num!r} is not a number") from None
        if not math.isfinite(value):
            raise SpecError(f"constraints: {c!r}: the bound must be finite")
        out.append(Constraint(name, op, value))
    return out


def pareto_mask(F: np.ndarray) -> np.ndarray:
    """Rows of ``F`` [n, k] (maximised) that no other row dominates (>= everywhere, > once).
    Equal rows are all kept."""
    n = F.shape[0]
    if n == 0:
        return np.zeros(0, dtype=bool)
    if F.shape[1] == 1:
        return F[:, 0] == F[:, 0].max()
    if n > 4096:
        # O(n) prefilter: every row dominated by one of a few extreme rows (the best of each
        # objective, and of their sum) is dropped before the exact pass
        alive = np.ones(n, dtype=bool)
        for score in [F[:, j] for j in range(F.shape[1])] + [F.sum(axis=1)]:
            ref = F[int(np.argmax(np.where(np.isfinite(score), score, -np.inf)))]
            alive &= ~(np.all(F <= ref, axis=1) & np.any(F < ref, axis=1))
        sub = np.flatnonzero(alive)
        out = np.zeros(n, dtype=bool)
        out[sub[pareto_mask(F[sub]) if len(sub) < n else _exact(F[sub])]] = True
        return out
    return _exact(F)


def _exact(F: np.ndarray) -> np.ndarray:
    n = F.shape[0]
    order = np.lexsort(tuple(-F[:, j] for j in range(F.shape[1] - 1, -1, -1)))
    keep = np.zeros(n, dtype=bool)
    front: list[int] = []
    if F.shape[1] == 2:
        # sorted by the first objective (desc), then the second (desc): a row survives when its
        # second objective beats every earlier row's, or it equals the row that set that best
        a, b = F[order, 0], F[order, 1]
        best = np.maximum.accumulate(b)
        prev = np.concatenate([[-np.inf], best[:-1]])
        strict = b > prev
        setter = np.maximum.accumulate(np.where(strict, np.arange(n), -1))
        prev_setter = np.concatenate([[-1], setter[:-1]])
        dup = (~strict) & (prev_setter >= 0) & (b == prev) & \
            (a == a[np.maximum(prev_setter, 0)])
        keep[order[strict | dup]] = True
        return keep
    for i in order:
        if front:
            Fr = F[front]
            dom = np.all(Fr >= F[i], axis=1) & np.any(Fr > F[i], axis=1)
            if dom.any():
                continue
        front.append(int(i))
        keep[i] = True
    return keep


class Reducer:
    """The running Pareto front and top-k rows of a streamed space."""

    def __init__(self, objectives: list[Objective], constraints: list[Constraint],
                 top_fields: Sequence[str], k: int = 100) -> None:
        self.objectives = objectives
        self.constraints = constraints
        self.k = k
        self.top_fields = list(top_fields)
        self.front: dict[str, np.ndarray] | None = None
        self.tops: dict[str, dict[str, np.ndarray]] = {}
        self.evaluated = 0
        self.passed = 0

    def partial(self, chunk_index: int, cols: dict[str, np.ndarray]) -> dict[str, Any]:
        """One chunk reduced on its own (on the worker that priced it): counts, its Pareto
        front and its top-k rows per tracked field. Touches no state."""
        n = len(next(iter(cols.values())))
        out: dict[str, Any] = {"evaluated": n, "passed": 0, "front": None, "tops": {}}
        mask = np.ones(n, dtype=bool)
        for c in self.constraints:
            mask &= c.mask(cols)
        idx = np.flatnonzero(mask)
        out["passed"] = len(idx)
        if not len(idx):
            return out
        sel = {k: v[idx] for k, v in cols.items()}
        sel["_chunk"] = np.full(len(idx), chunk_index, dtype=np.int64)
        sel["_row"] = idx.astype(np.int64)
        F = np.stack([o.values(sel) for o in self.objectives], axis=1)
        m = pareto_mask(F)
        out["front"] = {k: v[m] for k, v in sel.items()}
        for f in self.top_fields:
            for sign in (1.0, -1.0):
                key = ("" if sign > 0 else "-") + f
                v = np.asarray(sel[f], dtype=np.float64) * sign
                v = np.where(np.isfinite(v), v, -np.inf)
                take = np.argpartition(-v, self.k - 1)[:self.k] if len(v) > self.k else \
                    np.arange(len(v))
                out["tops"][key] = {kk: vv[take] for kk, vv in sel.items()}
        return out

    def merge(self, part: dict[str, Any]) -> None:
        """Fold one chunk's partial result into the running reductions."""
        self.evaluated += part["evaluated"]
        self.passed += part["passed"]
        if part["front"] is None:
            return
        self.front = part["front"] if self.front is None else \
            self._merge_front(self.front, part["front"])
        for key, cand in part["tops"].items():
            old = self.tops.get(key)
            sign = -1.0 if key.startswith("-") else 1.0
            self.tops[key] = cand if old is None else self._merge_top(old, cand,
                                                                      key.lstrip("-"), sign)

    def add(self, chunk_index: int, cols: dict[str, np.ndarray]) -> None:
        self.merge(self.partial(chunk_index, cols))

    def _merge_front(self, a: dict[str, np.ndarray], b: dict[str, np.ndarray]
                     ) -> dict[str, np.ndarray]:
        u = {k: np.concatenate([a[k], b[k]]) for k in a}
        F = np.stack([o.values(u) for o in self.objectives], axis=1)
        return {k: v[pareto_mask(F)] for k, v in u.items()}

    def _merge_top(self, a: dict[str, np.ndarray], b: dict[str, np.ndarray], f: str,
                   sign: float) -> dict[str, np.ndarray]:
        u = {k: np.concatenate([a[k], b[k]]) for k in a}
        v = np.asarray(u[f], dtype=np.float64) * sign
        v = np.where(np.isfinite(v), v, -np.inf)
        # value, then position: the same rows whatever order the chunks arrive in
        order = np.lexsort((u["_row"], u["_chunk"], -v))[:self.k]
        return {k: vv[order] for k, vv in u.items()}

    def sorted_front(self) -> dict[str, np.ndarray]:
        if self.front is None:
            return {}
        F = np.stack([o.values(self.front) for o in self.objectives], axis=1)
        keys = [self.front["_row"], self.front["_chunk"]] + [-F[:, j] for j in
                                                             range(F.shape[1] - 1, -1, -1)]
        order = np.lexsort(tuple(keys))
        return {k: v[order] for k, v in self.front.items()}
