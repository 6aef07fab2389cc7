"""``explore``: evaluate a space chunk by chunk, locally or on Dask, and reduce as it streams.

Local path (``scheduler=None``): chunks run one after another in this process through the
vectorised engine; each chunk's points are filtered by the constraints and folded into the
running Pareto front and top-k lists, then dropped — memory is one chunk plus the reductions,
unless ``keep=True`` (every point in memory) or ``out="points.parquet"`` (every point streamed
to a Parquet file, the ``pandas``/``pyarrow`` extra).

Dask path (``scheduler=`` a ``dask.distributed.Client`` or a scheduler address): every chunk is
a task (``client.map`` with ``retries``); a worker that dies mid-task has its task rescheduled
by the scheduler; a chunk that raises is reported with its coordinates in ``failed`` and the
run goes on. The same chunk function and order-independent reductions make the result equal to
the local path's, bit for bit. ``import roofline`` never imports Dask.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, TextIO

import numpy as np

from .. import _args as A
from .._display import Display
from ..errors import SpecError
from ..progress import Progress, progress_stream
from .evaluate import FIELDS, evaluate_chunk
from .reduce import Reducer, parse_constraints, parse_objectives
from .space import Chunk, Space

__all__ = ["explore", "ExploreResult"]

_BOOLEANS = ("fits", "hypothetical")


@dataclass(repr=False)
class ExploreResult(Display):
    """What an exploration kept: the Pareto front, top-k lists, failures and counts."""

    space: Space
    objectives: list[Any]
    constraints: list[Any]
    size: int  #: points in the space
    evaluated: int  #: points priced
    passed: int  #: points meeting every constraint
    seconds: float
    failed: list[dict[str, Any]] = field(default_factory=list)  #: chunk coordinates + error
    _front: dict[str, np.ndarray] = field(default_factory=dict, repr=False)
    _tops: dict[str, dict[str, np.ndarray]] = field(default_factory=dict, repr=False)
    _points: list[dict[str, np.ndarray]] | None = field(default=None, repr=False)

    @property
    def points_per_s(self) -> float:
        return self.evaluated / self.seconds if self.seconds > 0 else math.inf

    def _lead(self) -> list[str]:
        """Columns shown first: coordinates, then the objectives' and constraints' fields."""
        lead = ["model", "hardware", "precision", "tp", "batch", "context"]
        lead += [o.field for o in self.objectives] + [c.field for c in self.constraints]
        return list(dict.fromkeys(lead))

    @property
    def pareto(self) -> Any:
        """The non-dominated points meeting the constraints, as a Table."""
        return _table(self._front, "Pareto front: " + ", ".join(map(str, self.objectives)),
                      self._lead())

    def top(self, k: int = 20, by: str | None = None) -> Any:
        """The ``k`` points with the largest ``by`` (``"-field"``: smallest) among those
        meeting the constraints. ``by`` defaults to the first objective; fields tracked: the
        objectives' and those named in ``explore(top=...)``."""
        key = by or str(self.objectives[0])
        if isinstance(k, bool) or not isinstance(k, int) or k < 1:
            raise SpecError(f"top: k must be a positive integer, got {k!r}")
        if key not in self._tops:
            if self._points is not None:
                return _top_of(self._points, key, k)
            tracked = sorted({t.lstrip("-") for t in self._tops})
            raise SpecError(f"top: {key!r} was not tracked; tracked fields: "
                            f"{', '.join(tracked)} (pass explore(top=[...]) or keep=True)")
        t = self._tops[key]
        return _table({c: v[:k] for c, v in t.items()}, f"top {k} by {key}", self._lead())

    def to_pandas(self) -> Any:
        """Every point (needs ``keep=True``) as a DataFrame."""
        from ..errors import require_extra

        pd = require_extra("pandas", "pandas", "ExploreResult.to_pandas()")
        if self._points is None:
            raise SpecError("to_pandas: the run kept no points; pass explore(keep=True)")
        return pd.DataFrame({k: np.concatenate([p[k] for p in self._points])
                             for k in self._points[0]})

    def to_parquet(self, path: str) -> None:
        """Every point (needs ``keep=True``) to a Parquet file."""
        self.to_pandas().to_parquet(path, index=False)

    def summary(self) -> str:
        """Two or three lines: counts, speed, the front's size, failures."""
        lines = [f"Explored {self.evaluated:,} of {self.size:,} points in {self.seconds:.2f} s "
                 f"({self.points_per_s:,.0f} points/s); {self.passed:,} meet "
                 + (" and ".join(map(str, self.constraints)) or "no constraint"),
                 f"Pareto front ({', '.join(map(str, self.objectives))}): "
                 f"{len(self._front.get('_chunk', []))} points"]
        if self.failed:
            lines.append(f"{len(self.failed)} chunks failed (see .failed): "
                         f"{self.failed[0]['error'][:120]}")
        return "\n".join(lines)

    def __str__(self) -> str:
        return self.summary() + ("\n" + self.pareto.to_string(max_rows=20)
                                 if self._front else "")


