"""Design-space exploration: ``Space``, ``hardware_grid``, ``explore`` (local or on Dask).

The package is ``spaces`` because ``roofline.explore`` is the function."""

from .run import ExploreResult, explore
from .space import GridPart, HardwareGrid, Space, hardware_grid

__all__ = ["Space", "hardware_grid", "HardwareGrid", "GridPart", "explore", "ExploreResult"]
