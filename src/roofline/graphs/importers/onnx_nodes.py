"""ONNX nodes to op records: the graph index (initializers, constants, consumers), the fusions
a runtime applies (linear + bias, attention chains and their layout ops), and one function per
node family (``_node`` and the convolution, pooling, attention helpers). ``onnx_import`` walks
the graph and calls them."""

from __future__ import annotations

import math
from typing import Any

from ...errors import ImportGraphError
from ._import_common import Bytes

_ELEMENTWISE = {
    "Add": "add", "Sub": "sub", "Mul": "mul", "Div": "div", "Relu": "relu", "Sigmoid": "sigmoid",
    "Tanh": "tanh", "Exp": "exp", "Sqrt": "sqrt", "Neg": "neg", "Abs": "abs", "Pow": "pow",
    "Where": "where", "HardSwish": "hardswish", "HardSigmoid": "hardsigmoid",
    "Reciprocal": "div", "Erf": "exp", "Log": "exp", "Sin": "exp", "Cos": "exp",
    "Softplus": "exp", "Equal": "mask", "Less": "mask", "Greater": "mask",
    "LessOrEqual": "mask", "GreaterOrEqual": "mask", "Not": "mask", "And": "mask",
    "Or": "mask", "Max": "mask", "Min": "mask", "Trilu": "mask", "Floor": "abs",
    "Ceil": "abs", "Round": "abs", "Sign": "abs", "Cast": "cast", "CastLike": "cast",
    "LeakyRelu": "clamp", "Clip": "clamp", "Swish": "silu", "Gelu": "gelu_erf",
}
_FREE = {"Reshape", "Flatten", "Squeeze", "Unsqueeze", "Identity", "Dropout", "SequenceAt",
         "Shape", "Size", "Constant"}
_COPY = {"Transpose", "Concat", "Slice", "Expand", "Tile", "Pad", "Gather", "GatherElements",
         "GatherND", "ScatterND", "ScatterElements", "DepthToSpace", "SpaceToDepth"}
_SPLIT = {"Split", "SplitToSequence"}
_LAYOUT = {"Transpose", "Reshape", "Flatten", "Squeeze", "Unsqueeze", "Identity", "Split",
           "SplitToSequence", "SequenceAt", "Cast"}
_REDUCE = {"ReduceMean", "ReduceSum", "ReduceMax", "ReduceMin", "ArgMax", "ArgMin",
           "ReduceProd", "ReduceL1", "ReduceSumSquare", "GlobalAveragePool", "GlobalMaxPool"}
_NORMS = {"BatchNormalization": "batchnorm", "LayerNormalization": "layernorm",
          "GroupNormalization": "groupnorm", "InstanceNormalization": "groupnorm",
          "RMSNormalization": "rmsnorm", "SimplifiedLayerNormalization": "rmsnorm"}
_SCORE_CHAIN = {"Add", "Sub", "Mul", "Div", "Where", "Cast"}
#: inputs an op needs before it can be priced (a malformed file may hold fewer)
_MIN_INPUTS = {"MatMul": 2, "Gemm": 2, "MatMulInteger": 2, "Conv": 2, "ConvTranspose": 2,
               "Attention": 3, "Add": 2, "Sub": 2, "Mul": 2, "Div": 2, "Pow": 2, "Where": 3,
               "Gather": 2, "Reshape": 2, "Expand": 2, "BatchNormalization": 5,
               "LayerNormalization": 2, "Einsum": 1, "Softmax": 1}
#: the largest static dimension read from a file: far beyond any tensor that fits anywhere
MAX_DIM = 2**40
_SMALL_INIT = 4096  #: initializers up to this many elements keep their data for inference


