"""Repeated layers traced once: a decoder's 80 identical blocks cost one block's trace.

A list of sibling modules (an ``nn.ModuleList`` such as ``model.layers``: children named
0, 1, 2, ...) whose members have the same *signature* — the same class, the same parameter and
buffer names, shapes and dtypes, and the same plain attributes (ints, floats, strings, bools,
None) in every submodule, a layer's own index (``layer_idx``) aside — is traced for its first
member only. Each later member with that signature is *replayed*: when it is called with
inputs of the shapes its representative saw, it returns the representative's output (fake
tensors: nothing is computed) and the representative's op records are copied under its own
module path. A member called with other shapes runs for real. Members that differ in an
attribute (Gemma 2's sliding-window layers, DeepSeek-V3's dense first layers: other shapes)
have other signatures and are traced themselves.

What a replay cannot see: Python code in ``forward`` that branches on the layer's index
itself rather than on an attribute set from it (no transformers model found so far does);
``from_torch(..., trace_repeats=False)`` traces every layer.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

__all__ = ["Repeats"]

#: attributes that differ between otherwise identical layers without changing their costs
_INDEX_ATTRS = frozenset({"layer_idx", "layer_id", "layer_index", "layer_number", "idx",
                          "training"})


def _plain(v: Any) -> bool:
    return v is None or isinstance(v, bool | int | float | str) or (
        isinstance(v, tuple) and all(_plain(x) for x in v))


def _signature(mod: Any) -> tuple[Any, ...]:
    parts: list[Any] = []
    for name, m in mod.named_modules():
        attrs = tuple(sorted((k, v) for k, v in vars(m).items()
                             if not k.startswith("_") and k not in _INDEX_ATTRS and _plain(v)))
        tensors = tuple((n, tuple(t.shape), str(t.dtype))
                        for n, t in (*m.named_parameters(recurse=False),
                                     *m.named_buffers(recurse=False)))
        parts.append((name, type(m).__qualname__, attrs, tensors))
    return tuple(parts)


def _shapes(torch: Any, xs: Any) -> tuple[Any, ...]:
    from torch.utils import _pytree as pytree

    return tuple((tuple(t.shape), t.dtype) if isinstance(t, torch.Tensor) else type(t).__name__
                 for t in pytree.tree_leaves(xs))


class Repeats:
    """Finds the repeated layers of a module and replays them during one trace."""

    def __init__(self, torch: Any, module: Any) -> None:
        self.torch = torch
        self.rep_of: dict[str, str] = {}  #: replayed path -> its representative's path
        for path, m in module.named_modules():
            kids = list(m.named_children())
            if len(kids) < 2 or not all(n.isdigit() for n, _ in kids):
                continue
            if any(path == r or path.startswith(r + ".") for r in self.rep_of):
                continue  # inside a replayed layer: never runs
            if len({id(c) for _, c in kids}) < len(kids):
                continue  # the same module object twice (shared weights): trace each call
            first: dict[tuple[Any, ...], str] = {}
            for n, child in kids:
                full = f"{path}.{n}" if path else n
                sig = _signature(child)
                if sig in first:
                    self.rep_of[full] = first[sig]
                else:
                    first[sig] = full
        self.saved: dict[str, tuple[Any, Any, tuple[int, int, int, int, int, int]]] = {}
        self.replayed = 0

    def note(self) -> str | None:
        if not self.rep_of:
            return None
        reps = sorted(set(self.rep_of.values()))
        return (f"{len(self.rep_of)} repeated layers traced once: their ops are copied from "
                f"{', '.join(reps[:4])}{' ...' if len(reps) > 4 else ''} (same class, shapes "
                "and attributes); trace_repeats=False traces each")

    # -- during a trace
    def start(self, path: str, tracer: Any, inputs: Any) -> None:
        """Pre-hook of a representative: where its records begin."""
        self.saved[path] = (_shapes(self.torch, inputs), None,
                            (len(tracer.records), len(tracer.unsupported), len(tracer.views),
                             0, 0, 0))

    def end(self, path: str, tracer: Any, output: Any) -> None:
        shapes, _, (r0, u0, v0, *_) = self.saved[path]
        self.saved[path] = (shapes, output, (r0, u0, v0, len(tracer.records),
                                             len(tracer.unsupported), len(tracer.views)))

    def forward(self, path: str, original: Any, tracer: Any) -> Any:
        """The replacing ``forward`` of a replayed layer."""
        rep = self.rep_of[path]

        def fwd(*args: Any, **kwargs: Any) -> Any:
            got = self.saved.get(rep)
            if got is None or got[1] is None or \
                    _shapes(self.torch, (args, kwargs)) != got[0]:
                return original(*args, **kwargs)
            self._copy(rep, path, got[2], tracer)
            self.replayed += 1
            return got[1]

        return fwd

    def _copy(self, rep: str, path: str, span: tuple[int, ...], tracer: Any) -> None:
        r0, u0, v0, r1, u1, v1 = span

        def moved(name: str) -> str:
            return path + name[len(rep):] if name == rep or name.startswith(rep + ".") \
                else name

        ids: dict[int, int] = {}

        def call(c: int) -> int:
            if c not in ids:
                tracer.calls += 1
                ids[c] = tracer.calls
            return ids[c]

        for c, short, r in tracer.records[r0:r1]:
            tracer.records.append((call(c), short, replace(r, name=moved(r.name))))
        for c, short, u in tracer.unsupported[u0:u1]:
            tracer.unsupported.append((call(c), short, replace(u, name=moved(u.name))))
        tracer.views.extend((moved(p), op) for p, op in tracer.views[v0:v1])
