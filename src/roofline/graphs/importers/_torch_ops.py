"""aten ops to op records: the tables that say which registry kind each aten op is, and the
tracer that turns one traced call (its inputs, outputs and module path) into ``OpRecord`` s.

Used by ``torch_import`` (which runs the module under fake tensors and feeds every aten call to
``_Tracer.op``); the tables are also the list of what the importer understands.
"""

from __future__ import annotations

import math
from dataclasses import replace
from typing import Any

from ...errors import SpecError
from ._import_common import Bytes, OpRecord, UnsupportedOp
from ._torch_fastpath import FASTPATH_OPS, fastpath_records

#: aten elementwise op -> (ELEMENTWISE_FLOPS key, comment on the FLOPs per element)
_ELEMENTWISE: dict[str, str] = {
    "add": "add", "sub": "sub", "rsub": "sub", "mul": "mul", "div": "div",
    "relu": "relu", "silu": "silu", "sigmoid": "sigmoid", "tanh": "tanh",
    "hardswish": "hardswish", "hardsigmoid": "hardsigmoid", "exp": "exp", "sqrt": "sqrt",
    "rsqrt": "sqrt",  # 1 FLOP, as sqrt
    "neg": "neg", "abs": "abs", "pow": "pow", "where": "where", "masked_fill": "where",
    "clamp": "clamp", "clamp_min": "mask", "clamp_max": "mask",  # one comparison
    "reciprocal": "div", "square": "mul", "floor_divide": "div", "remainder": "div",
    # one transcendental each, counted as exp is (1 FLOP)
    "log": "exp", "log1p": "exp", "expm1": "exp", "erf": "exp", "sin": "exp", "cos": "exp",
    "exp2": "exp", "log2": "exp", "softplus": "exp",
    # one comparison or logical op each
    "eq": "mask", "ne": "mask", "lt": "mask", "le": "mask", "gt": "mask", "ge": "mask",
    "logical_and": "mask", "logical_or": "mask", "logical_not": "mask", "bitwise_and": "mask",
    "bitwise_or": "mask", "bitwise_not": "mask", "maximum": "mask", "minimum": "mask",
    "tril": "mask", "triu": "mask", "floor": "abs", "ceil": "abs", "round": "abs",
    "trunc": "abs", "sign": "abs",
    "native_dropout": "dropout", "_to_copy": "cast",
}
#: factories and fills: write their output, read nothing
_FILL = {"zeros", "ones", "full", "fill", "zero", "arange", "scalar_tensor", "new_zeros",
         "new_ones", "new_full", "zeros_like", "ones_like", "full_like", "rand", "randn",
         "rand_like", "randn_like", "normal", "uniform", "bernoulli", "randint", "linspace"}
#: pure data movement: read the input(s), write the output
_COPY = {"clone", "cat", "stack", "constant_pad_nd", "index_select", "gather", "index",
         "repeat", "expand_copy", "roll", "flip", "slice_scatter", "select_scatter",
         "index_put", "scatter", "copy", "permute_copy", "transpose_copy", "view_copy",
         "reflection_pad2d", "replication_pad2d", "take", "masked_select"}
#: free: views and metadata (no bytes move)
_VIEWS = {"view", "_unsafe_view", "reshape", "_reshape_alias", "expand", "permute", "transpose",
          "t", "squeeze", "unsqueeze", "select", "slice", "narrow", "as_strided", "detach",
          "alias", "lift_fresh", "lift_fresh_copy", "split", "split_with_sizes", "unbind",
          "chunk", "unflatten", "flatten", "view_as", "diagonal", "movedim", "swapaxes",
          "unfold", "view_as_real", "view_as_complex", "empty", "empty_like", "empty_strided",
          "new_empty", "new_empty_strided", "resize", "_local_scalar_dense", "sym_size",
          "sym_stride", "sym_numel", "sym_storage_offset", "is_same_size", "dropout", "set",
          "contiguous", "_assert_tensor_metadata", "_assert_async"}
_REDUCE = {"mean", "sum", "amax", "amin", "max", "min", "argmax", "argmin", "prod", "any",
           "all", "nansum", "logsumexp",
           "histc"}  # a count per bin: every element read once into its bin (MoE routing)
_POOLS = {"max_pool1d", "max_pool1d_with_indices", "avg_pool1d", "max_pool2d_with_indices",
          "max_pool2d", "avg_pool2d", "max_pool3d_with_indices", "max_pool3d", "avg_pool3d"}
