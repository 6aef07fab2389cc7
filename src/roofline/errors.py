"""The exception tree. Every error a user can trigger is a ``RooflineError`` and also a builtin
(``ValueError``/``KeyError``/``ImportError``), so ``except ValueError`` keeps working."""

from __future__ import annotations

from collections.abc import Iterable

__all__ = [
    "RooflineError", "SpecError", "SourceError", "UnknownNameError", "UnsupportedDtypeError",
    "MissingExtraError", "ImportGraphError", "closest", "unknown", "require_extra",
]


class RooflineError(Exception):
    """Base class of every error roofline raises on purpose."""


class SpecError(RooflineError, ValueError):
    """A specification, argument or data file is invalid (names the field and what is allowed)."""


class SourceError(SpecError):
    """A number in a data file has no ``source``."""


class UnsupportedDtypeError(SpecError):
    """A hardware part has no peak for the requested dtype."""


class UnknownNameError(RooflineError, KeyError):
    """A zoo name, alias, preset or op kind is not known."""

    def __str__(self) -> str:  # KeyError quotes its message; keep it readable
        return str(self.args[0]) if self.args else ""


class MissingExtraError(RooflineError, ImportError):
    """An optional dependency is not installed; the message names the pip command."""


class ImportGraphError(RooflineError, ValueError):
    """A user model (module, ONNX file) could not be turned into an operator graph."""


def closest(name: str, choices: Iterable[str], n: int = 3) -> str:
    """A ' Did you mean ...?' suffix naming the closest valid choices, or ''."""
    import difflib

    pool = list(choices)
    lowered = {c.lower(): c for c in pool}
    hits = difflib.get_close_matches(name.lower(), list(lowered), n=n, cutoff=0.5)
    if not hits:
        return ""
    return " Did you mean " + " or ".join(repr(lowered[h]) for h in hits) + "?"


def unknown(what: str, name: str, choices: Iterable[str]) -> UnknownNameError:
    """Build the standard 'unknown X' error listing valid names and the closest ones."""
    pool = sorted(set(choices))
    shown = ", ".join(pool[:40]) + (", ..." if len(pool) > 40 else "")
    return UnknownNameError(f"unknown {what} {name!r}.{closest(name, pool)} Known: {shown}")


def require_extra(module: str, extra: str, purpose: str):  # type: ignore[no-untyped-def]
    """Import an optional dependency or raise MissingExtraError naming the pip install."""
    import importlib

    try:
        return importlib.import_module(module)
    except ImportError as e:
        raise MissingExtraError(
            f"{purpose} needs the optional dependency {module!r}: "
            f"pip install 'roofline[{extra}]'"
        ) from e
