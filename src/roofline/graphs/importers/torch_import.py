"""Import a PyTorch ``nn.Module`` by tracing it on fake tensors.

How: the module runs once under ``FakeTensorMode`` (tensors with shapes and dtypes but no
storage), its parameters and buffers swapped for fake ones with ``torch.func.functional_call``,
so no weight or data is read or written and modules whose parameters live on the meta device
work. A ``TorchDispatchMode`` sees every aten op after autograd and composite decompositions,
with its input and output shapes; forward hooks on every submodule keep the module path
(``layer3.2.conv1``) each op runs in. Each aten op becomes one ``OpRecord`` of a registry kind
(``ops.formulas``) or an ``UnsupportedOp``; views and metadata ops are free. The aten-op
tables and the tracer that maps each call live in ``_torch_ops``; the batch-dimension search
in ``_torch_batch``; the fast path for common ops in ``_torch_fastpath``.

Batch: dimension 0 of every tensor input whose first dimension equals the example's batch is
the batch. The module is traced at that batch b, at 2b and at 3b; costs are fitted as
``c0 + c1·B`` and the third trace checks the fit (a module whose ops change with the batch is
re-traced per batch). Sequence length: with ``seq_dim=d``, dimension d of those inputs is the
sequence; each ``seq_len`` asked is a fresh trace (attention is not affine in it).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from typing import Any

from ... import _args as A
from ...errors import ImportGraphError, SpecError, require_extra
from ._import_common import ImportedModel, OpRecord, Trace, dedupe_names, imported_model
from ._torch_batch import BatchDims, check_batch_dim, find_batch_dims
from ._torch_export import batch_dims_from_dynamic_shapes, export_check
from ._torch_ops import _Tracer
from ._torch_repeat import Repeats

__all__ = ["from_torch"]

def _mode_class(torch: Any) -> type:
    from torch.utils._python_dispatch import TorchDispatchMode

    class _Mode(TorchDispatchMode):  # type: ignore[misc]
        def __init__(self, tracer: _Tracer) -> None:
            super().__init__()
            self.tracer = tracer

        def __torch_dispatch__(self, func: Any, types: Any, args: Any = (),
                               kwargs: Any = None) -> Any:
            kwargs = kwargs or {}
            out = func(*args, **kwargs)
            self.tracer.op(func, tuple(args), kwargs, out)
            return out

    return _Mode


def _trace(module: Any, args: tuple[Any, ...], kwargs: dict[str, Any], dims: BatchDims | None,
           batch: int, seq_dim: int | None, seq0: int | None, seq: int | None,
           keep_views: bool, repeats: Repeats | None = None) -> Trace:
    """One trace with each tensor input's batch dimension (``dims``, per tensor leaf; None:
    the example shapes) set to ``batch``, and the sequence dimension to ``seq``."""
    import torch
    from torch._subclasses.fake_tensor import FakeTensorMode
    from torch.utils import _pytree as pytree

    fake_mode = FakeTensorMode(allow_non_fake_inputs=False)
    params: dict[int, tuple[str, int, bool]] = {}
    keep: list[Any] = []
    with fake_mode:
        def fake(t: Any) -> Any:
            return torch.empty_strided(tuple(t.shape), tuple(t.stride()), dtype=t.dtype,
                                       device="cpu")

        state: dict[str, Any] = {}
        module_params = 0
        for n, p in module.named_parameters():
            state[n] = fake(p)
            params[id(state[n])] = (n, int(p.numel()), True)
            module_params += int(p.numel())
        for n, b in module.named_buffers():
            state[n] = fake(b)
            params[id(state[n])] = (n, int(b.numel()), False)
        keep.extend(state.values())

        leaves, spec = pytree.tree_flatten((args, kwargs))
        n_t = 0
        for i, t in enumerate(leaves):
            if not isinstance(t, torch.Tensor):
                continue
            shape = list(t.shape)
            d = dims[n_t] if dims is not None else None
            n_t += 1
            if d is not None:
                shape[d] = batch
                if seq_dim is not None and seq is not None and len(shape) > seq_dim and \
                        shape[seq_dim] == seq0:
                    shape[seq_dim] = seq
            leaves[i] = torch.empty(shape, dtype=t.dtype, device="cpu")
        f_args, f_kwargs = pytree.tree_unflatten(leaves, spec)
    tracer = _Tracer(torch, params, keep)
    tracer.tainted = {id(t) for t in pytree.tree_leaves((f_args, f_kwargs))
                      if isinstance(t, torch.Tensor)}
    mode = _mode_class(torch)(tracer)
    children = {n for n, m in module.named_modules() if next(m.children(), None) is None}
    handles = []
    modules = list(module.named_modules())

    def pre(path: str) -> Callable[..., None]:
        def hook(mod: Any, inputs: Any) -> None:
            tracer.calls += 1
            tracer.stack.append((path, tracer.calls))
        return hook

    def post(path: str) -> Callable[..., None]:
        def hook(mod: Any, inputs: Any, output: Any) -> None:
            if len(tracer.stack) > 1:
                tracer.stack.pop()
        return hook

    training = {n: m.training for n, m in modules}
    replaced: list[Any] = []
    try:
        for n, m in modules:
            if n:
                handles.append(m.register_forward_pre_hook(pre(n)))
                handles.append(m.register_forward_hook(post(n)))
        if repeats is not None:
            _replay(repeats, modules, tracer, handles, replaced)
        module.eval()
        with fake_mode, mode, torch.no_grad():
            result = torch.func.functional_call(module, state, f_args, f_kwargs, strict=False)
        out_elements = sum(int(t.numel()) for t in pytree.tree_leaves(result)
                           if isinstance(t, torch.Tensor))
    except Exception as e:
        path = tracer.stack[-1][0] if len(tracer.stack) > 1 else ""
        mod = dict(modules).get(path, module)
        where = f"module {path!r} ({type(mod).__name__})" if path else \
            f"the top-level module ({type(module).__name__})"
        raise ImportGraphError(f"the forward pass failed in {where} on the example inputs "
                               f"(traced at batch {batch}): {type(e).__name__}: "
                               f"{str(e).splitlines()[0] if str(e) else ''}") from e
    finally:
        for h in handles:
            h.remove()
        for m in replaced:
            del m.forward  # the class's forward again
        for n, m in modules:
            m.training = training[n]

    # names: a leaf module's single op takes the module path; otherwise path.op
    per_call: dict[int, int] = {}
    for call, _, _ in tracer.records:
        per_call[call] = per_call.get(call, 0) + 1
    names = []
    for call, short, r in tracer.records:
        leaf = r.name in children
        if r.name and leaf and per_call[call] == 1:
            names.append(r.name)
        else:
            names.append(f"{r.name}.{short.lstrip('_')}" if r.name else short.lstrip("_"))
    names = dedupe_names(names)
    records = [replace(r, name=nm) for nm, (_, _, r) in zip(names, tracer.records)]
    if keep_views:
        view_recs = [OpRecord(name=(p or "<root>") + ".view", kind="view", source=op, shape={})
                     for p, op in tracer.views]
        records = records + view_recs
        names2 = dedupe_names([r.name for r in records])
        records = [replace(r, name=nm) for nm, r in zip(names2, records)]
    unsupported = [u for _, _, u in tracer.unsupported]
    note = repeats.note() if repeats is not None and repeats.replayed else None
    return Trace(batch=batch, records=records, unsupported=unsupported,
                 n_views=len(tracer.views), view_names=tracer.views, module_params=module_params,
                 meta={"out_elements": out_elements, "notes": [note] if note else []})


def _replay(repeats: Repeats, modules: list[tuple[str, Any]], tracer: _Tracer,
            handles: list[Any], replaced: list[Any]) -> None:
    """Hooks on the representatives (where their records start and end, their output) and
    the replaying ``forward`` on the repeated layers (``_torch_repeat``)."""
    repeats.saved, repeats.replayed = {}, 0  # one trace's state
    reps = set(repeats.rep_of.values())
    for n, m in modules:
        if n in reps:
            handles.append(m.register_forward_pre_hook(
                lambda mod, a, k, n=n: repeats.start(n, tracer, (a, k)), with_kwargs=True))
            handles.append(m.register_forward_hook(
                lambda mod, a, out, n=n: repeats.end(n, tracer, out)))
        elif n in repeats.rep_of:
            m.forward = repeats.forward(n, m.forward, tracer)
            replaced.append(m)


@A.checked(module=A.anything, example_inputs=A.anything,
           example_kwargs=A.optional(A.mapping(A.text, A.anything,
                                               what="argument names to values")),
           seq_dim=A.optional(A.count(0, 64)), batch_dim=A.anything,  # check_batch_dim
           name=A.optional(A.text), keep_views=A.flag, trace_repeats=A.flag,
           dynamic_shapes=A.anything)  # checked by _torch_export
def from_torch(module: Any, example_inputs: Any = None, *, example_kwargs: dict[str, Any] | None
               = None, seq_dim: int | None = None, batch_dim: Any = None,
               name: str | None = None, keep_views: bool = False,
               trace_repeats: bool = True, dynamic_shapes: Any = None) -> ImportedModel:
    """A Model from a PyTorch module, traced on fake tensors (no weights or data are read).

    ``example_inputs``: a tensor or tuple of positional inputs (meta tensors work).
    ``batch_dim``: the batch's dimension of the first tensor input (the other inputs' batch
    is their dimension of the same size), or one entry per tensor input (None for an input
    without a batch); by default it is found by tracing (``_torch_batch``). ``seq_dim``: the
    input dimension that is the sequence length (e.g. 1 for token ids ``[B, T]``); the model
    then takes ``seq_len=`` like a zoo transformer. ``keep_views=True`` keeps views and
    metadata ops in the graph (kind "view", zero cost) instead of only counting them.
    ``trace_repeats=True`` traces each group of identical layers once (``_torch_repeat``);
    False traces every layer. ``dynamic_shapes``: the batch in torch.export's format
    (``({0: torch.export.Dim("batch")},)``), checked by ``torch.export.export``; when export
    refuses it the batch is found by re-tracing instead (``_torch_export``).
    """
    torch = require_extra("torch", "torch", "Importing a PyTorch module")
    if not isinstance(module, torch.nn.Module):
        raise ImportGraphError(f"expected a torch.nn.Module, got {type(module).__name__}")
    if isinstance(module, torch.jit.ScriptModule):
        raise ImportGraphError("TorchScript modules cannot be traced on fake tensors; pass the "
                               "original nn.Module")
    if example_inputs is None:
        raise ImportGraphError(f"importing {type(module).__name__} needs example_inputs=(...): "
                               "the tensors forward() takes (their shapes and dtypes; meta "
                               "tensors are fine)")
    args: tuple[Any, ...] = example_inputs if isinstance(example_inputs, tuple) else \
        tuple(example_inputs) if isinstance(example_inputs, list) else (example_inputs,)
    kwargs = dict(example_kwargs or {})
    from torch.utils import _pytree as pytree

    tensors = [t for t in pytree.tree_leaves((args, kwargs)) if isinstance(t, torch.Tensor)]
    if not tensors:
        raise ImportGraphError("example_inputs holds no tensor: pass the tensors forward() takes")
    if tensors[0].dim() == 0:
        raise ImportGraphError("the first example input is a scalar: one of its dimensions "
                               "must be the batch")
    shapes = [tuple(int(v) for v in t.shape) for t in tensors]
    seq0: int | None = None
    if seq_dim is not None:
        if isinstance(seq_dim, bool) or not isinstance(seq_dim, int) or seq_dim < 0 or \
                seq_dim >= tensors[0].dim():
            raise SpecError(f"seq_dim must be a dimension of the first input other than the "
                            f"batch (0..{tensors[0].dim() - 1}), got {seq_dim!r}")
        seq0 = shapes[0][seq_dim]
    export_note = None
    if dynamic_shapes is not None:
        given, export_note = _from_export(module, args, kwargs, dynamic_shapes, batch_dim,
                                          shapes, seq_dim, torch)
    else:
        given = check_batch_dim(batch_dim, shapes, seq_dim)
    label = name or type(module).__name__
    rp = Repeats(torch, module) if trace_repeats else None
    state: dict[str, Any] = {"dims": given}
    early: dict[tuple[int, int | None], Trace] = {}  # traces made while finding the batch

    def trace(batch: int, seq: int | None) -> Trace:
        t = early.pop((batch, seq), None)
        return t if t is not None else _trace(module, args, kwargs, state["dims"], batch,
                                              seq_dim, seq0, seq, keep_views, rp)

    if given is None:
        base = _trace(module, args, kwargs, None, 1, seq_dim, seq0, seq0, keep_views, rp)

        def trace_dims(dims: BatchDims, batch: int) -> Trace:
            return _trace(module, args, kwargs, dims, batch, seq_dim, seq0, seq0, keep_views, rp)

        dims, first, doubled = find_batch_dims(shapes, seq_dim, trace_dims, base)
        state["dims"] = dims
        d0 = dims[0]
        assert d0 is not None
        if first is base:
            base.batch = shapes[0][d0]
        batch0 = first.batch
        early[(batch0, seq0)] = first
        early[(2 * batch0, seq0)] = doubled
    else:
        d0 = given[0]
        assert d0 is not None
        batch0 = shapes[0][d0]
    m = imported_model(key=label, name=label, how="torch", trace=trace, batch0=batch0,
                       seq_len0=seq0)
    early.clear()
    m.batch_dims = tuple(state["dims"])
    m.batch_dims_given = given is not None
    if export_note:
        m.notes = m.notes + (export_note,)
    if given is None and batch0 != shapes[0][d0]:
        m.notes = m.notes + (f"the ops at batch {shapes[0][d0]} differ from those at larger "
                             f"batches (a reshape that is a view only there, or a branch on "
                             f"the size): every batch, that one included, is priced from the "
                             f"traces at {batch0}, {2 * batch0} and {3 * batch0}; pass "
                             "batch_dim= to trace it as given",)
    return m


def _from_export(module: Any, args: tuple[Any, ...], kwargs: dict[str, Any], spec: Any,
                 batch_dim: Any, shapes: list[tuple[int, ...]], seq_dim: int | None,
                 torch: Any) -> tuple[BatchDims | None, str]:
    """The batch dims a torch.export ``dynamic_shapes`` spec gives, when ``torch.export``
    accepts it (else None: found by re-tracing), and the note saying which."""
    if batch_dim is not None:
        raise SpecError("pass batch_dim= or dynamic_shapes=, not both")
    dims, name = batch_dims_from_dynamic_shapes(spec, module, args, kwargs, torch)
    why = export_check(module, args, kwargs, spec, torch)
    if why is not None:
        return None, (f"torch.export refused Dim {name!r} as a dynamic batch ({why}); the "
                      "batch was found by re-tracing instead")
    return check_batch_dim(dims, shapes, seq_dim), (
        f"batch from dynamic_shapes: Dim {name!r}, accepted by torch.export")