_SDPA = {"_scaled_dot_product_flash_attention_for_cpu", "_scaled_dot_product_flash_attention",
         "_scaled_dot_product_efficient_attention", "_scaled_dot_product_cudnn_attention",
         "_scaled_dot_product_attention_math", "_scaled_dot_product_fused_attention_overrideable",
         "scaled_dot_product_attention"}
_NORMS = {"native_layer_norm": "layernorm", "layer_norm": "layernorm",
          "_native_batch_norm_legit_no_training": "batchnorm",
          "_native_batch_norm_legit": "batchnorm", "native_batch_norm": "batchnorm",
          "batch_norm": "batchnorm", "_batch_norm_impl_index": "batchnorm",
          "native_group_norm": "groupnorm", "_fused_rms_norm": "rmsnorm", "rms_norm": "rmsnorm"}
_SHORT = {name: "attention" for name in _SDPA} | {
    "_softmax": "softmax", "_log_softmax": "log_softmax", "native_layer_norm": "layer_norm",
    "_native_batch_norm_legit_no_training": "batch_norm", "native_batch_norm": "batch_norm",
    "max_pool2d_with_indices": "max_pool2d",
    "max_pool3d_with_indices": "max_pool3d", "max_pool1d_with_indices": "max_pool1d",
    "_adaptive_avg_pool2d": "avgpool",
    "convolution": "conv", "addmm": "linear", "_to_copy": "cast"}


def _base(func: Any) -> str:
    """aten op name without the in-place underscore: ``add_`` -> ``add``."""
    n: str = func.overloadpacket.__name__
    return n[:-1] if n.endswith("_") and not n.endswith("__") else n


