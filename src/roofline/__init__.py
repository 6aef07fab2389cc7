"""roofline: predict how fast an ML workload runs on given hardware — and why.

    import roofline as rl
    r = rl.solve(rl.model("resnet50"), rl.hardware("A100"), batch=1, precision="fp16")
    print(r); r.ops; r.plot()

FLOPs count 2 per multiply-add everywhere. Units are SI (s, B, FLOP, W) inside; names say the
unit. Only numpy is needed; plotting, pandas, torch and ONNX load lazily when used, and so does
the engine itself (on first use of any name below).
"""

from __future__ import annotations

from typing import Any

from .errors import (
    MissingExtraError,
    RooflineError,
    SpecError,
    UnknownNameError,
    UnsupportedDtypeError,
)

__version__ = "0.1.0"

__all__ = ["solve", "sweep", "model", "hardware", "list_models", "list_hardware", "precision",
           "plot_roofline", "Result", "Sweep", "Model", "Hardware", "Precision",
           "RooflineError", "SpecError", "UnknownNameError", "UnsupportedDtypeError",
           "MissingExtraError", "__version__", "serve", "serving_capacity", "train",
           "best_parallelism", "cluster", "list_clusters", "measure", "validate",
           "plot_sweep", "plot_serving", "plot_training", "plot_layers",
           "Workload", "lengths", "SLO", "simulate_serving", "plan_serving", "levers",
           "sensitivity", "requirements", "tco", "reliability", "region", "list_regions",
           "place", "price_quotes"]


# Everything but the errors loads on first use: `import roofline` stays a few milliseconds
# (the CLI starts fast), and the first `rl.solve` pays for numpy and the engine (~0.1 s).
_LAZY = {
    "solve": "roofline.engine.solve", "Result": "roofline.engine.result",
    "model": "roofline.graphs.resolve", "Model": "roofline.graphs.model",
    "list_models": "roofline.graphs.resolve",
    "hardware": "roofline.specs.resolve", "Hardware": "roofline.specs.hardware",
    "list_hardware": "roofline.specs.resolve",
    "precision": "roofline.specs.dtypes", "Precision": "roofline.specs.dtypes",
    "sweep": "roofline.scenarios.sweep", "Sweep": "roofline.scenarios.sweep",
    "serve": "roofline.scenarios.serving", "serving_capacity": "roofline.scenarios.serving",
    "train": "roofline.scenarios.training", "best_parallelism": "roofline.scenarios.training",
    "cluster": "roofline.specs.resolve", "list_clusters": "roofline.specs.resolve",
    "measure": "roofline.calibrate.measure", "validate": "roofline.calibrate.validate",
    "plot_sweep": "roofline.viz.charts", "plot_serving": "roofline.viz.charts",
    "plot_training": "roofline.viz.charts", "plot_layers": "roofline.viz.charts",
    "Workload": "roofline.analysis.workload", "lengths": "roofline.analysis.workload",
    "SLO": "roofline.analysis.workload", "simulate_serving": "roofline.analysis.simulate",
    "plan_serving": "roofline.analysis.plan",
    "levers": "roofline.analysis.levers", "sensitivity": "roofline.analysis.sensitivity",
    "requirements": "roofline.analysis.requirements",
    "tco": "roofline.analysis.tco", "reliability": "roofline.analysis.reliability",
    "region": "roofline.analysis.data", "list_regions": "roofline.analysis.data",
    "place": "roofline.analysis.carbon", "price_quotes": "roofline.analysis.data",
    "Space": "roofline.spaces", "hardware_grid": "roofline.spaces",
    "explore": "roofline.spaces",
}


def __getattr__(name: str) -> Any:
    mod = _LAZY.get(name)
    if mod is None:
        raise AttributeError(f"module 'roofline' has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(mod), name)
    globals()[name] = value  # later lookups skip __getattr__
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))


def plot_roofline(*args: Any, **kwargs: Any) -> Any:
    """Roofline chart of results/hardware (needs ``pip install 'roofline[plot]'``)."""
    from .viz.roofline import plot_roofline as _plot

    return _plot(*args, **kwargs)