def _table(cols: dict[str, np.ndarray], title: str, lead: Sequence[str] = ()) -> Any:
    from ..engine.table import Table

    order = [c for c in lead if c in cols] + [c for c in cols if c not in lead]
    shown = {k: cols[k] for k in order if not k.startswith("_")}
    if not shown:
        return Table({"model": []}, title=title)
    return Table(shown, title=title)


def _top_of(points: list[dict[str, np.ndarray]], key: str, k: int) -> Any:
    f = key.lstrip("-")
    u = {c: np.concatenate([p[c] for p in points]) for c in points[0]}
    v = np.asarray(u[f], dtype=np.float64) * (-1.0 if key.startswith("-") else 1.0)
    order = np.argsort(-np.where(np.isfinite(v), v, -np.inf), kind="stable")[:k]
    return _table({c: x[order] for c, x in u.items()}, f"top {k} by {key}")


def _safe(fn: Callable[[Chunk], dict[str, np.ndarray]], chunk: Chunk,
          reducer: Reducer | None = None, full: bool = True) -> Any:
    """Run one chunk -> (index, columns or None, error or None, partial or None). With a
    reducer the chunk is reduced where it ran; ``full=False`` then sends back only that (what
    travels from a Dask worker is the chunk's front and top rows, not its points). An
    exception comes back as a record with the chunk's coordinates."""
    try:
        cols = fn(chunk)
        part = reducer.partial(chunk.index, cols) if reducer is not None else None
        return chunk.index, cols if full else None, None, part
    except Exception as e:  # reported with its coordinates, never lost
        return (chunk.index, None, {**chunk.coordinates(), "error": f"{type(e).__name__}: {e}"},
                None)


def _client(scheduler: Any, timeout: float) -> Any:
    try:
        from dask.distributed import Client
    except ImportError:
        from ..errors import MissingExtraError

        raise MissingExtraError("explore(scheduler=...) needs Dask: pip install "
                                "'roofline[dask]'") from None
    if isinstance(scheduler, str):
        try:
            return Client(scheduler, timeout=timeout), True
        except (OSError, TimeoutError) as e:
            raise SpecError(f"scheduler {scheduler!r} does not answer ({type(e).__name__}: "
                            f"{e}); start one with `dask scheduler` or pass a Client") from None
    if isinstance(scheduler, Client):
        return scheduler, False
    raise SpecError(f"scheduler must be None, a dask.distributed.Client or an address like "
                    f"'tcp://host:8786', got {type(scheduler).__name__}")


