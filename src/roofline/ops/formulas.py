"""One formula per op kind. Every formula takes keyword shapes (``batch`` first, per-sample
sizes after, element sizes in bytes last) and returns an ``OpCost``.

Notation (scaling-book): B batch, T query tokens, S key/value tokens, D model width,
F output features, N query heads, K key/value heads, H head dim, C channels.
FLOPs count 2 per multiply-add everywhere; bytes count each tensor once per call (read from
and written to main memory: no cache reuse across ops, no re-reads inside an op).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from ..errors import SpecError
from .cost import OpCost
from .registry import register

__all__ = ["ELEMENTWISE_FLOPS", "ACTIVATIONS", "glu_op", "causal_pairs", "conv_geometry",
           "conv_out", "pool_out"]


def _pos(name: str, value: float, *, zero_ok: bool = False) -> None:
    ok = value >= 0 if zero_ok else value > 0
    if isinstance(value, bool) or not ok or (isinstance(value, float) and not math.isfinite(value)):
        raise SpecError(f"{name} must be {'>= 0' if zero_ok else '> 0'}, got {value!r}")


def _ints(**kw: int) -> None:
    for k, v in kw.items():
        if isinstance(v, bool) or not isinstance(v, int) or v < 1:
            raise SpecError(f"{k} must be a positive integer, got {v!r}")


# -- matrix products -----------------------------------------------------------------------------

@register("linear", "matmul")
def linear(*, batch: int, tokens: int, d_in: int, d_out: int, bias: bool = False,
           act_bytes: float, weight_bytes: float, out_bytes: float | None = None) -> OpCost:
    """A dense layer ``[B, T, D] ·_D [D, F] -> [B, T, F]`` (+ bias).

    FLOPs: 2·B·T·D·F (+ B·T·F bias adds). Bytes: X and the output once, W (and bias) once.
    Assumptions: W is read once per call whatever the batch (it fits the tiling); no epilogue
    fusion is counted here (an activation after it is its own op). GEMM: (B·T, F, D).
    ``out_bytes``: bytes per output element (default ``act_bytes``; an fp8 GEMM writes 16-bit:
    ``Precision.matmul_out_bytes``, which graph builders pass).

    References: Chowdhery et al. 2022, "PaLM", App. B (2 FLOPs per multiply-add, the MFU
    convention); Narayanan et al. 2021, arXiv:2104.04473, §5.1 (the same count for Megatron-LM).
    """
    _ints(batch=batch, tokens=tokens, d_in=d_in, d_out=d_out)
    B, T, D, F = batch, tokens, d_in, d_out
    return OpCost(
        flops=2 * B * T * D * F + (B * T * F if bias else 0),
        weight_bytes_read=(D * F + (F if bias else 0)) * weight_bytes,
        act_bytes_read=B * T * D * act_bytes,
        act_bytes_written=B * T * F * (act_bytes if out_bytes is None else out_bytes),
        gemm=(B * T, F, D),
    )


@register("matmul", "matmul")
def matmul(*, batch: int, groups: int = 1, m: int, k: int, n: int, b_groups: int | None = None,
           b_source: str = "act", act_bytes: float, b_bytes: float | None = None,
           out_bytes: float | None = None) -> OpCost:
    """A batched product of two activations ``[B, G, M, K] ·_K [B, G', K, N] -> [B, G, M, N]``.

    ``b_groups`` (G') < G means the second operand is shared by G/G' groups (GQA), read once.
    ``b_source`` says what the second operand is: "act" (an activation), "kv" (the KV cache)
    or "weight" (a constant read once per call, not per sample). ``out_bytes``: bytes per
    output element (default ``act_bytes``; see ``linear``).
    FLOPs: 2·B·G·M·K·N. GEMM: (B·G·M, N, K).
    """
    _ints(batch=batch, groups=groups, m=m, k=k, n=n)
    B, G, M, K, N = batch, groups, m, k, n
    Gb = G if b_groups is None else b_groups
    bb = act_bytes if b_bytes is None else b_bytes
    b_elems = Gb * K * N
    cost: dict[str, Any] = dict(
        flops=2 * B * G * M * K * N, act_bytes_read=B * G * M * K * act_bytes,
        act_bytes_written=B * G * M * N * (act_bytes if out_bytes is None else out_bytes),
        gemm=(B * G * M, N, K))
    if b_source == "act":
        cost["act_bytes_read"] = B * G * M * K * act_bytes + B * b_elems * bb
    elif b_source == "kv":
        cost["kv_bytes_read"] = B * b_elems * bb
    elif b_source == "weight":
        cost["weight_bytes_read"] = b_elems * bb
    else:
        raise SpecError(f"b_source={b_source!r}; allowed: act, kv, weight")
    return OpCost(**cost)


def conv_out(size: int, kernel: int, stride: int, padding: int, dilation: int) -> int:
    """Output length of a convolution/pool along one axis (PyTorch's floor formula)."""
    out = (size + 2 * padding - dilation * (kernel - 1) - 1) // stride + 1
    if out < 1:
        raise SpecError(f"kernel {kernel} (dilation {dilation}) does not fit input {size} with "
                        f"padding {padding}")
    return out


def causal_pairs(q_len: int, kv_len: int) -> int:
    """(query, key) pairs a causal mask keeps when the T queries are the last T of S positions.

    Query i (0-based) sits at position S-T+i and sees S-T+i+1 keys:
    sum = T·(S-T) + T·(T+1)/2. Prefill (S=T) gives T(T+1)/2; a decode step (T=1) gives S.
    """
    T, S = q_len, kv_len
    return T * (S - T) + T * (T + 1) // 2


@register("attention", "attention")
def attention(*, batch: int, n_heads: int, n_kv_heads: int, head_dim: int, q_len: int,
              kv_len: int, causal: bool = True, kv_from_cache: bool = False,
              v_head_dim: int | None = None, act_bytes: float, kv_bytes: float | None = None,
              window: int | None = None) -> OpCost:
    """Fused (FlashAttention-style) attention ``softmax(Q Kᵀ/√H) V`` for T queries over S keys.

    Q ``[B, T, N, H]``, K/V ``[B, S, K, H]`` -> O ``[B, T, N, H]``. Scores never reach memory.
    FLOPs: 4·B·N·P·H with P the (query, key) pairs computed: T·S, or causally
    ``causal_pairs(T, S)`` (masked blocks skipped, as FlashAttention does), or with a sliding
    window at most T·window. The ~5 FLOPs/score of the softmax are not counted (as in the
    FlashAttention papers); matmul FLOPs dominate by a factor ~H/5.
    Bytes: Q and O once; K and V once per KV head (GQA/MQA share them), from the KV cache
    when ``kv_from_cache`` (decode, or prefill on a cached prefix). GEMM: the score product
    per head, (B·N·T, S, H).

    References: Dao et al. 2022, "FlashAttention", §3.1 and App. B (scores kept on chip; the
    4·N·T·S·H FLOP count without the softmax); Dao 2023, "FlashAttention-2", §3.1 (causal
    blocks skipped); Ainslie et al. 2023, "GQA" (K/V shared by N/K query heads).
    """
    _ints(batch=batch, n_heads=n_heads, n_kv_heads=n_kv_heads, head_dim=head_dim, q_len=q_len,
          kv_len=kv_len)
    if n_heads % n_kv_heads:
        raise SpecError(f"n_kv_heads={n_kv_heads} must divide n_heads={n_heads}")
    if causal and q_len > kv_len:  # cross-attention (not causal) may have more queries
        raise SpecError(f"q_len={q_len} cannot exceed kv_len={kv_len} in causal attention")
    B, N, K, H, T, S = batch, n_heads, n_kv_heads, head_dim, q_len, kv_len
    Hv = v_head_dim or H
    pairs = causal_pairs(T, S) if causal else T * S
    s_read = S
    if window is not None and window < S:
        pairs = min(pairs, T * window)
        s_read = min(S, window + T - 1)
    kvb = act_bytes if kv_bytes is None else kv_bytes
    kv_read = B * s_read * K * (H + Hv) * kvb
    return OpCost(
        flops=2 * B * N * pairs * H + 2 * B * N * pairs * Hv,
        act_bytes_read=B * T * N * H * act_bytes + (0 if kv_from_cache else kv_read),
        kv_bytes_read=kv_read if kv_from_cache else 0,
        act_bytes_written=B * T * N * Hv * act_bytes,
        gemm=(B * N * T, S, H),  # the score GEMM, one per head, for the efficiency model
    )


@register("kv_cache_write", "movement")
def kv_cache_write(*, batch: int, tokens: int, n_kv_heads: int, head_dim: int,
                   act_bytes: float, kv_bytes: float) -> OpCost:
    """Append the new tokens' K and V ``[B, T, K, H]`` ×2 to the KV cache (a copy, 0 FLOPs)."""
    _ints(batch=batch, tokens=tokens, n_kv_heads=n_kv_heads, head_dim=head_dim)
    elems = batch * tokens * 2 * n_kv_heads * head_dim
    return OpCost(act_bytes_read=elems * act_bytes, kv_bytes_written=elems * kv_bytes)


# -- elementwise, norms, softmax -------------------------------------------------------------------

#: FLOPs per output element. Transcendentals (exp, tanh, erf) count 1 each; comparisons count 1.
ELEMENTWISE_FLOPS: dict[str, int] = {
    "relu": 1,        # max(x, 0)
    "relu6": 2,       # min(max(x, 0), 6)
    # Hendrycks & Gimpel 2016, "Gaussian Error Linear Units", §2 (the tanh approximation)
    "gelu_tanh": 9,   # 0.5·x·(1 + tanh(√(2/π)·(x + 0.044715·x³))): 8 arithmetic + tanh
    "gelu_erf": 5,    # 0.5·x·(1 + erf(x/√2)): 4 arithmetic + erf
    "silu": 4,        # x / (1 + exp(-x)): neg, exp, add, div
    "sigmoid": 4,     # 1 / (1 + exp(-x)): neg, exp, add, div
    "tanh": 1,
    "hardswish": 5,   # x·relu6(x+3)/6
    "hardsigmoid": 4,  # relu6(x+3)/6
    "quick_gelu": 5,  # x·sigmoid(1.702·x)
    "swiglu": 5,      # silu(a)·b: silu 4 + mul 1, two inputs
    "geglu": 10,      # gelu_tanh(a)·b
    "add": 1, "sub": 1, "mul": 1, "div": 1,
    "scale": 1,       # x·c
    "rope": 3,        # x·cos + rotate(x)·sin per element: 2 mul + 1 add
    "softplus": 3,    # log(1 + exp(x)): exp, add, log (Mamba's Δ)
    "mask": 1,
    "dropout": 2,     # compare random, multiply
    "exp": 1, "sqrt": 1, "neg": 1, "abs": 1, "pow": 1, "clamp": 2, "where": 1, "cast": 0,
    "erf": 1, "log": 1, "sin": 1, "cos": 1, "rsqrt": 1, "reciprocal": 1,
    "leaky_relu": 2,  # compare, multiply
    "compare": 1,     # eq, lt, gt, ... (one comparison per element)
    "max": 1, "min": 1,
    # the rest of transformers' ACT2FN names (src/transformers/activations.py, 5.24.0) that the
    # HF importer maps (graphs/importers/hf_config.py, _ACT)
    "relu2": 2,       # max(x, 0)²: max, square (Primer's squared ReLU; Nemotron's MLP)
    "mish": 5,        # x·tanh(softplus(x)): softplus 3 (exp, add, log) + tanh + mul
    "gelu_erf_clip": 7,  # clamp(gelu_erf(x), lo, hi): 5 + clamp 2 (transformers' gelu_10)
    "laplace": 5,     # 0.5·(1 + erf((x − μ)/(σ·√2))): sub, mul by 1/(σ√2), erf, add, mul
    "sqrt_softplus": 4,  # √softplus(x): softplus 3 + sqrt
    "identity": 0,    # x (transformers' "linear"); a plain MLP adds no op for it (graphs)
}

#: the activation functions (the importer's, the zoo's and the act= size knob's choices); a
#: gated MLP may apply any of them to its gate
ACTIVATIONS = ("silu", "gelu_tanh", "gelu_erf", "gelu_erf_clip", "quick_gelu", "relu", "relu2",
               "relu6", "leaky_relu", "sigmoid", "hardsigmoid", "tanh", "hardswish", "mish",
               "laplace", "softplus", "sqrt_softplus", "identity")
#: SwiGLU and GeGLU keep their names; the others are "<act>_glu"
_GLU_NAMES = {"silu": "swiglu", "gelu_tanh": "geglu"}
for _a in ACTIVATIONS:  # act(gate)·up: the activation on the gate, then 1 multiply; two inputs
    ELEMENTWISE_FLOPS.setdefault(_GLU_NAMES.get(_a, f"{_a}_glu"), ELEMENTWISE_FLOPS[_a] + 1)


def glu_op(act: str) -> str:
    """The elementwise op of a gated MLP's product ``act(gate)·up`` (``act``'s FLOPs + 1):
    swiglu for silu, geglu for gelu_tanh, ``<act>_glu`` otherwise. An activation without one
    is a SpecError (it used to be priced as GeGLU whatever it was)."""
    if act not in ACTIVATIONS:
        raise SpecError(f"gated MLP activation {act!r} is not modelled; allowed: "
                        f"{', '.join(ACTIVATIONS)}")
    return _GLU_NAMES.get(act, f"{act}_glu")


@register("elementwise", "elementwise")
def elementwise(*, batch: int, elements: int, op: str = "add", n_inputs: int | None = None,
                act_bytes: float, param_bytes: float = 0.0) -> OpCost:
    """An elementwise op on ``elements`` per sample: ``ELEMENTWISE_FLOPS[op]`` FLOPs each.

    Reads ``n_inputs`` full-size inputs (default 2 for binary ops and swiglu/geglu, else 1)
    and writes one output. ``param_bytes`` adds a batch-independent read (e.g. a bias vector).
    """
    if op not in ELEMENTWISE_FLOPS:
        raise SpecError(f"unknown elementwise op {op!r}; known: {', '.join(ELEMENTWISE_FLOPS)}")
    _ints(batch=batch, elements=elements)
    if n_inputs is None:
        n_inputs = 2 if op in ("add", "sub", "mul", "div", "swiglu", "geglu", "where") \
            or op.endswith("_glu") else 1
    E = batch * elements
    return OpCost(flops=ELEMENTWISE_FLOPS[op] * E, act_bytes_read=n_inputs * E * act_bytes,
                  act_bytes_written=E * act_bytes, weight_bytes_read=param_bytes)


#: FLOPs per element of each normalisation (see ``norm``)
NORM_FLOPS = {
    # layernorm: mean (add); variance (sub, square, add); normalise (sub, mul by rsqrt);
    # affine (mul, add)
    "layernorm": 8,
    "rmsnorm": 4,     # square, add; mul rsqrt; mul weight
    "batchnorm": 2,   # inference: running stats folded into one scale and shift: mul, add
    "groupnorm": 8,   # as layernorm per group
}


@register("norm", "norm")
def norm(*, batch: int, elements: int, features: int, variant: str = "layernorm",
         affine: bool = True, act_bytes: float, weight_bytes: float) -> OpCost:
    """Normalisation over ``elements`` per sample with ``features`` learned channels.

    FLOPs per element: ``NORM_FLOPS[variant]``. Bytes: x in, y out once (one pass with the
    statistics in registers), plus the per-channel parameters: 2 (γ, β) for layer/group norm,
    1 for RMSNorm, 4 (γ, β, running mean and variance) for inference batch norm;
    ``affine=False`` drops γ and β (batch norm still reads its running statistics).

    References: Ba et al. 2016, "Layer Normalization", eq. 4; Zhang & Sennrich 2019, "Root
    Mean Square Layer Normalization", eq. 4; Ioffe & Szegedy 2015, "Batch Normalization",
    Alg. 2 (inference: one affine transform per element).
    """
    if variant not in NORM_FLOPS:
        raise SpecError(f"unknown norm variant {variant!r}; known: {', '.join(NORM_FLOPS)}")
    _ints(batch=batch, elements=elements, features=features)
    n_par = {"layernorm": 2, "rmsnorm": 1, "batchnorm": 4, "groupnorm": 2}[variant]
    if not affine:
        n_par = 2 if variant == "batchnorm" else 0
    E = batch * elements
    return OpCost(flops=NORM_FLOPS[variant] * E, act_bytes_read=E * act_bytes,
                  act_bytes_written=E * act_bytes,
                  weight_bytes_read=n_par * features * weight_bytes)


@register("softmax", "softmax")
def softmax(*, batch: int, elements: int, act_bytes: float) -> OpCost:
    """Softmax over rows, ``elements`` per sample: 5 FLOPs each (max, sub, exp, sum, div)."""
    _ints(batch=batch, elements=elements)
    E = batch * elements
    return OpCost(flops=5 * E, act_bytes_read=E * act_bytes, act_bytes_written=E * act_bytes)


# -- pooling, embedding, data movement -------------------------------------------------------------

@register("global_pool", "pool")
def global_pool(*, batch: int, channels: int, spatial: int, act_bytes: float) -> OpCost:
    """Global average pool ``[B, C, HW] -> [B, C]``: one add per input element."""
    _ints(batch=batch, channels=channels, spatial=spatial)
    return OpCost(flops=batch * channels * spatial,
                  act_bytes_read=batch * channels * spatial * act_bytes,
                  act_bytes_written=batch * channels * act_bytes)


@register("embedding", "embedding")
def embedding(*, batch: int, tokens: int, dim: int, weight_bytes: float, act_bytes: float,
              index_bytes: float = 8.0) -> OpCost:
    """Embedding lookup: gather B·T rows of a ``[V, D]`` table. 0 FLOPs.

    Reads only the gathered rows (B·T·D weights) and the int64 indices; writes ``[B, T, D]``.
    """
    _ints(batch=batch, tokens=tokens, dim=dim)
    n = batch * tokens
    return OpCost(weight_bytes_read=n * dim * weight_bytes, act_bytes_read=n * index_bytes,
                  act_bytes_written=n * dim * act_bytes)


@register("copy", "movement")
def copy(*, batch: int, elements: int, act_bytes: float, n_inputs: int = 1) -> OpCost:
    """Data movement with no arithmetic (concat, transpose, contiguous copy, pad): every input
    element read once, every output element written once; 0 FLOPs."""
    _ints(batch=batch, elements=elements, n_inputs=n_inputs)
    E = batch * elements
    return OpCost(act_bytes_read=E * act_bytes, act_bytes_written=E * act_bytes)


@register("view", "movement")
def view(*, batch: int = 1, elements: int = 0, act_bytes: float = 0.0) -> OpCost:
    """A view (reshape, flatten, split, slice without copy): metadata only, 0 bytes, 0 FLOPs."""
    return OpCost()


# -- general convolution and pooling (any spatial rank, per-axis geometry, transposed) -----------

def _per_axis(name: str, value: int | Sequence[int], n: int, *, zero_ok: bool = False) -> \
        tuple[int, ...]:
    """``value`` as one int per spatial axis: an int is repeated, a sequence must have n."""
    vals = (value,) * n if isinstance(value, int) else tuple(value)
    if len(vals) != n:
        raise SpecError(f"{name} must be an int or {n} ints (one per spatial axis), got {value!r}")
    lo = 0 if zero_ok else 1
    for v in vals:
        if isinstance(v, bool) or not isinstance(v, int) or v < lo:
            raise SpecError(f"{name} must hold integers >= {lo}, got {value!r}")
    return vals


def _window_out(size: int, kernel: int, stride: int, pad_begin: int, pad_end: int,
                dilation: int, ceil_mode: bool = False, drop_last: bool = True) -> int:
    """Output length of a strided window along one axis (PyTorch's rule, asymmetric padding).

    floor((X + p0 + p1 − d·(k−1) − 1) / s) + 1, or the ceiling with ``ceil_mode``; in ceil
    mode a last window that would start past the input and the leading padding is dropped
    (unless ``drop_last`` is False).
    """
    span = size + pad_begin + pad_end - dilation * (kernel - 1) - 1
    if span < 0:
        raise SpecError(f"kernel {kernel} (dilation {dilation}) does not fit input {size} with "
                        f"padding {pad_begin}+{pad_end}")
    out = (-(-span // stride) if ceil_mode else span // stride) + 1
    if ceil_mode and drop_last and (out - 1) * stride >= size + pad_begin:
        out -= 1
    return out


def conv_geometry(*, spatial: Sequence[int], kernel: int | Sequence[int],
                  stride: int | Sequence[int] = 1, padding: int | Sequence[int] = 0,
                  padding_end: int | Sequence[int] | None = None,
                  dilation: int | Sequence[int] = 1, transposed: bool = False,
                  output_padding: int | Sequence[int] = 0) -> tuple[tuple[int, ...], ...]:
    """(X, k, X') of a convolution: the input and kernel sizes and the output size per axis.

    Direct: X' = floor((X + p0 + p1 − d·(k−1) − 1)/s) + 1. Transposed (the gradient of the
    direct conv with respect to its input): X' = (X − 1)·s − p0 − p1 + d·(k−1) + op + 1.
    """
    X = tuple(int(v) for v in spatial) if not isinstance(spatial, int) else (spatial,)
    n = len(X)
    if not 1 <= n <= 3:
        raise SpecError(f"spatial must hold 1 to 3 sizes, got {spatial!r}")
    _per_axis("spatial", X, n)
    k = _per_axis("kernel", kernel, n)
    s = _per_axis("stride", stride, n)
    d = _per_axis("dilation", dilation, n)
    p0 = _per_axis("padding", padding, n, zero_ok=True)
    p1 = p0 if padding_end is None else _per_axis("padding_end", padding_end, n, zero_ok=True)
    if not transposed:
        if output_padding not in (0, (0,) * n, [0] * n):
            raise SpecError("output_padding applies to transposed convolutions only, got "
                            f"{output_padding!r}")
        return X, k, tuple(_window_out(*a) for a in zip(X, k, s, p0, p1, d))
    op = _per_axis("output_padding", output_padding, n, zero_ok=True)
    for ax in range(n):
        if op[ax] >= max(s[ax], d[ax]):
            raise SpecError(f"output_padding {op} must be smaller than the stride {s} or the "
                            f"dilation {d} on each axis")
    out = tuple((X[a] - 1) * s[a] - p0[a] - p1[a] + d[a] * (k[a] - 1) + op[a] + 1
                for a in range(n))
    if min(out) < 1:
        raise SpecError(f"transposed convolution of {X} with kernel {k}, stride {s}, padding "
                        f"{p0}+{p1} has an empty output {out}")
    return X, k, out


@register("conv", "conv")
def conv(*, batch: int, c_in: int, spatial: Sequence[int], c_out: int,
         kernel: int | Sequence[int], stride: int | Sequence[int] = 1,
         padding: int | Sequence[int] = 0, padding_end: int | Sequence[int] | None = None,
         dilation: int | Sequence[int] = 1, groups: int = 1, bias: bool = False,
         transposed: bool = False, output_padding: int | Sequence[int] = 0,
         act_bytes: float, weight_bytes: float) -> OpCost:
    """N-d convolution (1 to 3 spatial axes), direct or transposed, with per-axis geometry.

    Direct ``[B, C, *X] * [C', C/g, *k] -> [B, C', *X']``:
    FLOPs 2·B·C'·ΠX'·(C/g)·Πk, the multiply-adds of every output with its window (taps that
    fall on padding are counted, as implicit GEMM computes them).
    Transposed ``[B, C, *X] *ᵀ [C, C'/g, *k] -> [B, C', *X']``: every input element is
    multiplied by its group's C'/g·Πk weights and scattered into the output, so
    FLOPs 2·B·C·ΠX·(C'/g)·Πk (as ``torch.utils.flop_counter`` counts it; contributions that land
    in the cropped padding are computed, so counted).
    Bias: + B·C'·ΠX' adds. Padding: ``padding`` before and ``padding_end`` after each axis
    (default: the same). Bytes: input and output once, weights (+ bias) once. Assumptions: no
    im2col/col2im buffer traffic (implicit GEMM), halos not re-read.
    GEMM (implicit, M·N·K = the multiply-adds): direct (B·ΠX'·g, C'/g, (C/g)·Πk); transposed,
    the GEMM before col2im, (B·ΠX·g, (C'/g)·Πk, C/g).

    References: PyTorch ``torch.nn.Conv2d`` / ``ConvTranspose2d`` documentation (output size);
    PyTorch ``torch/utils/flop_counter.py`` ``conv_flop_count`` (direct and transposed FLOPs);
    Chetlur et al. 2014, "cuDNN", §3 (convolution as an implicit GEMM of these dimensions).
    """
    _ints(batch=batch, c_in=c_in, c_out=c_out, groups=groups)
    if c_in % groups or c_out % groups:
        raise SpecError(f"groups={groups} must divide c_in={c_in} and c_out={c_out}")
    X, k, Xo = conv_geometry(spatial=spatial, kernel=kernel, stride=stride, padding=padding,
                             padding_end=padding_end, dilation=dilation, transposed=transposed,
                             output_padding=output_padding)
    B, C, Co, g = batch, c_in, c_out, groups
    taps, n_in, n_out = math.prod(k), math.prod(X), math.prod(Xo)
    macs = B * C * n_in * (Co // g) * taps if transposed else B * Co * n_out * (C // g) * taps
    # implicit GEMM: direct (B·ΠX'·g, C'/g, (C/g)·Πk); transposed, the GEMM before col2im,
    # (B·ΠX·g, (C'/g)·Πk, C/g); M·N·K = the multiply-adds either way
    gemm = ((B * n_in * g, Co // g * taps, C // g) if transposed
            else (B * n_out * g, Co // g, C // g * taps))
    return OpCost(
        flops=2 * macs + (B * Co * n_out if bias else 0),
        weight_bytes_read=(C * (Co // g) * taps + (Co if bias else 0)) * weight_bytes,
        act_bytes_read=B * C * n_in * act_bytes,
        act_bytes_written=B * Co * n_out * act_bytes,
        gemm=gemm,
    )


@register("pool", "pool")
def pool(*, batch: int, channels: int, spatial: Sequence[int], kernel: int | Sequence[int],
         stride: int | Sequence[int] | None = None, padding: int | Sequence[int] = 0,
         padding_end: int | Sequence[int] | None = None, dilation: int | Sequence[int] = 1,
         ceil_mode: bool = False, drop_last_window: bool = True, mode: str = "max",
         act_bytes: float) -> OpCost:
    """Max/average pooling over 1 to 3 spatial axes ``[B, C, *X] -> [B, C, *X']`` with
    per-axis kernel, stride (default: the kernel), padding and dilation.

    X' per axis as PyTorch computes it: floor((X + p0 + p1 − d·(k−1) − 1)/s) + 1, or the
    ceiling with ``ceil_mode`` (a last window that would start beyond the input and its leading
    padding is dropped; ``drop_last_window=False`` keeps it, as ONNX shape inference in onnx
    1.23 does). FLOPs: Πk per output (comparisons or adds; the average's one divide is
    folded in). Assumption:
    a window clipped by the edge (ceil mode, padding) is counted whole, an upper bound.
    Bytes: input and output once (max pooling's argmax indices are not counted).

    References: PyTorch ``torch.nn.MaxPool2d`` documentation (output size, ``ceil_mode``); ONNX
    operator MaxPool / AveragePool (opset 22) shape inference.
    """
    _ints(batch=batch, channels=channels)
    if mode not in ("max", "avg"):
        raise SpecError(f"pool mode {mode!r}; allowed: max, avg")
    Xo = pool_out(spatial=spatial, kernel=kernel, stride=stride, padding=padding,
                  padding_end=padding_end, dilation=dilation, ceil_mode=ceil_mode,
                  drop_last_window=drop_last_window)
    X = tuple(spatial)
    out = batch * channels * math.prod(Xo)
    return OpCost(flops=math.prod(_per_axis("kernel", kernel, len(X))) * out,
                  act_bytes_read=batch * channels * math.prod(X) * act_bytes,
                  act_bytes_written=out * act_bytes)


def pool_out(*, spatial: Sequence[int], kernel: int | Sequence[int],
             stride: int | Sequence[int] | None = None, padding: int | Sequence[int] = 0,
             padding_end: int | Sequence[int] | None = None, dilation: int | Sequence[int] = 1,
             ceil_mode: bool = False, drop_last_window: bool = True) -> tuple[int, ...]:
    """The output size per axis that ``pool`` computes (importers check it against the
    framework's)."""
    X = tuple(spatial)
    n = len(X)
    if not 1 <= n <= 3:
        raise SpecError(f"spatial must hold 1 to 3 sizes, got {spatial!r}")
    _per_axis("spatial", X, n)
    k = _per_axis("kernel", kernel, n)
    s = k if stride is None else _per_axis("stride", stride, n)
    d = _per_axis("dilation", dilation, n)
    p0 = _per_axis("padding", padding, n, zero_ok=True)
    p1 = p0 if padding_end is None else _per_axis("padding_end", padding_end, n, zero_ok=True)
    return tuple(_window_out(x, kk, ss, a, b, dd, ceil_mode, drop_last_window)
                 for x, kk, ss, a, b, dd in zip(X, k, s, p0, p1, d))


# -- the 2-D spellings: aliases of conv and pool ------------------------------------------------

@register("conv2d", "conv")
def conv2d(*, batch: int, c_in: int, h: int, w: int, c_out: int, kernel: int | tuple[int, int],
           stride: int = 1, padding: int = 0, dilation: int = 1, groups: int = 1,
           bias: bool = False, act_bytes: float, weight_bytes: float) -> OpCost:
    """2-D direct convolution ``[B, C, H, W] * [C', C/g, kh, kw] -> [B, C', H', W']`` with the
    same stride, padding and dilation on both axes: ``conv`` with ``spatial=(H, W)`` (one
    formula; this spelling is what the CNN builders write)."""
    return conv(batch=batch, c_in=c_in, spatial=(h, w), c_out=c_out, kernel=kernel,
                stride=stride, padding=padding, dilation=dilation, groups=groups, bias=bias,
                act_bytes=act_bytes, weight_bytes=weight_bytes)


@register("pool2d", "pool")
def pool2d(*, batch: int, channels: int, h: int, w: int, kernel: int, stride: int | None = None,
           padding: int = 0, mode: str = "max", act_bytes: float) -> OpCost:
    """Max/average pooling ``[B, C, H, W] -> [B, C, H', W']`` with a square window (stride
    default: the kernel): ``pool`` with ``spatial=(H, W)``."""
    if isinstance(kernel, bool) or not isinstance(kernel, int):
        raise SpecError(f"kernel must be a positive integer, got {kernel!r}")
    return pool(batch=batch, channels=channels, spatial=(h, w), kernel=kernel,
                stride=stride or None, padding=padding, mode=mode, act_bytes=act_bytes)


# -- row-wise reductions and scans: variance, cumulative sum, sort, top-k -------------------------

@register("variance", "pool")
def variance(*, batch: int, rows: int, row_len: int, std: bool = False,
             with_mean: bool = False, act_bytes: float) -> OpCost:
    """Variance (or standard deviation) of each of ``rows`` rows of ``row_len`` elements:
    ``[B, R, n] -> [B, R]`` (+ the mean ``[B, R]`` with ``with_mean``, as ``var_mean``).

    FLOPs per element 4: one add for the mean, then subtract the mean, square, accumulate;
    per row 2 (divide the sum by n for the mean, the sum of squares by n − correction), +1
    square root for ``std``. Bytes: the input once (one pass, the row's statistics in registers,
    as ``norm`` assumes), the output(s) once. This equals the FLOPs of the ReduceMean, Sub,
    Mul, ReduceMean, Mul, Div chain an ONNX export decomposes ``var`` into.
    """
    _ints(batch=batch, rows=rows, row_len=row_len)
    R = batch * rows
    return OpCost(flops=4 * R * row_len + R * (2 + (1 if std else 0)),
                  act_bytes_read=R * row_len * act_bytes,
                  act_bytes_written=R * (2 if with_mean else 1) * act_bytes)


@register("cumsum", "elementwise")
def cumsum(*, batch: int, rows: int, row_len: int, act_bytes: float) -> OpCost:
    """Cumulative sum along rows ``[B, R, n] -> [B, R, n]``: n − 1 adds per row (the first
    output is the first input). Bytes: input and output once (a scan that keeps its running
    sum in a register)."""
    _ints(batch=batch, rows=rows, row_len=row_len)
    E = batch * rows * row_len
    return OpCost(flops=batch * rows * (row_len - 1), act_bytes_read=E * act_bytes,
                  act_bytes_written=E * act_bytes)


@register("sort", "pool")
def sort(*, batch: int, rows: int, row_len: int, act_bytes: float,
         index_bytes: float = 8.0) -> OpCost:
    """Sort each row ``[B, R, n] -> values [B, R, n], indices [B, R, n]``.

    FLOPs: n·log2(n) per row, the comparisons of a comparison sort (merge sort's worst case,
    to within n), each counted as one FLOP as comparisons are everywhere in this module (max,
    max pooling). Bytes: the input once, values and int64 indices written once.
    Assumptions: each row is sorted on chip (one read, one write); a sort that spills passes
    to memory (a radix sort's log passes over a long row) moves more, not counted.
    """
    _ints(batch=batch, rows=rows, row_len=row_len)
    R, n = batch * rows, row_len
    return OpCost(flops=R * n * math.log2(n), act_bytes_read=R * n * act_bytes,
                  act_bytes_written=R * n * (act_bytes + index_bytes))


@register("topk", "pool")
def topk(*, batch: int, rows: int, row_len: int, k: int, sorted: bool = True,
         act_bytes: float, index_bytes: float = 8.0) -> OpCost:
    """The k largest (or smallest) of each row ``[B, R, n] -> values [B, R, k], indices
    [B, R, k]``.

    FLOPs per row (comparisons, one FLOP each): n to select (one comparison per element against
    the running k-th value: the lower bound, as ``max`` is for k = 1) plus k·log2(k) to sort the
    k kept when ``sorted``; k = n is a full sort, n·log2(n) as ``sort`` counts it.
    Bytes: the row read once, k values and k int64 indices written.
    """
    _ints(batch=batch, rows=rows, row_len=row_len, k=k)
    if k > row_len:
        raise SpecError(f"k={k} exceeds the row length {row_len}")
    R, n = batch * rows, row_len
    per_row = (n if k < n else 0) + (k * math.log2(k) if sorted else 0)
    return OpCost(flops=R * per_row, act_bytes_read=R * n * act_bytes,
                  act_bytes_written=R * k * (act_bytes + index_bytes))
