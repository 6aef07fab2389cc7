"""``dynamic_shapes=`` in torch.export's format: the batch dimension said the way
``torch.export.export`` takes it, and checked by it.

``from_torch(module, (x, mask), dynamic_shapes=({0: Dim("batch")}, {0: Dim("batch")}))`` (or a
dict keyed by ``forward``'s argument names, or ``(None, Dim("batch"), None)`` per dimension)
names the batch: the ``Dim`` called ``batch`` (``batch_size``, ...), or the only ``Dim`` given.
Other ``Dim``s (a sequence) keep their example size; ``seq_dim=`` still sets the sequence.

The module is then exported once with those dynamic shapes (``torch.export.export``, non-strict,
on the fake/meta example inputs): when export accepts the batch as dynamic, no op specialises
on its size, and the batch dims are used as given. When export refuses (a reshape that fixes
the size, an op export cannot trace), the importer falls back to finding the batch by
re-tracing (``_torch_batch``) and says why in the model's notes. Either way the costs come
from the fake-tensor traces at b, 2b, 3b (the exported graph is only the check).
"""

from __future__ import annotations

import inspect
from typing import Any

from ...errors import SpecError

__all__ = ["batch_dims_from_dynamic_shapes", "export_check"]


def _per_input(spec: Any, module: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> list[Any]:
    """The spec entry of each top-level input, positional then keyword (torch's order)."""
    n = len(args) + len(kwargs)
    if isinstance(spec, dict):
        try:
            names = list(inspect.signature(module.forward).parameters)
        except (TypeError, ValueError):
            names = []
        pos = names[:len(args)]
        unknown = set(spec) - set(pos) - set(kwargs)
        if unknown:
            raise SpecError(f"dynamic_shapes names {sorted(unknown)}, not inputs of "
                            f"{type(module).__name__}.forward ({', '.join(pos + list(kwargs))})")
        return [spec.get(p) for p in pos] + [spec.get(k) for k in kwargs]
    if isinstance(spec, tuple | list):
        if len(spec) != n:
            raise SpecError(f"dynamic_shapes has {len(spec)} entries for {n} inputs: give one per "
                            "input (None for an input with static shapes)")
        return list(spec)
    raise SpecError(f"dynamic_shapes must be a tuple (one entry per input) or a dict keyed by "
                    f"forward's argument names, got {type(spec).__name__}")


def _dims_of(entry: Any, rank: int, i: int) -> dict[int, Any]:
    """{dimension: Dim} of one tensor input's entry ({d: Dim}, or a Dim/None per dimension)."""
    if entry is None:
        return {}
    if isinstance(entry, dict):
        out = {}
        for d, v in entry.items():
            if isinstance(d, bool) or not isinstance(d, int) or not 0 <= d < rank:
                raise SpecError(f"dynamic_shapes entry {i}: dimension {d!r} is not a dimension "
                                f"of a rank-{rank} input")
            if v is not None:
                out[d] = v
        return out
    if isinstance(entry, tuple | list):
        if len(entry) != rank:
            raise SpecError(f"dynamic_shapes entry {i} has {len(entry)} dims for a rank-{rank} "
                            "input")
        return {d: v for d, v in enumerate(entry) if v is not None}
    raise SpecError(f"dynamic_shapes entry {i} must be None, {{dim: Dim}} or one Dim/None per "
                    f"dimension, got {type(entry).__name__} (nested inputs: pass batch_dim=)")


def _name(v: Any) -> str:
    return str(getattr(v, "__name__", v))


def batch_dims_from_dynamic_shapes(spec: Any, module: Any, args: tuple[Any, ...],
                                   kwargs: dict[str, Any], torch: Any
                                   ) -> tuple[tuple[int | None, ...], str]:
    """Per tensor input its batch dimension (None: none), and the batch Dim's name."""
    entries = _per_input(spec, module, args, kwargs)
    inputs = list(args) + list(kwargs.values())
    per: list[dict[int, Any]] = []
    for i, (x, e) in enumerate(zip(inputs, entries)):
        if not isinstance(x, torch.Tensor):
            if e is not None:
                raise SpecError(f"dynamic_shapes entry {i} is given for a non-tensor input "
                                "(nested inputs: pass batch_dim=)")
            continue
        per.append(_dims_of(e, x.dim(), i))
    names = sorted({_name(v) for d in per for v in d.values()})
    if not names:
        raise SpecError("dynamic_shapes marks no dimension dynamic: mark the batch, e.g. "
                        "({0: torch.export.Dim('batch')},)")
    batchy = [n for n in names if "batch" in n.lower()]
    if len(names) == 1:
        batch = names[0]
    elif len(batchy) == 1:
        batch = batchy[0]
    else:
        raise SpecError(f"dynamic_shapes has the Dims {names}: which is the batch? name it "
                        "'batch' (torch.export.Dim('batch')) or pass batch_dim=")
    out: list[int | None] = []
    for d in per:
        hit = [k for k, v in d.items() if _name(v) == batch]
        if len(hit) > 1:
            raise SpecError(f"dynamic_shapes marks dims {hit} of one input as the batch "
                            f"{batch!r}: mark one")
        out.append(hit[0] if hit else None)
    if out and out[0] is None:
        raise SpecError(f"dynamic_shapes: the first tensor input has no {batch!r} dimension; "
                        "the first input must hold the batch")
    return tuple(out), batch


def export_check(module: Any, args: tuple[Any, ...], kwargs: dict[str, Any], spec: Any,
                 torch: Any) -> str | None:
    """None when ``torch.export.export`` accepts ``spec`` (the batch is dynamic), else why."""
    try:
        torch.export.export(module, args, kwargs or None, dynamic_shapes=spec, strict=False)
    except Exception as e:  # noqa: BLE001 - any refusal means: fall back to re-tracing
        first = (str(e).strip().splitlines() or [type(e).__name__])[0]
        return f"{type(e).__name__}: {first[:200]}"
    return None
