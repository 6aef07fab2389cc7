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


def closest(name: str, choices: Iterable[str], n: int = 5) -> str:
    """A ' Did you mean ...?' suffix naming the (at most ``n``) closest valid choices, or ''."""
    hits = nearest(name, choices, n, cutoff=0.5)
    if not hits:
        return ""
    quoted = [repr(h) for h in hits]
    return " Did you mean " + (", ".join(quoted[:-1]) + " or " + quoted[-1]
                               if len(quoted) > 1 else quoted[0]) + "?"


def nearest(name: str, choices: Iterable[str], n: int = 5, cutoff: float = 0.0) -> list[str]:
    """The ``n`` valid choices closest to ``name`` (case-insensitive), best first."""
    import difflib

    lowered = {c.lower(): c for c in choices}
    return [lowered[h] for h in difflib.get_close_matches(name.lower(), list(lowered), n=n,
                                                          cutoff=cutoff)]


#: a pool this small is listed whole in an unknown-name error
LIST_ALL = 8


def unknown(what: str, name: str, choices: Iterable[str]) -> UnknownNameError:
    """The standard 'unknown X' error: the 5 closest valid names (never the whole zoo; a
    pool of up to 8 names is listed whole)."""
    pool = sorted(set(choices))
    if len(pool) <= LIST_ALL:
        return UnknownNameError(f"unknown {what} {name!r}.{closest(name, pool)} Known: "
                                f"{', '.join(pool)}")
    near = closest(name, pool)
    if not near:
        near = " Closest: " + ", ".join(repr(h) for h in nearest(name, pool, 5)) + "."
    return UnknownNameError(f"unknown {what} {name!r}.{near} ({len(pool)} known; "
                            "`roofline zoo` lists models and hardware)")


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