def explore(space: Space, *, objectives: Sequence[str] | str,
            constraints: Sequence[str] | str | None = None, scheduler: Any = None,
            top: Sequence[str] = (), k: int = 100, keep: bool = False,
            out: str | None = None, retries: int = 2, timeout: float = 10.0,
            progress: bool | TextIO = False, _chunk_fn: Callable[[Chunk], Any] | None = None
            ) -> ExploreResult:
    """Evaluate ``space``; keep the Pareto front of ``objectives`` (maximised; ``"-f"``
    minimises f) among the points meeting ``constraints``, and the ``k`` best points by each
    objective and each field in ``top``. See the module docstring for the paths.
    ``progress``: a line per chunk (at most one a second) with the rate and the time left, and a
    live bar with tqdm (True: on stderr when it is a terminal; a stream: there)."""
    if not isinstance(space, Space):
        raise SpecError(f"explore needs a roofline.Space, got {type(space).__name__}")
    fields = FIELDS[str(space.kind)]
    objs = parse_objectives(objectives, fields)
    cons = parse_constraints(constraints, fields, _BOOLEANS)
    tops = list(dict.fromkeys([o.field for o in objs] + [
        parse_objectives([t], fields)[0].field for t in top]))
    if isinstance(k, bool) or not isinstance(k, int) or k < 1:
        raise SpecError(f"k must be a positive integer, got {k!r}")
    if isinstance(retries, bool) or not isinstance(retries, int) or retries < 0:
        raise SpecError(f"retries must be a non-negative integer, got {retries!r}")
    progress = A.progress("progress", progress)
    chunks = list(space.chunks())
    size = sum(c.size for c in chunks)
    fn = _chunk_fn or evaluate_chunk
    red = Reducer(objs, cons, tops, k)
    kept: list[dict[str, np.ndarray]] | None = [] if keep else None
    writer = _ParquetOut(out) if out else None
    failed: list[dict[str, Any]] = []
    t0 = time.perf_counter()

    def take(res: Any) -> None:
        idx, cols, err, part = res
        if err is not None:
            failed.append(err)
            return
        red.merge(part)
        if kept is not None:
            kept.append(cols)
        if writer is not None:
            writer.write(cols)

    full = keep or writer is not None
    bar = Progress(len(chunks), progress_stream(progress), unit="chunk", min_interval=1.0)

    def step(res: Any) -> None:
        bar.step(f"chunk {res[0] + 1}", f"{red.evaluated:,} points priced, {red.passed:,} pass"
                 if res[2] is None else "failed")

    if scheduler is None:
        for c in chunks:
            res = _safe(fn, c, red)
            take(res)
            step(res)
    else:
        client, own = _client(scheduler, timeout)
        try:
            from dask.distributed import as_completed

            red_f = client.scatter(red, broadcast=True)  # the rules, sent once to every worker
            futs = client.map(_safe, [fn] * len(chunks), chunks, [red_f] * len(chunks),
                              [full] * len(chunks), retries=retries, pure=False)
            done: dict[int, Any] = {}
            for f in as_completed(futs):
                res = f.result()
                done[res[0]] = res
                bar.step(f"chunk {res[0] + 1}", "done" if res[2] is None else "failed")
            for i in sorted(done):  # the local order: identical keep/out files too
                take(done[i])
        finally:
            if own:
                client.close()
    bar.close()
    if writer is not None:
        writer.close()
    front = red.sorted_front()
    return ExploreResult(space=space, objectives=objs, constraints=cons, size=size,
                         evaluated=red.evaluated, passed=red.passed,
                         seconds=time.perf_counter() - t0, failed=failed, _front=front,
                         _tops=red.tops, _points=kept)


class _ParquetOut:
    """Streams every point to one Parquet file (a row group per chunk)."""

    def __init__(self, path: str) -> None:
        try:
            import pyarrow as pa  # noqa: F401
            import pyarrow.parquet  # noqa: F401
        except ImportError:
            from ..errors import MissingExtraError

            raise MissingExtraError("explore(out=...) writes Parquet with pyarrow: pip install "
                                    "'roofline[dask]' (or pyarrow)") from None
        self.path = path
        self._w: Any = None

    def write(self, cols: dict[str, np.ndarray]) -> None:
        import pyarrow as pa
        import pyarrow.parquet as pq

        t = pa.table({k: (v.astype(str) if v.dtype == object else v) for k, v in cols.items()})
        if self._w is None:
            self._w = pq.ParquetWriter(self.path, t.schema)
        self._w.write_table(t)

    def close(self) -> None:
        if self._w is not None:
            self._w.close()