class _Graph:
    """The parsed graph: nodes, producers/consumers, initializers, constant/shape values."""

    def __init__(self, onnx: Any, mp: Any) -> None:
        g = mp.graph
        self.onnx, self.mp = onnx, mp
        self.nodes = list(g.node)
        self.inits = {t.name: t for t in g.initializer}
        self.producer: dict[str, int] = {}
        self.consumers: dict[str, list[int]] = {}
        for i, n in enumerate(self.nodes):
            for o in n.output:
                self.producer[o] = i
            for x in n.input:
                if x:
                    self.consumers.setdefault(x, []).append(i)
        self.graph_outputs = {o.name for o in g.output}
        for n in self.nodes:
            need = _MIN_INPUTS.get(n.op_type)
            if need is not None and len(n.input) < need:
                raise ImportGraphError(
                    f"node {n.name or '(unnamed)'!r}: {n.op_type} needs at least {need} inputs, "
                    f"this one has {len(n.input)} (not a valid ONNX graph)")
        # static: initializers, constants and values computed from them and from shapes
        self.static: set[str] = set(self.inits)
        self.worigin: dict[str, str] = {k: k for k in self.inits}  #: value -> initializer
        for n in self.nodes:
            ins = [x for x in n.input if x]
            if n.op_type == "CastLike":
                ins = ins[:1]  # the second input only gives the element type
            if n.op_type in ("Constant", "Shape", "Size") or (
                    ins and all(x in self.static for x in ins)):
                self.static.update(n.output)
                # a value computed from a weight (its transpose, the gathered position rows)
                # is that weight's: the op reading it reads weight bytes
                src = next((x for x in ins if x in self.worigin), None)
                if src is not None and n.op_type not in ("Shape", "Size"):
                    for o in n.output:
                        self.worigin[o] = self.worigin[src]

    def scope(self, i: int, short: str) -> str:
        """The module path PyTorch's dynamo exporter recorded for node i: the path alone inside
        a built-in ``torch.nn`` leaf module (``layer1.0.conv1``), else ``path.short``
        (``h.0.add``); the node name for files without that metadata."""
        import ast

        n = self.nodes[i]
        props = {p.key: p.value for p in n.metadata_props}
        try:
            scopes = ast.literal_eval(props.get("pkg.torch.onnx.name_scopes", "[]"))
            classes = ast.literal_eval(props.get("pkg.torch.onnx.class_hierarchy", "[]"))
        except (ValueError, SyntaxError, TypeError, RecursionError, MemoryError):
            scopes, classes = [], []  # unreadable metadata: it only names ops
        if not isinstance(scopes, list | tuple):
            scopes = []
        if not isinstance(classes, list | tuple):
            classes = []
        mods = [s for s in scopes[:-1] if s]
        if not mods:
            return short if scopes else (n.name or f"{n.op_type}_{i}")
        leaf = len(classes) >= 2 and str(classes[-2]).startswith("torch.nn.modules.")
        return str(mods[-1]) if leaf else f"{mods[-1]}.{short}"

    def data_consumers(self, value: str) -> list[int]:
        """Consumers that read the value's data (not Shape/Size, not CastLike's type input)."""
        out = []
        for c in self.consumers.get(value, []):
            n = self.nodes[c]
            if n.op_type in ("Shape", "Size") or n.op_type == "CastLike" and \
                    n.input[0] != value:
                continue
            out.append(c)
        return out

    def single_consumer(self, value: str) -> int | None:
        c = self.consumers.get(value, [])
        return c[0] if len(c) == 1 and value not in self.graph_outputs else None

    def has_ancestor(self, value: str, op: str, depth: int = 40) -> bool:
        seen, todo = set(), [value]
        while todo and depth > 0:
            v = todo.pop()
            i = self.producer.get(v)
            if i is None or i in seen:
                continue
            seen.add(i)
            depth -= 1
            if self.nodes[i].op_type == op:
                return True
            todo.extend(x for x in self.nodes[i].input if x)
        return False


def _attr(node: Any, name: str, default: Any = None) -> Any:
    import onnx

    for a in node.attribute:
        if a.name == name:
            return onnx.helper.get_attribute_value(a)
    return default


