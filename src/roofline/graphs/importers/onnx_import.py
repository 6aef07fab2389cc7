"""Import an ONNX file: shapes from ``onnx.shape_inference``, ops through the formula registry.

Nothing in the file is executed: the graph is read with ``onnx.load`` (external weight data is
never loaded: weights are needed only for their shapes) and shapes come from ONNX's own shape
inference with data propagation. Each node becomes one ``OpRecord`` or an ``UnsupportedOp``.

Policies (what a graph-optimising runtime such as ONNX Runtime runs, not the literal node list):
* constant subgraphs (computed only from initializers, constants and tensor shapes: weight
  transposes, shape arithmetic, causal-mask construction) are folded: free;
* Reshape, Flatten, Squeeze, Unsqueeze, Identity, Dropout and SequenceAt are free (metadata);
  Transpose, Concat, Split, Slice, Expand, Tile, Pad, Gather on activations are copies;
* MatMul by a weight followed by an Add of a 1-D weight is one linear layer with bias;
* attention: the opset-23 ``Attention`` op, or MatMul → [scale/mask elementwise] → Softmax →
  MatMul, is one fused attention op (causal when the mask derives from a ``Trilu``); layout ops
  (Transpose, Reshape, Split, scalar scaling) that only feed it or only consume its output are
  absorbed into it, as the fused kernel reads and writes strided tensors.

Batch: a symbolic first dimension of the inputs is the batch (a static first input's batch
axis is the one whose doubling doubles the FLOPs, or ``batch_dim=``); shapes are inferred at
batch b, 2b and 3b and the costs fitted affine, as for PyTorch modules. Another symbolic dimension
needs a value (``dims={"name": n}``) or is the sequence (``seq_dim="name"``, then the model
takes ``seq_len=``).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ... import _args as A
from ...errors import ImportGraphError, RooflineError, SpecError, require_extra
from ...specs.dtypes import Precision
from ._import_common import (
    ImportedModel,
    OpRecord,
    Trace,
    UnsupportedOp,
    dedupe_names,
    imported_model,
    price_records,
)
from .onnx_nodes import _FREE, _SMALL_INIT, MAX_DIM, _Fusions, _Graph, _node, _Unresolved

__all__ = ["UnresolvedDimsError", "from_onnx"]


class UnresolvedDimsError(ImportGraphError):
    """Symbolic input dimensions that are neither the batch nor ``seq_dim`` and have no value
    in ``dims``; ``.dims`` names them (the CLI turns them into ``--dim`` advice)."""

    def __init__(self, message: str, dims: tuple[str, ...]) -> None:
        super().__init__(message)
        self.dims = dims

def _dims(vi: Any) -> tuple[list[int | str], int]:
    t = vi.type.tensor_type
    dims: list[int | str] = []
    for d in t.shape.dim:
        if d.HasField("dim_value") and not 0 <= d.dim_value <= MAX_DIM:
            raise ImportGraphError(f"{vi.name!r} has a static dimension of {d.dim_value:,}; "
                                   f"dimensions are at most {MAX_DIM:,} (2**40)")
        dims.append(d.dim_value if d.HasField("dim_value") else (d.dim_param or "?"))
    return dims, t.elem_type


def _load(path: Path) -> tuple[Any, Any]:
    onnx = require_extra("onnx", "onnx", "Importing an ONNX file")
    if not path.exists():
        raise ImportGraphError(f"ONNX file {str(path)!r} does not exist")
    try:
        mp = onnx.load(str(path), load_external_data=False)
    except Exception as e:  # noqa: BLE001 - protobuf raises several types
        raise ImportGraphError(f"{str(path)!r} does not parse as an ONNX model: "
                               f"{type(e).__name__}: {e}") from None
    if not mp.graph.node:
        raise ImportGraphError(f"{str(path)!r} holds no ONNX graph nodes (not an ONNX model?)")
    return onnx, mp


def _skeleton(onnx: Any, mp: Any) -> Any:
    """The model without large weight data: big initializers become typed graph inputs."""
    sk = onnx.ModelProto()
    sk.ir_version = mp.ir_version
    sk.opset_import.extend(mp.opset_import)
    sk.functions.extend(mp.functions)
    g = sk.graph
    g.name = mp.graph.name
    g.node.extend(mp.graph.node)
    g.output.extend(mp.graph.output)
    g.value_info.extend(mp.graph.value_info)  # the exporter's shapes seed inference
    init_names = {t.name for t in mp.graph.initializer}
    g.input.extend(i for i in mp.graph.input if i.name not in init_names)
    for t in mp.graph.initializer:
        n = math.prod(t.dims)
        external = t.data_location == onnx.TensorProto.EXTERNAL
        if n <= _SMALL_INIT and not external:
            g.initializer.append(t)
        else:
            g.input.append(onnx.helper.make_tensor_value_info(t.name, t.data_type, list(t.dims)))
    return sk


def _flops(t: Trace) -> float:
    """FLOPs of a trace's input-derived ops (constant-only ops do not scale with a batch)."""
    recs = [r for r in t.records if r.from_input]
    return float(price_records(recs, _PROBE).sum(axis=1)[0]) if recs else 0.0


