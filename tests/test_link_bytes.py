"""Activations on a link (Precision.link_bytes): what tensor-, pipeline-, context- and
expert-parallel traffic moves per element. Under fp8 the residual stream and a matmul's output
stay 16-bit, so every scenario prices an fp8 run's links at 2 bytes (1 byte before); with
sequence parallelism training's all-gather half moves the fp8 input Transformer Engine casts
before gathering. Each by hand."""

from __future__ import annotations

import numpy as np
import pytest

import roofline as rl
from roofline.graphs.training import GROUPS
from roofline.ops import collectives as coll
from roofline.scenarios.serving import allreduce_time, serve_sweep
from roofline.scenarios.serving import plan as sp
from roofline.scenarios.serving.comm import _p2p
from roofline.scenarios.training.context import _context, _group_times
from roofline.specs.dtypes import precision

H100 = rl.hardware("H100")
G = {g: i for i, g in enumerate(GROUPS)}


def test_link_bytes_per_precision() -> None:
    assert precision("fp8").act_bytes == 1.0
    assert precision("fp8").link_bytes == 2.0  # 16-bit residual stream / matmul output
    assert precision("int8").link_bytes == 2.0  # W8A8: the residual stream stays fp16
    assert precision("bf16").link_bytes == 2.0
    assert precision("fp16").link_bytes == 2.0
    assert precision("fp32").link_bytes == 4.0
    assert precision("tf32").link_bytes == 4.0
    assert precision("int4").link_bytes == 2.0  # weight-only: fp16 activations
    assert precision("fp8", activations="fp32").link_bytes == 4.0


def test_serve_fp8_tp_and_pp_traffic_by_hand() -> None:
    """Llama-3.1-70B fp8 at tp 2 × pp 2: 161 all-reduces per pass (2·40·2 + 1) of d_model × 2 B
    per token (8192 · 2 = 16384 B, not 8192 B), one stage-to-stage send per pass."""
    f = sp.serving_factors("trtllm")
    r = rl.serve("llama-3.1-70b", "H100", batch=1, prompt_len=512, output_len=65, tp=2, pp=2,
                 precision="fp8")
    row = 8192 * 2
    hand = 161 * allreduce_time(512 * row, 2, H100, f) + 64 * 161 * allreduce_time(row, 2, H100,
                                                                                 f)
    assert r.phase_seconds["tp_comm"] == pytest.approx(hand, rel=1e-9)
    assert r.phase_seconds["pp_comm"] == pytest.approx(
        _p2p(512 * row, 2, H100, f) + 64 * _p2p(row, 2, H100, f), rel=1e-9)
    # the same bytes as a bf16 run: the link width does not follow the 1-byte activations
    b = rl.serve("llama-3.1-70b", "H100", batch=1, prompt_len=512, output_len=65, tp=2, pp=2,
                 precision="bf16")
    assert r.phase_seconds["tp_comm"] == pytest.approx(b.phase_seconds["tp_comm"], rel=1e-12)


def test_serve_fp8_speculative_and_expert_traffic_match_bf16() -> None:
    """The speculative path (target verification all-reduces) and expert parallelism's
    all-to-alls move 16-bit activations under fp8 too: the same seconds as a bf16 run."""
    kw = dict(batch=4, prompt_len=256, output_len=33, tp=2)
    s8 = rl.serve("llama-3.1-70b", "H100", precision="fp8", draft="llama-3.2-1b", **kw)
    s16 = rl.serve("llama-3.1-70b", "H100", precision="bf16", draft="llama-3.2-1b", **kw)
    assert s8.phase_seconds["tp_comm"] > 0
    assert s8.phase_seconds["tp_comm"] == pytest.approx(s16.phase_seconds["tp_comm"], rel=1e-12)
    kw = dict(batch=8, prompt_len=256, output_len=33, ep=4)
    e8 = rl.serve("mixtral-8x7b", "H100", precision="fp8", **kw)
    e16 = rl.serve("mixtral-8x7b", "H100", precision="bf16", **kw)
    assert e8.phase_seconds["ep_comm"] > 0
    assert e8.phase_seconds["ep_comm"] == pytest.approx(e16.phase_seconds["ep_comm"], rel=1e-12)


def test_serve_sweep_fp8_tp_matches_serve() -> None:
    """The serving sweep prices its TP all-reduces with the same link width as serve: one
    decode step at S = 4096, fp8, tp 2 (serve's tp_comm is pinned by hand above)."""
    out = serve_sweep("llama-3.1-70b", "H100", batch=[8], context=[4096], tp=2, precision="fp8")
    s = rl.serve("llama-3.1-70b", "H100", batch=8, prompt_len=4095, output_len=2, tp=2,
                 precision="fp8")
    assert float(out["tpot"].ravel()[0]) == pytest.approx(s.tpot, rel=1e-9)


