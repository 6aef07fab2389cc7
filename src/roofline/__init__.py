"""roofline: predict how fast an ML workload runs on given hardware — and why.

    import roofline as rl
    r = rl.solve(rl.model("resnet50"), rl.hardware("A100"), batch=1, precision="fp16")
    print(r); r.ops; r.plot()

FLOPs count 2 per multiply-add everywhere. Units are SI (s, B, FLOP, W) inside; names say the
unit. Only numpy is needed; plotting, pandas, torch and ONNX load lazily when used.
"""

from __future__ import annotations

from typing import Any

from .engine.result import Result
from .engine.solve import solve
from .errors import (
    MissingExtraError,
    RooflineError,
    SpecError,
    UnknownNameError,
    UnsupportedDtypeError,
)
from .graphs.model import Model, list_models, model
from .specs.dtypes import Precision, precision
from .specs.hardware import Hardware, hardware, list_hardware

__version__ = "0.1.0"

__all__ = ["solve", "sweep", "model", "hardware", "list_models", "list_hardware", "precision",
           "plot_roofline", "Result", "Sweep", "Model", "Hardware", "Precision",
           "RooflineError", "SpecError", "UnknownNameError", "UnsupportedDtypeError",
           "MissingExtraError", "__version__", "serve", "serving_capacity", "train",
           "best_parallelism", "cluster", "list_clusters", "measure", "validate"]


# Capabilities that live in higher layers load on first use (keeps `import roofline` fast).
_LAZY = {
    "sweep": "roofline.scenarios.sweep", "Sweep": "roofline.scenarios.sweep",
    "serve": "roofline.scenarios.serving", "serving_capacity": "roofline.scenarios.serving",
    "train": "roofline.scenarios.training", "best_parallelism": "roofline.scenarios.training",
    "cluster": "roofline.specs.cluster", "list_clusters": "roofline.specs.cluster",
    "measure": "roofline.calibrate.measure", "validate": "roofline.calibrate.validate",
}


def __getattr__(name: str) -> Any:
    mod = _LAZY.get(name)
    if mod is None:
        raise AttributeError(f"module 'roofline' has no attribute {name!r}")
    import importlib

    return getattr(importlib.import_module(mod), name)


def plot_roofline(*args: Any, **kwargs: Any) -> Any:
    """Roofline chart of results/hardware (needs ``pip install 'roofline[plot]'``)."""
    from .viz.roofline import plot_roofline as _plot

    return _plot(*args, **kwargs)