class _Tracer:
    """Turns aten calls into op records (one trace)."""

    def __init__(self, torch: Any, params: dict[int, tuple[str, int, bool]],
                 keep: list[Any]) -> None:
        self.torch = torch
        self.params = params  #: id(fake tensor) -> (name, numel, is nn.Parameter)
        self.keep = keep  #: keeps traced tensors alive so ids stay unique
        self.counted: set[str] = set()
        self.records: list[tuple[int, str, OpRecord]] = []  #: (call id, short op, record)
        self.unsupported: list[tuple[int, str, UnsupportedOp]] = []
        self.views: list[tuple[str, str]] = []
        self.stack: list[tuple[str, int]] = [("", 0)]
        self.calls = 0
        self.tainted: set[int] = set()  #: ids of tensors derived from the module's inputs

    # -- helpers
    def is_t(self, x: Any) -> bool:
        return isinstance(x, self.torch.Tensor)

    def param(self, x: Any) -> tuple[str, int, bool] | None:
        return self.params.get(id(x)) if self.is_t(x) else None

    def take_params(self, *xs: Any) -> int:
        """Parameters among ``xs`` not yet counted (nn.Parameters only, not buffers)."""
        n = 0
        for x in xs:
            p = self.param(x)
            if p is not None and p[2] and p[0] not in self.counted:
                self.counted.add(p[0])
                n += p[1]
        return n

    @staticmethod
    def numel(x: Any) -> int:
        return int(math.prod(x.shape))

    def fixed_bytes(self, out: Any) -> float | None:
        """Element size of a non-float output (indices, masks), else None (precision's)."""
        if self.is_t(out) and not (out.dtype.is_floating_point or out.dtype.is_complex):
            return float(out.element_size())
        return None

    def taint(self, args: tuple[Any, ...], kwargs: dict[str, Any], out: Any) -> bool:
        """Whether the op reads data derived from the inputs; if so its outputs are too."""
        def tensors(xs: Any) -> list[Any]:
            got = []
            for x in xs:
                if self.is_t(x):
                    got.append(x)
                elif isinstance(x, list | tuple):
                    got += [t for t in x if self.is_t(t)]
            return got

        if not any(id(t) in self.tainted for t in tensors((*args, *kwargs.values()))):
            return False
        for o in tensors(out if isinstance(out, list | tuple) else (out,)):
            self.keep.append(o)
            self.tainted.add(id(o))
        return True

    # -- dispatch
    def op(self, func: Any, args: tuple[Any, ...], kwargs: dict[str, Any], out: Any) -> None:
        ns = func.namespace
        if ns != "aten":
            return  # prim.device and friends: metadata
        name = _base(func)
        path, call = self.stack[-1]
        from_input = self.taint(args, kwargs, out)
        # parameters seen through views stay parameters (w.t() feeding addmm)
        if (func.is_view or name in _VIEWS or name in ("_to_copy", "clone", "contiguous")) \
                and args and self.param(args[0]) is not None:
            outs = out if isinstance(out, list | tuple) else (out,)
            for o in outs:
                if self.is_t(o):
                    self.keep.append(o)
                    self.params[id(o)] = self.params[id(args[0])]
        if name in _VIEWS or func.is_view:
            self.views.append((path, str(func)))
            return
        try:
            sig = [a.name for a in func._schema.arguments]
            bound = dict(zip(sig, args)) | kwargs
            rec = self.record(name, bound, args, out)
        except SpecError as e:  # a formula refused these shapes
            rec = f"the formula refused these shapes: {e}"
        except Exception as e:  # noqa: BLE001 - an op form the importer does not read: listed
            rec = f"the importer could not read this op ({type(e).__name__}: {e})"
        if isinstance(rec, list):
            for r in rec:  # a fused op's parts come as (suffix, record)
                short, r = r if isinstance(r, tuple) else (_SHORT.get(name, name), r)
                if not from_input:
                    r = replace(r, from_input=False)
                self.records.append((call, short, r))
            return
        ins = tuple(tuple(a.shape) for a in args if self.is_t(a))
        for a in args:
            if isinstance(a, list | tuple):
                ins += tuple(tuple(t.shape) for t in a if self.is_t(t))
        outs = out if isinstance(out, list | tuple) else (out,)
        o_shapes = tuple(tuple(o.shape) for o in outs if self.is_t(o))
        el = sum(math.prod(s) for s in ins + o_shapes)
        by = sum(self.numel(a) * a.element_size() for a in args if self.is_t(a)) + \
            sum(self.numel(o) * o.element_size() for o in outs if self.is_t(o))
        self.unsupported.append((call, name, UnsupportedOp(
            name=path or "<root>", op=str(func), input_shapes=ins, output_shapes=o_shapes,
            elements=int(el), bytes=float(by), reason=rec or "no formula for this op")))

    def rec(self, kind: str, source: str, params: int = 0, extra: float = 0.0,
            fixed: float | None = None, **shape: Any) -> OpRecord:
        return OpRecord(name=self.stack[-1][0], kind=kind, source=f"aten.{source}", shape=shape,
                        params=params, extra_act_read=extra, act_fixed_bytes=fixed)

    def record(self, name: str, a: dict[str, Any], args: tuple[Any, ...],
               out: Any) -> list[Any] | str | None:
        """The records for one aten op, or a reason it is unsupported (None: no formula)."""
        T = self.is_t
        o = out[0] if isinstance(out, list | tuple) else out
        if name == "convolution":
            return self.conv(a, o)
        if name in ("addmm", "mm", "bmm", "baddbmm"):
            return self.matmul(name, a, args, o)
        if name == "_grouped_mm":
            return self.grouped_mm(a, o)
        if name in _SDPA:
            return self.sdpa(name, a)
        if name in FASTPATH_OPS:
            return fastpath_records(self, name, a)
        if name in ("_softmax", "softmax", "_log_softmax", "log_softmax",
                    "_safe_softmax"):
            return [self.rec("softmax", name, elements=self.numel(a["self"]))]
        if name in _NORMS:
            x: Any = a.get("input", a.get("self"))
            variant = _NORMS[name]
            if variant in ("layernorm", "rmsnorm"):
                features = int(math.prod(a["normalized_shape"]))
            else:
                features = int(x.shape[1]) if x.dim() > 1 else int(x.shape[0])
            params = self.take_params(a.get("weight"), a.get("bias"))
            return [self.rec("norm", name, params=params, elements=self.numel(x),
                             features=features, variant=variant)]
        if name == "embedding":
            w, idx = a["weight"], a["indices"]
            return [self.rec("embedding", name, params=self.take_params(w),
                             tokens=max(self.numel(idx), 1), dim=int(w.shape[-1]),
                             index_bytes=float(idx.element_size()))]
        if name in _POOLS:
            return self.pool(name, a, o)
        if name in ("var", "std", "var_mean", "std_mean"):
            x = a["input"] if "input" in a else a["self"]
            rows, n = self.rows(x, a.get("dim"))
            if rows * n == 0:
                return []
            return [self.rec("variance", name, batch=1, rows=rows, row_len=n,
                             std=name.startswith("std"), with_mean=name.endswith("_mean"))]
        if name == "cumsum":
            x = a["self"]
            rows, n = self.rows(x, int(a["dim"]))
            return [] if rows * n == 0 else [self.rec("cumsum", name, batch=1, rows=rows,
                                                      row_len=n)]
        if name in ("sort", "topk"):
            x = a["self"]
            rows, n = self.rows(x, int(a.get("dim", -1)))
            if rows * n == 0:
                return []
            idx = float(out[1].element_size())
            if name == "sort":
                return [self.rec("sort", name, batch=1, rows=rows, row_len=n, index_bytes=idx)]
            return [self.rec("topk", name, batch=1, rows=rows, row_len=n, k=int(a["k"]),
                             sorted=bool(a.get("sorted", True)), index_bytes=idx)]
        if name in ("_adaptive_avg_pool2d", "adaptive_avg_pool2d"):
            x = a["self"]
            h, w = int(x.shape[-2]), int(x.shape[-1])
            oh, ow = int(o.shape[-2]), int(o.shape[-1])
            n = int(math.prod(x.shape[:-2]))
            if (oh, ow) == (1, 1):
                return [self.rec("global_pool", name, batch=n, channels=1, spatial=h * w)]
            if h % oh == 0 and w % ow == 0 and h // oh == w // ow:
                k = h // oh
                return [self.rec("pool2d", name, batch=n, channels=1, h=h, w=w, kernel=k,
                                 stride=k, mode="avg")]
            return "adaptive pooling with uneven windows has no formula"
        if name in _REDUCE:
            x = a.get("self")
            if not T(x) or not T(o):
                return None
            n_in, n_out = self.numel(x), max(self.numel(o), 1)
            if n_in == 0:
                return []
            return [self.rec("global_pool", name, fixed=self.fixed_bytes(x), batch=1,
                             channels=n_out, spatial=max(n_in // n_out, 1))]
        if name in _COPY:
            src = a.get("src", a.get("self"))
            n = self.numel(o) if name != "copy" or not T(src) else self.numel(src)
            if n == 0:
                return []
            return [self.rec("copy", name, fixed=self.fixed_bytes(o), elements=n)]
        if name in _FILL:
            if not T(o) or self.numel(o) == 0:
                return []
            return [self.rec("elementwise", name, fixed=self.fixed_bytes(o), elements=self.numel(o),
                             op="cast", n_inputs=0)]
        if name in _ELEMENTWISE or name in ("gelu", "hardtanh"):
            return self.elementwise(name, a, args, o)
        return None

    def conv(self, a: dict[str, Any], o: Any) -> list[OpRecord] | str:
        x, w, b = a["input"], a["weight"], a["bias"]
        nd = x.dim() - 2
        if not 1 <= nd <= 3:
            return f"{nd}-D convolution has no formula (conv covers 1-D to 3-D)"
        st, pd, dl = (tuple(int(v) for v in a[f]) for f in ("stride", "padding", "dilation"))
        st, pd, dl = ((v * nd if len(v) == 1 else v) for v in (st, pd, dl))
        plain = not a["transposed"] and (nd == 1 or nd == 2 and st[0] == st[1] and
                                         dl[0] == dl[1])
        if plain:  # conv2d: 1-D as H = 1; uneven padding folded into the input size
            if nd == 1:
                n, c, h, wd = int(x.shape[0]), int(x.shape[1]), 1, int(x.shape[2])
                k: tuple[int, int] = (1, int(w.shape[-1]))
                pad = (0, pd[0])
            else:
                n, c, h, wd = (int(v) for v in x.shape)
                k = (int(w.shape[-2]), int(w.shape[-1]))
                pad = (pd[0], pd[1])
            p0 = pad[0]
            if pad[0] != pad[1]:  # same output, same FLOPs
                h, wd, p0 = h + 2 * pad[0], wd + 2 * pad[1], 0
            return [self.rec("conv2d", "convolution", params=self.take_params(w, b), batch=n,
                             c_in=c, h=h, w=wd, c_out=int(w.shape[0]), kernel=k,
                             stride=int(st[-1]), padding=p0, dilation=int(dl[-1]),
                             groups=int(a["groups"]), bias=b is not None)]
        g = int(a["groups"])
        transposed = bool(a["transposed"])
        op = tuple(int(v) for v in a.get("output_padding") or (0,))
        op = op * nd if len(op) == 1 else op
        shape: dict[str, Any] = dict(
            batch=int(x.shape[0]), c_in=int(x.shape[1]), spatial=tuple(int(v) for v in
                                                                        x.shape[2:]),
            c_out=int(w.shape[1]) * g if transposed else int(w.shape[0]),
            kernel=tuple(int(v) for v in w.shape[2:]), stride=st, padding=pd, dilation=dl,
            groups=g, bias=b is not None, transposed=transposed,
            output_padding=op if transposed else 0)
        from ...ops.formulas import conv_geometry

        got = conv_geometry(**{f: shape[f] for f in ("spatial", "kernel", "stride", "padding",
                                                      "dilation", "transposed",
                                                      "output_padding")})[2]
        if got != tuple(int(v) for v in o.shape[2:]):
            return f"the conv formula's output {got} differs from the traced {tuple(o.shape)}"
        return [self.rec("conv", "convolution", params=self.take_params(w, b), **shape)]

    def matmul(self, name: str, a: dict[str, Any], args: tuple[Any, ...],
               o: Any) -> list[OpRecord]:
        x, w = (a["mat1"], a["mat2"]) if name == "addmm" else (a["self"], a["mat2"]) \
            if name in ("mm", "bmm") else (a["batch1"], a["batch2"])
        bias = a.get("self") if name in ("addmm", "baddbmm") else None
        out: list[OpRecord] = []
        if name in ("addmm", "mm") and self.param(w) is not None:
            has_bias = bias is not None and self.numel(bias) == int(w.shape[1])
            out.append(self.rec("linear", name, params=self.take_params(w, bias if has_bias
                                                                        else None),
                                batch=1, tokens=int(x.shape[0]), d_in=int(x.shape[1]),
                                d_out=int(w.shape[1]), bias=has_bias))
            if bias is not None and not has_bias:
                out.append(self.bias_add(name, bias, o))
            return out
        if name in ("addmm", "mm") and self.param(x) is not None:  # W @ X
            out.append(self.rec("linear", name, params=self.take_params(x),
                                batch=1, tokens=int(w.shape[1]), d_in=int(x.shape[1]),
                                d_out=int(x.shape[0]), bias=False))
        else:
            g = int(x.shape[0]) if x.dim() == 3 else 1
            src = "weight" if self.param(w) is not None else "act"
            shape: dict[str, Any] = dict(batch=1, groups=g, m=int(x.shape[-2]),
                                         k=int(x.shape[-1]), n=int(w.shape[-1]), b_source=src)
            if src == "weight":
                shape["b_bytes"] = Bytes("weight")
            out.append(self.rec("matmul", name, params=self.take_params(w), **shape))
        if bias is not None:
            out.append(self.bias_add(name, bias, o))
        return out

    def grouped_mm(self, a: dict[str, Any], o: Any) -> list[OpRecord] | str:
        """``aten._grouped_mm`` as mixture-of-experts layers run it: rows [S, K] sorted by
        expert, each group through its expert's [K, N] weight (``offs`` marks the groups). The
        S rows cost 2·S·K·N FLOPs whatever the split; every expert's weight is read once
        (E·K·N: all experts touched, as they are for a batch of many tokens)."""
        x, w = a["self"], a["mat2"]
        if x.dim() != 2 or w.dim() != 3 or self.param(w) is None:
            return ("grouped_mm is read for [rows, K] activations by an [experts, K, N] "
                    "weight only")
        E, K, N = (int(d) for d in w.shape)
        out = [self.rec("matmul", "_grouped_mm", params=self.take_params(w), batch=1,
                        groups=1, m=int(x.shape[0]), k=K, n=N, b_source="weight",
                        b_bytes=Bytes("weight", E))]
        if self.is_t(a.get("bias")):
            out.append(self.bias_add("_grouped_mm", a["bias"], o))
        return out

    def bias_add(self, name: str, bias: Any, o: Any) -> OpRecord:
        full = self.numel(bias) == self.numel(o)
        params = self.take_params(bias)
        return self.rec("elementwise", name, params=params, elements=self.numel(o), op="add",
                        n_inputs=2 if full else 1,
                        param_bytes=Bytes("weight", 0 if full else self.numel(bias)))

    def sdpa(self, name: str, a: dict[str, Any]) -> list[OpRecord] | str:
        q, k, v = a["query"], a["key"], a["value"]
        if q.dim() < 3:
            return "attention needs [..., heads, tokens, head_dim] operands"
        N = int(q.shape[-3]) if q.dim() >= 4 else 1
        K = int(k.shape[-3]) if k.dim() >= 4 else 1
        B = int(math.prod(q.shape[:-3])) if q.dim() >= 4 else int(q.shape[0])
        if q.dim() == 3:
            N = K = 1
        T, S, H, Hv = int(q.shape[-2]), int(k.shape[-2]), int(q.shape[-1]), int(v.shape[-1])
        causal = bool(a.get("is_causal", False))
        mask = a.get("attn_mask", a.get("attn_bias"))
        if causal and T != S:
            return (f"is_causal with {T} queries over {S} keys: PyTorch aligns the mask top-left,"
                    " the attention formula counts the queries as the last T positions")
        if T > S:
            return f"attention formula needs q_len <= kv_len; got {T} queries over {S} keys"
        extra = float(self.numel(mask)) if self.is_t(mask) else 0.0
        return [self.rec("attention", name, extra=extra, batch=B, n_heads=N, n_kv_heads=K,
                         head_dim=H, v_head_dim=Hv, q_len=T, kv_len=S, causal=causal)]

    def pool(self, name: str, a: dict[str, Any], o: Any) -> list[OpRecord] | str:
        x = a["self"]
        nd = 3 if "3d" in name else 2 if "2d" in name else 1
        ks = [int(v) for v in a["kernel_size"]]
        st = [int(v) for v in a.get("stride") or ks]
        pd = [int(v) for v in a.get("padding") or [0]]
        dl = [int(v) for v in a.get("dilation") or [1]]
        ks, st, pd, dl = ((v * nd if len(v) == 1 else v) for v in (ks, st, pd, dl))
        ceil = bool(a.get("ceil_mode", False))
        mode = "max" if "max" in name else "avg"
        X = tuple(int(v) for v in x.shape[-nd:])
        traced = tuple(int(v) for v in o.shape[-nd:])
        n = int(math.prod(x.shape[:-nd]))
        from ...ops import conv_out
        from ...ops.formulas import pool_out

        if nd == 2 and ks[0] == ks[1] and st[0] == st[1] and pd[0] == pd[1] and dl == [1, 1] \
                and tuple(conv_out(v, ks[0], st[0], pd[0], 1) for v in X) == traced:
            return [self.rec("pool2d", name, batch=n, channels=1, h=X[0], w=X[1],
                             kernel=ks[0], stride=st[0], padding=pd[0], mode=mode)]
        got = pool_out(spatial=X, kernel=ks, stride=st, padding=pd, dilation=dl,
                       ceil_mode=ceil)
        if got != traced:
            return f"the pool formula's output {got} differs from the traced {traced}"
        return [self.rec("pool", name, batch=n, channels=1, spatial=X, kernel=tuple(ks),
                         stride=tuple(st), padding=tuple(pd), dilation=tuple(dl),
                         ceil_mode=ceil, mode=mode)]

    def rows(self, x: Any, dim: Any) -> tuple[int, int]:
        """(rows, row length) of a reduction or scan of ``x`` over ``dim`` (an int, a list, or
        None/empty for all)."""
        shape = [int(v) for v in x.shape] or [1]
        if dim is None or isinstance(dim, list | tuple) and len(dim) == 0:
            dims = list(range(len(shape)))
        else:
            dims = [dim] if isinstance(dim, int) else list(dim)
        dims = sorted({d % len(shape) for d in dims})
        n = int(math.prod(shape[d] for d in dims))
        return int(math.prod(shape)) // max(n, 1), n

    def elementwise(self, name: str, a: dict[str, Any], args: tuple[Any, ...],
                    o: Any) -> list[OpRecord] | str:
        if name == "gelu":
            op = "gelu_tanh" if a.get("approximate", "none") == "tanh" else "gelu_erf"
        elif name == "hardtanh":
            lo, hi = a.get("min_val", -1.0), a.get("max_val", 1.0)
            op = "relu6" if (lo, hi) == (0.0, 6.0) else "clamp"
        else:
            op = _ELEMENTWISE[name]
        if not self.is_t(o):
            return []
        n_out = self.numel(o)
        if n_out == 0:
            return []
        full, param_el, extra, params = 0, 0, 0.0, 0
        for x in args:
            if not self.is_t(x) or x.dim() == 0:
                continue
            n = self.numel(x)
            if self.param(x) is not None:
                params += self.take_params(x)
                param_el += n
            elif n >= n_out:
                full += 1
            else:
                extra += n
        return [self.rec("elementwise", name, params=params, extra=extra,
                         fixed=self.fixed_bytes(o), elements=n_out, op=op, n_inputs=full,
                         param_bytes=Bytes("weight", param_el))]