def test_train_fp8_expert_dispatch_matches_bf16() -> None:
    """Training's expert dispatch and combine move the bf16 hidden state under fp8 too: with
    the exchanges exposed (no ep_overlap) ep_comm does not depend on the compute, so an fp8
    run's equals a bf16 run's (half of it with 1-byte activations)."""
    kw = dict(global_batch=32, seq_len=4096, ep=8, tp=2, micro_batch=1, recompute="none")
    c = rl.cluster("dgx-h100", nodes=2)
    r8 = rl.train("mixtral-8x7b", c, precision="fp8", **kw)
    r16 = rl.train("mixtral-8x7b", c, precision="bf16", **kw)
    assert r8.breakdown["ep_comm"] > 0
    assert r8.breakdown["ep_comm"] == pytest.approx(r16.breakdown["ep_comm"], rel=1e-12)


def _ctx(prec: str, seq_len: int = 4096, cp: int = 1):
    return _context("llama-3.1-8b", rl.cluster("dgx-h100", nodes=1), None, prec, seq_len, True,
                    False, "default", None, cp)


@pytest.mark.parametrize("seq_par, width", [(True, 1.5), (False, 2.0)])
def test_train_fp8_tensor_parallel_bytes_by_hand(seq_par: bool, width: float) -> None:
    """Llama-3.1-8B fp8, tp 2, 4 micro-batches of 1 × 4096, no recompute. Per layer: 2
    all-reduce-equivalents forward, 2 backward (less the column dW overlap). With sequence
    parallelism a reduce-scatter of the 16-bit output (2 B) plus an all-gather of the fp8-cast
    input (1 B): an all-reduce at 1.5 B per element; without it a plain 16-bit all-reduce."""
    r = rl.train("llama-3.1-8b", rl.cluster("dgx-h100", nodes=1), global_batch=16, seq_len=4096,
                 tp=2, dp=4, micro_batch=1, recompute="none", precision="fp8",
                 sequence_parallel=seq_par)
    ctx = _ctx("fp8")
    gt = _group_times(ctx, 2, 1, [1], seq_par)[1]
    t_ar = float(coll.group_all_reduce(1 * 4096 * 4096 * width, 2, 1.0, ctx.links, np))
    per_layer = 2 * t_ar + max(2 * t_ar - gt[G["layer_bwd_dw_col"]], 0.0)
    assert r.breakdown["tp_comm"] == pytest.approx(4 * 32 * per_layer, rel=1e-9)


def test_train_fp8_pipeline_send_is_16_bit_by_hand() -> None:
    """A stage sends its micro-batch's hidden states (b · s · D / tp, 16-bit under fp8) forward
    and their gradient back: pp_comm = m · 2 · send(4096 · 4096 · 2 / 2)."""
    r = rl.train("llama-3.1-8b", rl.cluster("dgx-h100", nodes=1), global_batch=16, seq_len=4096,
                 tp=2, pp=2, dp=2, micro_batch=1, recompute="none", precision="fp8")
    ctx = _ctx("fp8")
    t = float(coll.group_send_recv(4096 * 4096 * 2 / 2, False, ctx.links, np))
    assert r.breakdown["pp_comm"] == pytest.approx(8 * 2 * t, rel=1e-9)


def test_train_fp8_context_parallel_kv_is_16_bit() -> None:
    """The context-parallel K/V exchange moves 16-bit K and V under fp8 (no fp8 attention):
    the same seconds as bf16 where the core does not hide it (2048 tokens over 8 ranks)."""
    kw = dict(global_batch=2, seq_len=2048, tp=1, cp=8, dp=2, micro_batch=1, zero=1,
              recompute="none")
    c = rl.cluster("dgx-h100", nodes=2)
    r8 = rl.train("llama-3.1-8b", c, precision="fp8", **kw)
    ctx = _context("llama-3.1-8b", c, None, "fp8", 2048, True, False, "default", None, 8)
    t_core = _group_times(ctx, 1, 1, [1])[1][G["layer_fwd_core"]]
    kv = 1 * 2048 * 2 * 8 * 128 * 2  # b·S·(K, V)·8 KV heads·128·2 bytes
    t_kv = float(coll.group_all_gather(kv, 8, 1, ctx.links, np))
    per_layer = max(t_kv - t_core, 0.0) + max(2 * t_kv - 2.5 * t_core, 0.0)
    assert per_layer > 0
    assert r8.breakdown["cp_comm"] == pytest.approx(32 * per_layer, rel=1e-9)