_PROBE = Precision(compute="fp32", weights="fp32", activations="fp32", kv="fp32")


def _static_batch_axis(first: list[int | str], batch_dim: str | int | None, input_name: str,
                       probe: Any) -> int:
    """The batch axis of a static first input: ``batch_dim`` when given as an axis; else the
    one axis whose doubling doubles every input-derived FLOP (per-sample costs through zero,
    shapes inferable), found by ``probe(axis, size) -> Trace``. None or several: an error
    naming ``batch_dim=``, never dimension 0 assumed."""
    rank = len(first)
    if batch_dim is not None:
        if isinstance(batch_dim, str) or not 0 <= batch_dim < rank:
            raise SpecError(f"batch_dim={batch_dim!r}: input {input_name!r} has a static shape "
                            f"{first}; give the batch as an axis, 0 to {rank - 1}")
        return int(batch_dim)
    base = _flops(probe(None, 0))
    found: list[int] = []
    why: list[str] = []
    for ax in range(rank):
        try:
            f2 = _flops(probe(ax, 2 * int(first[ax])))
        except (RooflineError, ValueError, KeyError) as e:  # not inferable at that size
            why.append(f"dim {ax} ({first[ax]}): {str(e).split(': ', 1)[-1][:80]}")
            continue
        if base > 0 and abs(f2 - 2 * base) <= 1e-9 * base:
            found.append(ax)
        else:
            why.append(f"dim {ax} ({first[ax]}): doubling it gives {f2 / max(base, 1):.3g}x "
                       "the FLOPs, not 2x")
    if len(found) == 1:
        return found[0]
    hint = ("pass batch_dim=<axis> (an int), or export the file with a symbolic batch "
            "dimension")
    if found:
        raise ImportGraphError(
            f"input {input_name!r} has the static shape {first}: dims "
            f"{', '.join(map(str, found))} each scale every cost linearly, so which is the "
            f"batch cannot be told; {hint}")
    raise ImportGraphError(
        f"input {input_name!r} has the static shape {first} and no dimension of it is a "
        f"batch (one whose doubling doubles the FLOPs): {'; '.join(why)}; {hint}")


