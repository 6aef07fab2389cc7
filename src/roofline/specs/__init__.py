"""Frozen specifications and their loaders: hardware, dtypes/precision, provenance."""

from .dtypes import DTYPE_BYTES, DTYPES, Precision, precision
from .hardware import (
    KINDS,
    Hardware,
    Link,
    MemoryLevel,
    load_hardware_file,
    parse_hardware,
)
from .resolve import hardware, list_hardware
from .sourced import Provenance, read_quantity

__all__ = ["DTYPE_BYTES", "DTYPES", "Precision", "precision", "KINDS", "Hardware", "Link",
           "MemoryLevel", "hardware", "list_hardware", "load_hardware_file", "parse_hardware",
           "Provenance", "read_quantity"]
