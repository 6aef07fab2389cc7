"""Scenarios: inference (``sweep``), LLM serving (``serving/``) and training (``training/``)."""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import sys
from types import ModuleType

# Private modules that moved into the packages (issue 10's layout): their old dotted names stay
# importable, as the SAME module object (one copy of every cache), until their last callers move.
_MOVED = {
    f"{__name__}._serving_plan": f"{__name__}.serving.plan",
}


class _MovedLoader(importlib.abc.Loader):
    def create_module(self, spec: importlib.machinery.ModuleSpec) -> ModuleType:
        return importlib.import_module(_MOVED[spec.name])

    def exec_module(self, module: ModuleType) -> None:  # already executed under its new name
        pass


class _MovedFinder(importlib.abc.MetaPathFinder):
    def find_spec(self, fullname: str, path: object, target: object = None
                  ) -> importlib.machinery.ModuleSpec | None:
        if fullname not in _MOVED:
            return None
        return importlib.machinery.ModuleSpec(fullname, _MovedLoader())


if not any(isinstance(f, _MovedFinder) for f in sys.meta_path):
    sys.meta_path.append(_MovedFinder())