def _batch_symbol(first: list[int | str], batch_dim: str | int | None, seq_dim: str | None,
                  fixed: Mapping[str, int], input_name: str) -> str | None:
    """The symbolic dimension of the first input that is the batch: ``batch_dim`` when given;
    else its only symbolic dimension not valued by ``dims``/``seq_dim``; else the one whose
    name says batch ("batch", "batch_size", ...). None: a static first input (its dimension
    0 is re-set to price other batches). Several candidates: an error naming batch_dim=."""
    syms = [v for v in first if isinstance(v, str)]
    if isinstance(batch_dim, int) and syms:  # an axis of a symbolic first input
        if not 0 <= batch_dim < len(first) or not isinstance(first[batch_dim], str):
            raise SpecError(f"batch_dim={batch_dim}: input {input_name!r} has dimensions "
                            f"{first}; the batch must be a symbolic one (name or axis)")
        batch_dim = str(first[batch_dim])
    if isinstance(batch_dim, int):
        return None  # a static first input: _static_batch_axis reads the axis
    if batch_dim is not None:
        if batch_dim not in syms:
            raise SpecError(f"batch_dim={batch_dim!r} is not a symbolic dimension of input "
                            f"{input_name!r}; its dimensions: {first}")
        return batch_dim
    free = [v for v in dict.fromkeys(syms) if v != seq_dim and v not in fixed]
    if not syms:
        return None
    if len(free) == 1:
        return free[0]
    named = [v for v in dict.fromkeys(syms) if "batch" in v.lower()]
    if len(named) == 1:
        return named[0]
    raise ImportGraphError(
        f"input {input_name!r} has symbolic dimensions {first}: which is the batch? pass "
        f"batch_dim='name' (and dims={{'name': value}} or seq_dim= for the others)")


@A.checked(path=A.path, dims=A.optional(A.mapping(A.text, A.count(1, MAX_DIM),
                                                  what="symbolic dimension names to sizes")),
           seq_dim=A.optional(A.text), seq_len=A.optional(A.count(1, A.MAX_TOKENS)),
           batch_dim=A.optional(A.either(A.text, A.count(0, 64),
                                         what="a symbolic dimension name or an axis")),
           name=A.optional(A.text), keep_views=A.flag)