class _Fusions:
    """Fused attention (op or pattern), absorbed layout ops, MatMul + bias Add."""

    def __init__(self, G: _Graph) -> None:
        self.G = G
        self.absorbed: set[int] = set()
        #: node index -> (q, k-or-kᵀ, v, out, causal, mask values, k transposed, member nodes)
        self.attn: dict[int, dict[str, Any]] = {}
        self.bias_add: dict[int, int] = {}  #: MatMul index -> its bias Add index
        nodes = G.nodes
        for i, n in enumerate(nodes):
            if n.op_type == "Softmax":
                self._softmax_pattern(i)
            elif n.op_type == "Attention" and n.domain in ("", "ai.onnx"):
                mask = [n.input[3]] if len(n.input) > 3 and n.input[3] else []
                self.attn[i] = dict(q=n.input[0], k=n.input[1], v=n.input[2], out=n.output[0],
                                    causal=bool(_attr(n, "is_causal", 0)), masks=mask,
                                    k_t=False, members=[i], node=n)
        for i, a in self.attn.items():
            self._absorb_layout(i, a)
        for i, n in enumerate(nodes):
            if n.op_type == "MatMul" and i not in self.absorbed and n.input[1] in G.worigin:
                c = G.single_consumer(n.output[0])
                if c is not None and nodes[c].op_type == "Add":
                    other = [x for x in nodes[c].input if x != n.output[0]]
                    if len(other) == 1 and other[0] in G.worigin:
                        self.bias_add[i] = c
                        self.absorbed.add(c)

    def _softmax_pattern(self, s: int) -> None:
        G, nodes = self.G, self.G.nodes
        chain, masks = [s], []
        v = nodes[s].input[0]
        while True:
            p = G.producer.get(v)
            if p is None or G.single_consumer(v) is None:
                return
            n = nodes[p]
            if n.op_type == "MatMul":
                break
            if n.op_type not in _SCORE_CHAIN:
                return
            dyn = [x for x in n.input if x and x not in G.static]
            if n.op_type == "Where":  # Where(cond, scores, fill): scores is the dynamic one
                dyn = [x for x in n.input[1:] if x and x not in G.static][:1] or dyn
            if not dyn:
                return
            masks += [x for x in n.input if x and x != dyn[0]]
            chain.append(p)
            v = dyn[0]
        m1 = p
        c = G.single_consumer(nodes[s].output[0])
        if c is None or nodes[c].op_type != "MatMul" or nodes[c].input[0] != nodes[s].output[0]:
            return
        causal = any(G.has_ancestor(x, "Trilu") for x in masks)
        members = [m1, *chain, c]
        self.attn[c] = dict(q=nodes[m1].input[0], k=nodes[m1].input[1], v=nodes[c].input[1],
                            out=nodes[c].output[0], causal=causal,
                            masks=[x for x in masks if x not in G.static or not causal],
                            k_t=True, members=members, node=nodes[c])
        self.absorbed.update(x for x in members if x != c)

    def _absorb_layout(self, i: int, a: dict[str, Any]) -> None:
        G, nodes = self.G, self.G.nodes
        mine = set(a["members"])
        frontier = [a["q"], a["k"], a["v"]]
        changed = True
        while changed:
            changed = False
            for v in list(frontier):
                p = G.producer.get(v)
                if p is None or p in mine or p in self.absorbed:
                    continue
                n = nodes[p]
                scalar_scale = n.op_type in ("Mul", "Div") and any(
                    x in G.static for x in n.input[1:])
                if n.op_type not in _LAYOUT and not scalar_scale:
                    continue
                if v in G.static:
                    continue
                outs_ok = all(all(c in mine for c in G.data_consumers(o))
                              and o not in G.graph_outputs for o in n.output)
                if outs_ok:
                    mine.add(p)
                    frontier.append(n.input[0])
                    changed = True
        v = a["out"]
        while True:
            c = G.single_consumer(v)
            if c is None or nodes[c].op_type not in ("Transpose", "Reshape", "Identity",
                                                     "Flatten", "Squeeze", "Unsqueeze"):
                break
            mine.add(c)
            v = nodes[c].output[0]
        mine.discard(i)
        self.absorbed.update(mine)


class _Unresolved(Exception):
    pass


_Rec = tuple[str, dict[str, Any], int, float, "float | None"]


