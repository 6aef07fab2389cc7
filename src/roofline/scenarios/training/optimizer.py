"""The optimizer step priced by the one time model (``engine.core.TimeModel``).

The step is one op of the registered formula ``optimizer_step`` (ops/training_formulas.py):
its cost is linear in the local parameter count, so it is a one-op graph whose per-"sample"
costs are the formula at one parameter, and the time model's batch axis is the parameter
count. Solve, the vectorised split search and ``train`` evaluate it like any other op: the
vector rate for its FLOPs, main-memory bandwidth (the efficiency's ``main_read_fraction``) for
its gradient, state and weight traffic, the launch floor of one kernel, and, on measured CPU
efficiencies, their cold-data terms.

Both training paths use it: decoders (mixed-precision Adam(W), ``step``) and any other graph
(``generic``: every optimizer of ``OPTIMIZERS``, mixed precision or pure fp32).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..._cache import make_room
from ...engine.core import TimeModel, time_model
from ...engine.efficiency import Efficiency
from ...graphs.graph import Graph
from ...ops import QUANTITIES, cost
from ...ops.xp import SCALAR
from ...specs.dtypes import Precision
from ...specs.hardware import Hardware

__all__ = ["optimizer_graph", "optimizer_model", "optimizer_time"]

_GRAPHS: dict[tuple[Any, ...], Graph] = {}


def optimizer_graph(optimizer: str, precision: Precision, *, master_weights: bool = True,
                    grad_bytes: float = 4.0, weight_bytes: float = 2.0,
                    state_bytes: float = 4.0, master_bytes: float = 4.0) -> Graph:
    """The one-op graph of an optimizer step: costs per local parameter (``c1``), none fixed
    (``c0``); evaluate it at B = the number of parameters the device updates. Cached."""
    k = (optimizer, precision, master_weights, grad_bytes, weight_bytes, state_bytes,
         master_bytes)
    g = _GRAPHS.get(k)
    if g is not None:
        return g
    c = cost("optimizer_step", params=1, optimizer=optimizer, master_weights=master_weights,
             grad_bytes=grad_bytes, weight_bytes=weight_bytes, state_bytes=state_bytes,
             master_bytes=master_bytes)
    c1 = np.array([[float(getattr(c, q))] for q in QUANTITIES])
    g = Graph(name=f"{optimizer} step", phase="train", precision=precision,
              names=("optimizer.step",), kinds=("optimizer_step",), classes=("optimizer",),
              c0=np.zeros_like(c1), c1=c1, gemm=np.zeros((3, 1)), params=np.zeros(1),
              weight_footprint_bytes=0.0)
    make_room(_GRAPHS, 64)
    _GRAPHS[k] = g
    return g


_MODELS: dict[tuple[Any, ...], TimeModel] = {}


def optimizer_model(key: Any, optimizer: str, precision: Precision, hw: Hardware,
                    eff: Efficiency, **graph_kw: Any) -> TimeModel:
    """The TimeModel of ``optimizer_graph(optimizer, precision, **graph_kw)`` on (hw, eff),
    cached under ``key``: a content key of (hw, eff, precision) the caller already holds (a
    training context's ``SpecKey``), so that a warm call is one dictionary look-up."""
    k = (key, optimizer, tuple(sorted(graph_kw.items())))
    tm = _MODELS.get(k)
    if tm is None:
        tm = time_model(optimizer_graph(optimizer, precision, **graph_kw), hw, eff)
        make_room(_MODELS, 256)
        _MODELS[k] = tm
    return tm


def optimizer_time(graph: Graph | TimeModel, hw: Hardware | None = None,
                   eff: Efficiency | None = None, params: Any = 0.0, xp: Any = np) -> Any:
    """Seconds of the optimizer step over ``params`` local parameters (a number with
    ``xp=SCALAR``, else an array of any shape): the time model's latency at B = ``params``.
    ``graph``: an ``optimizer_graph`` (priced on ``hw``, ``eff``) or its TimeModel."""
    if isinstance(graph, TimeModel):
        tm = graph
    else:
        assert hw is not None and eff is not None
        tm = time_model(graph, hw, eff)
    if xp is SCALAR:
        return tm.latency_at(float(params))
    P = np.asarray(params, dtype=np.float64)
    return tm.latency_many(P.ravel()).reshape(P.shape)
