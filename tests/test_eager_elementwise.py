"""train(elementwise="eager") (PyTorch eager's op chains for RMSNorm, RoPE, SwiGLU and the loss,
data/presets/eager.toml) and attention_kernel="fa1" (the FlashAttention-1 class), against hand
calculations."""

from __future__ import annotations

import pytest

import roofline as rl
from roofline.engine.attention import _tables
from roofline.errors import SpecError
from roofline.graphs.resolve import model as resolve_model
from roofline.graphs.training import training_graph
from roofline.ops import QUANTITIES
from roofline.scenarios.training.context import eager_table
from roofline.specs.dtypes import precision
from roofline.validation.training import gpt_model

BF16 = precision("bf16")
LLAMA = resolve_model("llama-3.1-8b").config
AR, AW = QUANTITIES.index("act_bytes_read"), QUANTITIES.index("act_bytes_written")
T = 1024


def _moved(g, name: str) -> float:
    """Activation bytes per sample (the per-sample cost column) of op ``name``."""
    i = g.names.index(name)
    return float(g.c1[AR, i] + g.c1[AW, i])


def test_the_table_is_the_op_count_of_its_derivations() -> None:
    # RMSNorm forward: x.float() 2+4, pow 4+4, mean 4, x*rsqrt 4+4, type_as 4+2, *weight 2+2
    assert eager_table()["rmsnorm"] == (2 + 4 + 4 + 4 + 4 + 4 + 4 + 4 + 2 + 2 + 2,
                                        (4 + 6 + 2) + 6 + (8 + 12 + 4) + 4 + 12 + 12 + 6)
    assert eager_table()["rope"] == (6 + 8 + 6, 6 + 8 + 6)
    assert eager_table()["swiglu"] == (4 + 6, 6 + 6 + 6)
    assert eager_table()["cross_entropy"] == (6 + 8, 4 + 12 + 6)


def test_eager_ops_move_the_tables_bytes_per_output_element() -> None:
    fused = training_graph(LLAMA, BF16, seq_len=T).graph
    eager = training_graph(LLAMA, BF16, seq_len=T, eager=eager_table()).graph
    D, F, V = LLAMA.d_model, LLAMA.d_ff, LLAMA.vocab
    qk = (LLAMA.n_heads + LLAMA.n_kv_heads) * LLAMA.head_dim
    # by hand: elements x bytes per element
    assert _moved(eager, "layers.0.input_norm") == pytest.approx(T * D * 36)
    assert _moved(eager, "layers.0.input_norm.grad") == pytest.approx(T * D * 76)
    assert _moved(eager, "layers.0.attn.rope") == pytest.approx(T * qk * 20)
    assert _moved(eager, "layers.0.attn.rope.grad") == pytest.approx(T * qk * 20)
    assert _moved(eager, "layers.0.mlp.act_mul") == pytest.approx(T * F * 10)
    assert _moved(eager, "layers.0.mlp.act_mul.grad") == pytest.approx(T * F * 18)
    assert _moved(eager, "loss.cross_entropy") == pytest.approx(T * V * 14)
    assert _moved(eager, "loss.cross_entropy.grad") == pytest.approx(T * V * 22)
    # the fused graph's own counts: a norm reads and writes each element once
    assert _moved(fused, "layers.0.input_norm") == pytest.approx(T * D * 4)
    # everything else is the same op for op (matmuls, attention, residual adds)
    for i, nm in enumerate(fused.names):
        if not any(s in nm for s in ("norm", "rope", "act_mul", "cross_entropy")):
            assert (eager.c0[:, i] == fused.c0[:, i]).all() and \
                (eager.c1[:, i] == fused.c1[:, i]).all(), nm


def test_layernorm_and_gelu_stay_one_kernel() -> None:
    gpt = gpt_model(16, 2048, 24, 50368, T).config  # LayerNorm, GELU: native kernels in eager
    fused = training_graph(gpt, BF16, seq_len=T).graph
    eager = training_graph(gpt, BF16, seq_len=T, eager=eager_table()).graph
    for i, nm in enumerate(fused.names):
        if nm.startswith("layers."):
            assert (eager.c1[:, i] == fused.c1[:, i]).all(), nm
    assert _moved(eager, "loss.cross_entropy") == pytest.approx(T * 50368 * 14)


def test_train_eager_is_slower_by_the_extra_bytes_and_default_is_fused() -> None:
    kw = dict(global_batch=8, seq_len=2048, tp=1, pp=1, recompute="none", zero=3)
    base = rl.train("llama-3.1-8b", "dgx-h100", **kw)
    assert rl.train("llama-3.1-8b", "dgx-h100", elementwise="fused", **kw).step_time == \
        base.step_time
    eager = rl.train("llama-3.1-8b", "dgx-h100", elementwise="eager", **kw)
    assert eager.step_time > base.step_time
    assert eager.mfu < base.mfu  # same model FLOPs, more time
    with pytest.raises(SpecError, match="16-bit"):
        rl.train("llama-3.1-8b", "dgx-h100", elementwise="eager", precision="fp32", **kw)
    with pytest.raises(SpecError, match="elementwise"):
        rl.train("llama-3.1-8b", "dgx-h100", elementwise="compiled", **kw)
    row = rl.best_parallelism("llama-3.1-8b", "dgx-h100", global_batch=8, seq_len=2048,
                              elementwise="eager", top=1)[0]
    again = rl.train("llama-3.1-8b", "dgx-h100", global_batch=8, seq_len=2048, tp=row["tp"],
                     pp=row["pp"], micro_batch=row["micro_batch"], interleave=row["interleave"],
                     recompute=row["recompute"], zero=row["zero"], elementwise="eager")
    assert row["step_time"] == pytest.approx(again.step_time, rel=1e-9)


def test_fa1_is_half_of_fa2_on_hopper() -> None:
    k = _tables()["kernels"]
    assert k[("fa1", "hopper")]["fwd"] == pytest.approx(k[("fa2", "hopper")]["fwd"] / 2, abs=5e-4)
    assert k[("fa1", "hopper")]["bwd"] == pytest.approx(k[("fa2", "hopper")]["bwd"] / 2, abs=5e-4)
    kw = dict(global_batch=8, seq_len=8192, tp=1, pp=1, recompute="none", zero=3)
    a1 = rl.train("llama-3.1-8b", "dgx-h100", attention_kernel="fa1", **kw)
    a2 = rl.train("llama-3.1-8b", "dgx-h100", attention_kernel="fa2", **kw)
    assert a1.step_time > a2.step_time
    with pytest.raises(SpecError, match="fa1"):
        rl.train("llama-3.1-8b", "dgx-a100", attention_kernel="fa1", **kw)


def test_cli_elementwise_is_the_api(capsys) -> None:
    import json

    from roofline.cli import main

    assert main(["train", "llama-3.1-8b", "dgx-h100", "--global-batch", "8", "--seq-len", "2048",
                 "--zero", "3", "--recompute", "none", "--elementwise", "eager",
                 "--format", "json"]) == 0
    got = json.loads(capsys.readouterr().out)["step_time"]
    api = rl.train("llama-3.1-8b", "dgx-h100", global_batch=8, seq_len=2048, zero=3,
                   recompute="none", elementwise="eager").step_time
    assert got == pytest.approx(api, rel=1e-12)