def from_onnx(path: str | Path, *, dims: Mapping[str, int] | None = None,
              seq_dim: str | None = None, seq_len: int | None = None,
              batch_dim: str | int | None = None, name: str | None = None,
              keep_views: bool = False) -> ImportedModel:
    """A Model from an ONNX file (shapes by ONNX shape inference; the file is only parsed).

    ``dims``: values for symbolic input dimensions other than the batch. ``seq_dim``: the
    symbolic dimension that is the sequence length; the model then takes ``seq_len=`` (default
    ``seq_len`` given here). ``batch_dim``: the dimension of the first input that is the batch,
    a symbolic name or an axis (default: ``_batch_symbol``; a static input's batch axis is
    found by ``_static_batch_axis``). ``keep_views=True`` keeps free ops in the graph as kind
    "view".
    """
    path = Path(path)
    onnx, mp = _load(path)
    fixed = dict(dims or {})
    for key, val in fixed.items():
        if isinstance(val, bool) or not isinstance(val, int) or val < 1:
            raise SpecError(f"dims[{key!r}] must be a positive integer, got {val!r}")
    G = _Graph(onnx, mp)
    F = _Fusions(G)
    inputs = [i for i in mp.graph.input if i.name not in G.inits]
    if not inputs:
        raise ImportGraphError(f"{str(path)!r} has no graph inputs besides its weights")
    first, _ = _dims(inputs[0])
    if not first:
        raise ImportGraphError(f"input {inputs[0].name!r} is a scalar: its first dimension "
                               "must be the batch")
    batch_sym = _batch_symbol(first, batch_dim, seq_dim, fixed, inputs[0].name)
    axis = 0  # the static first input's batch axis, set below
    symbols = {v for i in (*inputs, *mp.graph.value_info, *mp.graph.output)
               for v in _dims(i)[0] if isinstance(v, str)}
    for what, given in (("dims", [k for k in fixed if k not in symbols and k != batch_sym]),
                        ("seq_dim", [seq_dim] if seq_dim and seq_dim not in symbols else [])):
        if given:
            raise SpecError(f"{what} names {', '.join(map(repr, given))}, not a symbolic input "
                            f"dimension of {path.name}; its symbolic dimensions: "
                            f"{', '.join(map(repr, sorted(symbols))) or 'none'}")
    unresolved: list[str] = []
    names: list[str] = []
    for i in inputs:
        d, _ = _dims(i)
        for ax, v in enumerate(d):
            if isinstance(v, str) and v != batch_sym and v != seq_dim and v not in fixed:
                unresolved.append(f"{i.name}[{ax}]={v!r}")
                names.append(v)
    if unresolved:
        raise UnresolvedDimsError(
            f"{str(path)!r}: unresolvable input shapes: symbolic dimension(s) "
            f"{', '.join(unresolved)}; pass dims={{'name': value}} (or seq_dim='name' with "
            "seq_len= for the sequence length)", tuple(dict.fromkeys(names)))
    if seq_dim is not None and (seq_len is None or seq_len < 1):
        raise SpecError(f"seq_dim={seq_dim!r} needs seq_len= (a positive example length)")
    seq0 = seq_len if seq_dim is not None else None
    skeleton = _skeleton(onnx, mp)
    module_params = sum(math.prod(t.dims) for t in mp.graph.initializer
                        if math.prod(t.dims) > 1)
    label = name or path.stem

    def trace(batch: int, seq: int | None, probe_axis: int | None = -1) -> Trace:
        """Shapes inferred at ``batch``; ``probe_axis`` (static input): the axis re-set to
        ``batch`` (None: the file's own shapes)."""
        ax_b = axis if probe_axis == -1 else probe_axis
        values = dict(fixed)
        if seq_dim is not None:
            values[seq_dim] = int(seq if seq is not None else seq0 or 1)
        sk = onnx.ModelProto()
        sk.CopyFrom(skeleton)
        for inp in sk.graph.input:
            if inp.name in G.inits:
                continue
            for ax, d in enumerate(inp.type.tensor_type.shape.dim):
                # a static file: the batch axis of every input of the first input's size there
                if batch_sym is not None and d.dim_param == batch_sym or \
                        batch_sym is None and ax == ax_b and d.dim_value == first[ax]:
                    d.dim_value = batch
                elif d.dim_param in values:
                    d.dim_value = int(values[d.dim_param])
        known = {**values, **({batch_sym: batch} if batch_sym else {})}
        for vi in sk.graph.value_info:
            for d in vi.type.tensor_type.shape.dim:
                if d.HasField("dim_param"):
                    if d.dim_param in known:
                        d.dim_value = int(known[d.dim_param])
                    else:
                        d.ClearField("dim_param")  # an expression: left to inference
        try:
            inferred = onnx.shape_inference.infer_shapes(sk, strict_mode=True, data_prop=True)
        except Exception as e:  # noqa: BLE001 - onnx raises InferenceError and others
            raise ImportGraphError(f"{str(path)!r}: ONNX shape inference failed at batch "
                                   f"{batch}: {str(e).splitlines()[0]}") from None
        shapes: dict[str, tuple[list[int | str], int]] = {}
        values[batch_sym or ""] = batch
        # the file's own value_info (exporters write it) fills what inference cannot resolve
        for vi in (*mp.graph.value_info, *inferred.graph.input, *inferred.graph.value_info,
                   *inferred.graph.output):
            d, et = _dims(vi)
            d = [values.get(x, x) if isinstance(x, str) else x for x in d]
            old = shapes.get(vi.name)
            if old is None or all(isinstance(x, int) for x in d) or not old[0]:
                shapes[vi.name] = (d, et or (old[1] if old else 0))
        for t in mp.graph.initializer:
            shapes[t.name] = (list(t.dims), t.data_type)
        return _walk(G, F, shapes, batch, keep_views, module_params)

    if batch_sym is None:
        axis = _static_batch_axis(first, batch_dim, inputs[0].name,
                                  lambda ax, size: trace(size if ax is not None else 1, seq0, ax))
    batch0 = int(fixed.pop(batch_sym, 1)) if batch_sym else int(first[axis])
    return imported_model(key=label, name=label, how="onnx", trace=trace, batch0=batch0,
                          seq_len0=seq0)