def _node(G: _Graph, F: _Fusions, i: int, node: Any, shape: Any, numel: Any, itemsize: Any,
          is_float: Any, take: Any) -> list[_Rec] | str | None:
    op = node.op_type
    ins = list(node.input)
    out = node.output[0] if node.output else ""
    if node.domain not in ("", "ai.onnx"):
        return f"custom-domain op ({node.domain}) has no formula"
    fixed = None if not out or is_float(out) else itemsize(out)
    if i in F.attn:
        return _attention(F.attn[i], shape, numel)
    if op in ("Conv", "ConvTranspose"):
        return _conv(node, ins, out, shape, take)
    if op == "Gemm":
        return _gemm(G, node, ins, shape, numel, take)
    if op == "MatMul":
        return _matmul(G, F, i, ins, out, shape, numel, take)
    if op in ("Softmax", "LogSoftmax"):
        return [("softmax", dict(elements=numel(ins[0])), 0, 0.0, None)]
    if op in _NORMS:
        x = shape(ins[0])
        variant = _NORMS[op]
        if variant in ("layernorm", "rmsnorm"):
            ax = int(_attr(node, "axis", -1))
            features = int(math.prod(x[ax:]))
        else:
            features = x[1] if len(x) > 1 else x[0]
        params = take(*ins[1:3])
        return [("norm", dict(elements=int(math.prod(x)), features=features, variant=variant),
                 params, 0.0, None)]
    if op == "Gather" and ins[0] in G.worigin and int(_attr(node, "axis", 0)) == 0:
        d = shape(ins[0])
        return [("embedding", dict(tokens=max(numel(ins[1]), 1), dim=int(math.prod(d[1:])),
                                   index_bytes=itemsize(ins[1])), take(ins[0]), 0.0, None)]
    if op in ("MaxPool", "AveragePool"):
        return _pool(node, shape(ins[0]), shape(out))
    if op == "CumSum":
        axis = _const_int(G, ins[1]) if len(ins) > 1 else None
        if axis is None:
            return "CumSum's axis is not a constant"
        rows, n = _rows(shape(ins[0]), axis)
        return [] if rows * n == 0 else [("cumsum", dict(rows=rows, row_len=n), 0, 0.0, None)]
    if op == "TopK":
        x = shape(ins[0])
        ax = int(_attr(node, "axis", -1)) % max(len(x), 1)
        rows, n = _rows(x, ax)
        if rows * n == 0:
            return []
        k = shape(out)[ax] if x else 1  # k from the inferred output: it may be computed
        return [("topk", dict(rows=rows, row_len=n, k=int(k),
                              sorted=bool(_attr(node, "sorted", 1)),
                              index_bytes=itemsize(node.output[1])), 0, 0.0, None)]
    if op in _REDUCE:
        n_in, n_out = numel(ins[0]), max(numel(out), 1)
        return [("global_pool", dict(channels=n_out, spatial=max(n_in // n_out, 1)), 0, 0.0,
                 None if is_float(ins[0]) else itemsize(ins[0]))]
    if op in _COPY or op in _SPLIT:
        n = numel(ins[0]) if op in _SPLIT else numel(out)
        if n == 0:
            return []
        return [("copy", dict(elements=n), 0, 0.0, fixed)]
    if op in ("ConstantOfShape", "Range", "EyeLike", "RandomNormalLike", "RandomUniformLike"):
        n = numel(out)
        return [] if n == 0 else [("elementwise", dict(elements=n, op="cast", n_inputs=0), 0,
                                   0.0, fixed)]
    if op in _ELEMENTWISE:
        name = _ELEMENTWISE[op]
        if op == "Gelu" and _attr(node, "approximate", b"none") in (b"tanh", "tanh"):
            name = "gelu_tanh"
        if op == "Clip":
            name = "clamp"
        n_out = numel(out)
        if n_out == 0:
            return []
        full, extra, param_el, params = 0, 0.0, 0, 0
        for x in ins:
            if not x:
                continue
            n = numel(x)
            if x in G.worigin:
                params += take(x)
                param_el += n
            elif x in G.static and n <= 1:
                continue  # a scalar constant
            elif n >= n_out:
                full += 1
            else:
                extra += n
        return [("elementwise", dict(elements=n_out, op=name, n_inputs=full,
                                     param_bytes=Bytes("weight", param_el)), params, extra,
                 fixed)]
    return None


def _gemm(G: _Graph, node: Any, ins: list[str], shape: Any, numel: Any,
          take: Any) -> list[_Rec]:
    """ONNX Gemm: a linear when B is a weight (its bias folded when it is a full row), else an
    activation matmul; a broadcast bias is its own op."""
    a, bm = shape(ins[0]), shape(ins[1])
    ta, tb = _attr(node, "transA", 0), _attr(node, "transB", 0)
    M, K = (a[1], a[0]) if ta else (a[0], a[1])
    N = bm[0] if tb else bm[1]
    c = ins[2] if len(ins) > 2 and ins[2] else ""
    if ins[1] in G.worigin:
        full_bias = bool(c) and (c in G.worigin and numel(c) == N)
        recs: list[_Rec] = [("linear", dict(tokens=M, d_in=K, d_out=N, bias=full_bias),
                             take(ins[1], c if full_bias else ""), 0.0, None)]
        if c and not full_bias:
            recs.append(_bias(c, M * N, numel, take, G))
        return recs
    recs = [("matmul", dict(m=M, k=K, n=N), 0, 0.0, None)]
    if c:
        recs.append(_bias(c, M * N, numel, take, G))
    return recs


def _matmul(G: _Graph, F: _Fusions, i: int, ins: list[str], out: str, shape: Any,
            numel: Any, take: Any) -> list[_Rec] | str:
    """ONNX MatMul: a linear over a 2-D weight (with the Add that follows it as its bias), else
    a batched matmul whose B is an activation or a broadcast weight."""
    a, bm = shape(ins[0]), shape(ins[1])
    if ins[1] in G.worigin and len(bm) == 2:
        M = int(math.prod(a[:-1]))
        bias = ""
        if i in F.bias_add:
            add = G.nodes[F.bias_add[i]]
            bias = next(x for x in add.input if x != out)
        full = bool(bias) and numel(bias) == bm[1]
        recs: list[_Rec] = [("linear", dict(tokens=M, d_in=bm[0], d_out=bm[1], bias=full),
                             take(ins[1], bias if full else ""), 0.0, None)]
        if bias and not full:
            recs.append(_bias(bias, M * bm[1], numel, take, G))
        return recs
    if len(a) < 2 or len(bm) < 2:
        return "matrix-vector MatMul has no formula"
    o = shape(out)
    groups = int(math.prod(o[:-2]))
    bg = int(math.prod(bm[:-2]))
    if groups % max(bg, 1):
        return "MatMul broadcast the matmul formula does not cover"
    src = "weight" if ins[1] in G.worigin else "act"
    shp: dict[str, Any] = dict(groups=groups, m=a[-2], k=a[-1], n=bm[-1], b_groups=bg,
                               b_source=src)
    if src == "weight":
        shp["b_bytes"] = Bytes("weight")
    return [("matmul", shp, take(ins[1]), 0.0, None)]


def _bias(c: str, n_out: int, numel: Any, take: Any, G: _Graph) -> _Rec:
    n = numel(c)
    w = c in G.worigin
    return ("elementwise", dict(elements=n_out, op="add", n_inputs=1 + (n >= n_out and not w),
                                param_bytes=Bytes("weight", n if w else 0)), take(c),
            0.0 if w or n >= n_out else float(n), None)


def _attention(a: dict[str, Any], shape: Any, numel: Any) -> list[_Rec] | str:
    q, k, v = shape(a["q"]), shape(a["k"]), shape(a["v"])
    node = a["node"]
    if len(q) == 3 and node.op_type == "Attention":  # [B, T, N·H] with head counts
        N = int(_attr(node, "q_num_heads", 1))
        K = int(_attr(node, "kv_num_heads", N))
        B, T, H = q[0], q[1], q[2] // N
        S, Hv = k[1], v[2] // K
    else:
        if len(q) < 3:
            return "attention needs [..., heads, tokens, head_dim] operands"
        N = q[-3] if len(q) >= 4 else 1
        B = int(math.prod(q[:-3])) if len(q) >= 4 else q[0]
        if len(q) == 3:
            N = 1
        kh = k[-3] if len(k) >= 4 else N
        K = kh if len(k) >= 4 else N
        T, H = q[-2], q[-1]
        S = k[-1] if a["k_t"] else k[-2]
        Hv = v[-1]
    causal = a["causal"]
    if causal and T != S:
        causal = False  # the formula's causal count assumes the queries are the last T
    if T > S:
        return f"attention formula needs q_len <= kv_len; got {T} queries over {S} keys"
    if N % K:
        return f"{K} key/value heads do not divide {N} query heads"
    extra = float(sum(numel(m) for m in a["masks"]))
    return [("attention", dict(batch=B, n_heads=N, n_kv_heads=K, head_dim=H, v_head_dim=Hv,
                               q_len=T, kv_len=S, causal=causal), 0, extra, None)]


def _auto_pads(node: Any, x: list[int], k: list[int], st: list[int], dl: list[int],
               o: list[int], pads: list[int]) -> list[int]:
    """Explicit pads (begin..., end...) of a windowed op: the ``pads`` attribute, or with
    ``auto_pad`` SAME_UPPER/SAME_LOWER/VALID the total implied by the inferred output size."""
    auto = _attr(node, "auto_pad", b"NOTSET")
    auto = auto.decode() if isinstance(auto, bytes) else str(auto)
    if auto in ("NOTSET", ""):
        return pads
    nd = len(k)
    out = [0] * 2 * nd
    for ax in range(nd):
        need = max((o[ax] - 1) * st[ax] + dl[ax] * (k[ax] - 1) + 1 - x[ax], 0)
        if auto == "VALID":
            need = 0
        lo = (need + 1) // 2 if auto == "SAME_LOWER" else need // 2
        out[ax], out[nd + ax] = lo, need - lo
    return out


def _conv(node: Any, ins: list[str], out: str, shape: Any, take: Any) -> list[_Rec] | str:
    """Conv and ConvTranspose: conv2d for the 1-D and 2-D convs it takes (one stride and
    dilation), else the general ``conv`` formula (3-D, per-axis strides, transposed)."""
    from ...ops.formulas import conv_geometry

    x, w, o = shape(ins[0]), shape(ins[1]), shape(out)
    b = ins[2] if len(ins) > 2 and ins[2] else ""
    nd = len(x) - 2
    if not 1 <= nd <= 3:
        return f"{nd}-D convolution has no formula (conv covers 1-D to 3-D)"
    k = [int(v) for v in w[2:]]
    st = [int(v) for v in _attr(node, "strides", [1] * nd)]
    dl = [int(v) for v in _attr(node, "dilations", [1] * nd)]
    pads = [int(v) for v in _attr(node, "pads", [0] * 2 * nd)]
    g = int(_attr(node, "group", 1))
    if node.op_type == "ConvTranspose":
        opad = [int(v) for v in _attr(node, "output_padding", [0] * nd)]
        if _attr(node, "output_shape") is not None or \
                _attr(node, "auto_pad", b"NOTSET") not in (b"NOTSET", "NOTSET"):
            pads = [0] * 2 * nd  # padding implied by the inferred output size
            for ax in range(nd):
                total = (x[2 + ax] - 1) * st[ax] + dl[ax] * (k[ax] - 1) + opad[ax] + 1 \
                    - o[2 + ax]
                if total < 0:  # a larger output than the window reaches: output padding
                    opad[ax], total = opad[ax] - total, 0
                pads[ax], pads[nd + ax] = total // 2, total - total // 2
        shp: dict[str, Any] = dict(batch=x[0], c_in=x[1], spatial=tuple(x[2:]), c_out=w[1] * g,
                                   kernel=tuple(k), stride=tuple(st), padding=tuple(pads[:nd]),
                                   padding_end=tuple(pads[nd:]), dilation=tuple(dl), groups=g,
                                   bias=bool(b), transposed=True, output_padding=tuple(opad))
    else:
        pads = _auto_pads(node, x[2:], k, st, dl, o[2:], pads)
        if nd == 1 or nd == 2 and st[0] == st[1] and dl[0] == dl[1]:
            if nd == 1:  # as a conv2d with H = 1
                x, k, st, dl = [x[0], x[1], 1, x[2]], [1, k[0]], [1, st[0]], [1, dl[0]]
                pads = [0, pads[0], 0, pads[1]]
            h, w_, pad = x[2], x[3], pads[0]
            if not (pads[0] == pads[1] == pads[2] == pads[3]):  # same output, same FLOPs
                h, w_, pad = h + pads[0] + pads[2], w_ + pads[1] + pads[3], 0
            return [("conv2d", dict(batch=x[0], c_in=x[1], h=h, w=w_, c_out=w[0],
                                    kernel=(k[0], k[1]), stride=st[-1], padding=pad,
                                    dilation=dl[-1], groups=g, bias=bool(b)),
                     take(ins[1], b), 0.0, None)]
        shp = dict(batch=x[0], c_in=x[1], spatial=tuple(x[2:]), c_out=w[0], kernel=tuple(k),
                   stride=tuple(st), padding=tuple(pads[:nd]), padding_end=tuple(pads[nd:]),
                   dilation=tuple(dl), groups=g, bias=bool(b))
    got = conv_geometry(**{f: shp[f] for f in ("spatial", "kernel", "stride", "padding",
                                                "padding_end", "dilation")},
                        transposed=bool(shp.get("transposed")),
                        output_padding=shp.get("output_padding", 0))[2]
    if list(got) != o[2:]:
        return f"the conv formula's output {list(got)} differs from the inferred {o}"
    return [("conv", shp, take(ins[1], b), 0.0, None)]


def _pool(node: Any, x: list[int], o: list[int]) -> list[_Rec] | str:
    """MaxPool and AveragePool: pool2d for the square 2-D windows it takes, else ``pool``
    (1-D to 3-D, per-axis kernel and stride, dilation, ceil_mode)."""
    from ...ops import conv_out
    from ...ops.formulas import pool_out

    nd = len(x) - 2
    if not 1 <= nd <= 3:
        return f"{nd}-D pooling has no formula (pool covers 1-D to 3-D)"
    k = [int(v) for v in _attr(node, "kernel_shape")]
    st = [int(v) for v in _attr(node, "strides", [1] * nd)]  # ONNX's default stride is 1
    dl = [int(v) for v in _attr(node, "dilations", [1] * nd)]
    pads = _auto_pads(node, x[2:], k, st, dl, o[2:],
                      [int(v) for v in _attr(node, "pads", [0] * 2 * nd)])
    ceil = bool(_attr(node, "ceil_mode", 0))
    mode = "max" if node.op_type == "MaxPool" else "avg"
    if nd == 2 and k[0] == k[1] and st[0] == st[1] and dl == [1, 1]:
        h, w_, pad = x[2], x[3], pads[0]
        if len(set(pads)) > 1:
            h, w_, pad = h + pads[0] + pads[2], w_ + pads[1] + pads[3], 0
        if (conv_out(h, k[0], st[0], pad, 1), conv_out(w_, k[0], st[0], pad, 1)) == \
                (o[2], o[3]):
            return [("pool2d", dict(batch=x[0], channels=x[1], h=h, w=w_, kernel=k[0],
                                    stride=st[0], padding=pad, mode=mode), 0, 0.0, None)]
    geo: dict[str, Any] = dict(spatial=tuple(x[2:]), kernel=tuple(k), stride=tuple(st),
                               padding=tuple(pads[:nd]), padding_end=tuple(pads[nd:]),
                               dilation=tuple(dl), ceil_mode=ceil)
    got = pool_out(**geo)
    if ceil and list(got) != o[2:]:
        # ONNX shape inference (onnx 1.23) keeps a last ceil-mode window that starts in the
        # right padding, which PyTorch drops
        geo["drop_last_window"] = False
        got = pool_out(**geo)
    if list(got) != o[2:]:
        return f"the pool formula's output {list(got)} differs from the inferred {o}"
    return [("pool", dict(batch=x[0], channels=x[1], mode=mode, **geo), 0, 0.0, None)]


def _rows(x: list[int], axis: int) -> tuple[int, int]:
    """(rows, row length) of a scan or selection of ``x`` along ``axis``."""
    if not x:
        return 1, 1
    n = int(x[axis % len(x)])
    return int(math.prod(x)) // max(n, 1), n


def _const_int(G: _Graph, name: str) -> int | None:
    """The value of a scalar (or one-element) constant: an initializer or a Constant node."""
    import onnx

    t = G.inits.get(name)
    if t is None:
        p = G.producer.get(name)
        if p is None or G.nodes[p].op_type != "Constant":
            return None
        t = _attr(G.nodes[p], "value")
        if t is None:
            v = _attr(G.nodes[p], "value_int", _attr(G.nodes[p], "value_ints"))
            if isinstance(v, list):
                return int(v[0]) if len(v) == 1 else None
            return None if v is None else int(v)
    if t.data_location == onnx.TensorProto.EXTERNAL:
        return None
    a = onnx.numpy_helper.to_array(t).reshape(-1)
    return int(a[0]) if a.size == 1 else None
