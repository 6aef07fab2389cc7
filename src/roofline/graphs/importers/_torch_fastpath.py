"""PyTorch's fused transformer fast paths, priced with the formulas they fuse.

In eval mode with ``batch_first=True`` (and gradients off), ``nn.MultiheadAttention`` and
``nn.TransformerEncoderLayer`` skip their Python bodies and call one aten op each:

* ``aten._native_multi_head_attention(query, key, value, embed_dim, num_head, qkv_weight,
  qkv_bias, proj_weight, proj_bias, mask, need_weights, average_attn_weights, mask_type)``:
  the Q/K/V in-projection, attention and the output projection;
* ``aten._transformer_encoder_layer_fwd(src, embed_dim, num_heads, qkv_weight, qkv_bias,
  proj_weight, proj_bias, use_gelu, norm_first, eps, norm_weight_1, norm_bias_1,
  norm_weight_2, norm_bias_2, ffn_weight_1, ffn_bias_1, ffn_weight_2, ffn_bias_2, mask,
  mask_type)``: a whole encoder layer (the attention above, two layer norms, the two-layer
  feed-forward with ReLU or GELU and both residual adds).

Each becomes the records of the ops it fuses, named after them (``layers.0.qkv``,
``layers.0.attention``, ...), so its FLOPs equal those of the slow path PyTorch takes in
training mode (tests/test_import_fastpath.py). Bytes are those of the unfused ops: the fused
kernel keeps some intermediates in cache, so they are an upper bound for it.

Assumptions: a mask (``src_mask`` or a key-padding mask) is read once at its own size and
the attention counts every (query, key) pair (the fused kernel computes masked scores: it
does not skip blocks as a causal kernel does); ``need_weights=True`` materialises the scores
(two batched matmuls and a softmax, plus the average over heads when asked) instead of
the fused attention.
"""

from __future__ import annotations

from typing import Any

from ._import_common import OpRecord

__all__ = ["FASTPATH_OPS", "fastpath_records"]

FASTPATH_OPS = frozenset({"_native_multi_head_attention", "_transformer_encoder_layer_fwd"})

Named = list[tuple[str, OpRecord]]


def fastpath_records(tr: Any, name: str, a: dict[str, Any]) -> Named | str:
    """(suffix, record) pairs for one fast-path op, or why it cannot be priced."""
    x = a["query"] if name == "_native_multi_head_attention" else a["src"]
    if getattr(x, "is_nested", False):
        return "nested-tensor (padded) inputs to the fast path have no formula"
    if x.dim() != 3:
        return f"the fast path expects [batch, tokens, embed] inputs, got {x.dim()}-D"
    if name == "_native_multi_head_attention":
        return _mha(tr, name, a, a["query"], a["key"], a["value"], a.get("need_weights", True),
                    a.get("average_attn_weights", True))
    return _encoder_layer(tr, name, a)


def _linear(tr: Any, source: str, w: Any, b: Any, tokens: int, d_in: int,
            d_out: int) -> OpRecord:
    return tr.rec("linear", source, params=tr.take_params(w, b), batch=1, tokens=tokens,
                  d_in=d_in, d_out=d_out, bias=b is not None)


def _mha(tr: Any, src: str, a: dict[str, Any], q: Any, k: Any, v: Any, need_weights: bool,
         average: bool) -> Named:
    """In-projection, attention, out-projection of ``_native_multi_head_attention`` (or of
    the attention inside ``_transformer_encoder_layer_fwd``)."""
    E, N = int(a["embed_dim"]), int(a["num_head"] if "num_head" in a else a["num_heads"])
    B, T, S = int(q.shape[0]), int(q.shape[1]), int(k.shape[1])
    H = E // N
    w, b = a["qkv_weight"], a["qkv_bias"]
    out: Named = []
    if q is k and k is v:  # self-attention: one [E, 3E] projection
        out.append(("qkv", _linear(tr, src, w, b, B * T, E, 3 * E)))
    else:  # the same [3E, E] weight read in three slices; parameters counted on the first
        for part, x, n in (("q_proj", q, T), ("k_proj", k, S), ("v_proj", v, S)):
            rec = _linear(tr, src, w, b, int(x.shape[0]) * n, E, E)
            out.append((part, rec))
    mask = a.get("mask")
    extra = float(tr.numel(mask)) if tr.is_t(mask) else 0.0
    if need_weights:  # scores materialised: Q·Kᵀ, (mask,) softmax, P·V, average over heads
        out.append(("scores", tr.rec("matmul", src, extra=extra, batch=1, groups=B * N, m=T,
                                     k=H, n=S)))
        out.append(("softmax", tr.rec("softmax", src, elements=B * N * T * S)))
        out.append(("context", tr.rec("matmul", src, batch=1, groups=B * N, m=T, k=S, n=H)))
        if average:
            out.append(("average", tr.rec("global_pool", src, batch=B, channels=T * S,
                                          spatial=N)))
    else:
        if T > S:
            raise ValueError(f"{T} queries over {S} keys")
        out.append(("attention", tr.rec("attention", src, extra=extra, batch=B, n_heads=N,
                                        n_kv_heads=N, head_dim=H, q_len=T, kv_len=S,
                                        causal=False)))
    out.append(("out_proj", _linear(tr, src, a["proj_weight"], a["proj_bias"], B * T, E, E)))
    return out


def _norm(tr: Any, src: str, w: Any, b: Any, elements: int, E: int) -> OpRecord:
    return tr.rec("norm", src, params=tr.take_params(w, b), elements=elements, features=E,
                  variant="layernorm")


def _add(tr: Any, src: str, elements: int) -> OpRecord:
    return tr.rec("elementwise", src, elements=elements, op="add", n_inputs=2)


def _encoder_layer(tr: Any, src: str, a: dict[str, Any]) -> Named:
    """Norms, attention, feed-forward and residuals of ``_transformer_encoder_layer_fwd``, in
    the order PyTorch runs them (pre-norm when ``norm_first``)."""
    x = a["src"]
    E = int(a["embed_dim"])
    B, T = int(x.shape[0]), int(x.shape[1])
    n = B * T * E
    F = int(a["ffn_weight_1"].shape[0])
    w1, b1, w2, b2 = a["ffn_weight_1"], a["ffn_bias_1"], a["ffn_weight_2"], a["ffn_bias_2"]
    pre = bool(a["norm_first"])
    act = "gelu_erf" if a["use_gelu"] else "relu"
    attn = _mha(tr, src, a, x, x, x, False, False)
    out: Named = []
    if pre:
        out.append(("norm1", _norm(tr, src, a["norm_weight_1"], a["norm_bias_1"], n, E)))
    out += attn
    out.append(("add", _add(tr, src, n)))
    if pre:
        out.append(("norm2", _norm(tr, src, a["norm_weight_2"], a["norm_bias_2"], n, E)))
    else:
        out.append(("norm1", _norm(tr, src, a["norm_weight_1"], a["norm_bias_1"], n, E)))
    out.append(("linear1", _linear(tr, src, w1, b1, B * T, E, F)))
    out.append(("activation", tr.rec("elementwise", src, elements=B * T * F, op=act,
                                     n_inputs=1)))
    out.append(("linear2", _linear(tr, src, w2, b2, B * T, F, E)))
    out.append(("add", _add(tr, src, n)))
    if not pre:
        out.append(("norm2", _norm(tr, src, a["norm_weight_2"], a["norm_bias_2"], n, E)))
    return out