def _walk(G: _Graph, F: _Fusions, shapes: dict[str, tuple[list[int | str], int]], batch: int,
          keep_views: bool, module_params: int) -> Trace:
    import onnx

    counted: set[str] = set()
    names: list[str] = []
    recs: list[OpRecord] = []
    unsupported: list[UnsupportedOp] = []
    views: list[tuple[str, str]] = []

    def shape(v: str) -> list[int]:
        d = shapes.get(v)
        if d is None or any(not isinstance(x, int) for x in d[0]):
            raise _Unresolved(v)
        return [int(x) for x in d[0]]

    def itemsize(v: str) -> float:
        d = shapes.get(v)
        if d is None or not d[1]:
            return 4.0
        return float(onnx.helper.tensor_dtype_to_np_dtype(d[1]).itemsize)

    def numel(v: str) -> int:
        return int(math.prod(shape(v)))

    def is_float(v: str) -> bool:
        d = shapes.get(v)
        return d is not None and d[1] in (onnx.TensorProto.FLOAT, onnx.TensorProto.FLOAT16,
                                          onnx.TensorProto.BFLOAT16, onnx.TensorProto.DOUBLE)

    def take(*vs: str) -> int:
        n = 0
        for v in vs:
            w = G.worigin.get(v) if v else None
            if w is not None and w not in counted and w in G.inits:
                counted.add(w)
                k = int(math.prod(G.inits[w].dims))
                n += k if k > 1 else 0
        return n

    for i, node in enumerate(G.nodes):
        op = node.op_type
        label = G.scope(i, "attention" if i in F.attn else op.lower())
        if i in F.absorbed:
            views.append((label, f"onnx:{op} (fused)"))
            continue
        if all(o in G.static for o in node.output) or op in _FREE:
            views.append((label, f"onnx:{op}"))
            continue
        try:
            got = _node(G, F, i, node, shape, numel, itemsize, is_float, take)
        except _Unresolved as e:
            raise ImportGraphError(f"unresolvable shapes: ONNX shape inference gave no concrete "
                                   f"shape for {e.args[0]!r}, input of node {node.name!r} "
                                   f"({op}); pass dims= for the symbolic dimensions") from None
        except SpecError as e:
            got = f"the formula refused these shapes: {e}"
        if isinstance(got, list):
            for kind, shp, params, extra, fixed in got:
                names.append(label)
                recs.append(OpRecord(name=label, kind=kind, source=f"onnx:{op}", shape=shp,
                                     params=params, extra_act_read=extra, act_fixed_bytes=fixed))
            continue
        ins = tuple(tuple(shape(x)) if x in shapes else () for x in node.input if x)
        outs = tuple(tuple(shape(x)) if x in shapes else () for x in node.output if x)
        el = sum(math.prod(s) for s in ins + outs)
        by = sum(math.prod(shape(x)) * itemsize(x) for x in [*node.input, *node.output]
                 if x and x in shapes)
        unsupported.append(UnsupportedOp(name=label, op=f"onnx:{op}" + (
            f" ({node.domain})" if node.domain else ""), input_shapes=ins, output_shapes=outs,
            elements=int(el), bytes=float(by), reason=got or "no formula for this op"))
    final = dedupe_names(names)
    records = [OpRecord(name=n, kind=r.kind, source=r.source, shape=r.shape, params=r.params,
                        extra_act_read=r.extra_act_read, act_fixed_bytes=r.act_fixed_bytes)
               for n, r in zip(final, recs)]
    if keep_views:
        vnames = dedupe_names([r.name for r in records] + [f"{p}.view" for p, _ in views])
        records += [OpRecord(name=n, kind="view", source=op, shape={})
                    for n, (_, op) in zip(vnames[len(records):], views)]
    return Trace(batch=batch, records=records, unsupported=unsupported, n_views=len(views),
                 view_names=views, module_params=module_params)
