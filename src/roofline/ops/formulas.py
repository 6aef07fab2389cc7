"""One formula per op kind. Every formula takes keyword shapes (``batch`` first, per-sample
sizes after, element sizes in bytes last) and returns an ``OpCost``.

Notation (scaling-book): B batch, T query tokens, S key/value tokens, D model width,
F output features, N query heads, K key/value heads, H head dim, C channels.
FLOPs count 2 per multiply-add everywhere; bytes count each tensor once per call (read from
and written to main memory: no cache reuse across ops, no re-reads inside an op).
"""

from __future__ import annotations

import math

from ..errors import SpecError
from .cost import OpCost
from .registry import register

__all__ = ["ELEMENTWISE_FLOPS", "conv_out", "causal_pairs"]


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
           act_bytes: float, weight_bytes: float) -> OpCost:
    """A dense layer ``[B, T, D] ·_D [D, F] -> [B, T, F]`` (+ bias).

    FLOPs: 2·B·T·D·F (+ B·T·F bias adds). Bytes: X and the output once, W (and bias) once.
    Assumptions: W is read once per call whatever the batch (it fits the tiling); no epilogue
    fusion is counted here (an activation after it is its own op).
    """
    _ints(batch=batch, tokens=tokens, d_in=d_in, d_out=d_out)
    B, T, D, F = batch, tokens, d_in, d_out
    return OpCost(
        flops=2 * B * T * D * F + (B * T * F if bias else 0),
        weight_bytes_read=(D * F + (F if bias else 0)) * weight_bytes,
        act_bytes_read=B * T * D * act_bytes,
        act_bytes_written=B * T * F * act_bytes,
    )


@register("matmul", "matmul")
def matmul(*, batch: int, groups: int = 1, m: int, k: int, n: int, b_groups: int | None = None,
           b_source: str = "act", act_bytes: float, b_bytes: float | None = None) -> OpCost:
    """A batched product of two activations ``[B, G, M, K] ·_K [B, G', K, N] -> [B, G, M, N]``.

    ``b_groups`` (G') < G means the second operand is shared by G/G' groups (GQA), read once.
    ``b_source`` says what the second operand is: "act" (an activation), "kv" (the KV cache)
    or "weight" (a constant read once per call, not per sample).
    FLOPs: 2·B·G·M·K·N.
    """
    _ints(batch=batch, groups=groups, m=m, k=k, n=n)
    B, G, M, K, N = batch, groups, m, k, n
    Gb = G if b_groups is None else b_groups
    bb = act_bytes if b_bytes is None else b_bytes
    b_elems = Gb * K * N
    cost = dict(flops=2 * B * G * M * K * N, act_bytes_read=B * G * M * K * act_bytes,
                act_bytes_written=B * G * M * N * act_bytes)
    if b_source == "act":
        cost["act_bytes_read"] += B * b_elems * bb
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


@register("conv2d", "conv")
def conv2d(*, batch: int, c_in: int, h: int, w: int, c_out: int, kernel: int | tuple[int, int],
           stride: int = 1, padding: int = 0, dilation: int = 1, groups: int = 1,
           bias: bool = False, act_bytes: float, weight_bytes: float) -> OpCost:
    """2-D convolution ``[B, C, H, W] * [C', C/g, kh, kw] -> [B, C', H', W']``.

    FLOPs: 2·B·C'·H'·W'·(C/g)·kh·kw (+ B·C'·H'·W' bias adds).
    Bytes: input and output once, weights once. Assumptions: no im2col buffer traffic
    (implicit GEMM), halos not re-read.
    """
    kh, kw = (kernel, kernel) if isinstance(kernel, int) else kernel
    _ints(batch=batch, c_in=c_in, h=h, w=w, c_out=c_out, kh=kh, kw=kw, stride=stride,
          dilation=dilation, groups=groups)
    if padding < 0:
        raise SpecError(f"padding must be >= 0, got {padding!r}")
    if c_in % groups or c_out % groups:
        raise SpecError(f"groups={groups} must divide c_in={c_in} and c_out={c_out}")
    B, C, Co = batch, c_in, c_out
    Ho = conv_out(h, kh, stride, padding, dilation)
    Wo = conv_out(w, kw, stride, padding, dilation)
    macs = B * Co * Ho * Wo * (C // groups) * kh * kw
    return OpCost(
        flops=2 * macs + (B * Co * Ho * Wo if bias else 0),
        weight_bytes_read=(Co * (C // groups) * kh * kw + (Co if bias else 0)) * weight_bytes,
        act_bytes_read=B * C * h * w * act_bytes,
        act_bytes_written=B * Co * Ho * Wo * act_bytes,
    )


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
    when ``kv_from_cache`` (decode, or prefill on a cached prefix).
    """
    _ints(batch=batch, n_heads=n_heads, n_kv_heads=n_kv_heads, head_dim=head_dim, q_len=q_len,
          kv_len=kv_len)
    if n_heads % n_kv_heads:
        raise SpecError(f"n_kv_heads={n_kv_heads} must divide n_heads={n_heads}")
    if q_len > kv_len:
        raise SpecError(f"q_len={q_len} cannot exceed kv_len={kv_len}")
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
    "mask": 1,
    "dropout": 2,     # compare random, multiply
    "exp": 1, "sqrt": 1, "neg": 1, "abs": 1, "pow": 1, "clamp": 2, "where": 1, "cast": 0,
    "erf": 1, "log": 1, "sin": 1, "cos": 1, "rsqrt": 1, "reciprocal": 1,
    "leaky_relu": 2,  # compare, multiply
    "compare": 1,     # eq, lt, gt, ... (one comparison per element)
    "max": 1, "min": 1,
}


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
        n_inputs = 2 if op in ("add", "sub", "mul", "div", "swiglu", "geglu", "where") else 1
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

@register("pool2d", "pool")
def pool2d(*, batch: int, channels: int, h: int, w: int, kernel: int, stride: int | None = None,
           padding: int = 0, mode: str = "max", act_bytes: float) -> OpCost:
    """Max/average pooling ``[B, C, H, W] -> [B, C, H', W']``: kernel² FLOPs per output
    (comparisons or adds; the average's one divide is folded in)."""
    _ints(batch=batch, channels=channels, h=h, w=w, kernel=kernel)
    if mode not in ("max", "avg"):
        raise SpecError(f"pool mode {mode!r}; allowed: max, avg")
    s = stride or kernel
    Ho, Wo = conv_out(h, kernel, s, padding, 1), conv_out(w, kernel, s, padding, 1)
    out = batch * channels * Ho * Wo
    return OpCost(flops=kernel * kernel * out, act_bytes_read=batch * channels * h * w * act_bytes,
                  act_bytes_written=out * act_bytes)


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
