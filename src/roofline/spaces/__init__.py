"""Design-space exploration (the package is `spaces`: `roofline.explore` is the function): ``Space``, ``hardware_grid``, ``explore`` (local or on Dask)."""

from .run import ExploreResult, explore
from .space import GridPart, HardwareGrid, Space, hardware_grid

__all__ = ["Space", "hardware_grid", "HardwareGrid", "GridPart", "explore", "ExploreResult"]
