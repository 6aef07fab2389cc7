"""rl.serve(ep=...): expert parallelism of a mixture of experts with data-parallel attention —
hand calculations on Mixtral-8x7B (E = 8 routed experts, top-2, D = 4096, 32 layers, expert
MLP width F = 14336, 8 KV heads × 128)."""

import pytest

import roofline as rl
from roofline.errors import RooflineError
from roofline.ops.collectives import all_to_all

M = "mixtral-8x7b"
KW = dict(batch=8, prompt_len=512, output_len=65)


@pytest.fixture(scope="module")
def runs():
    return {ep: rl.serve(M, "H100", ep=ep, **KW) for ep in (1, 4)}


def test_each_group_holds_its_share_of_the_experts_and_of_the_sequences(runs):
    one, four = runs[1], runs[4]
    assert four.devices == 4 and four.ep == 4 and one.devices == 1
    # routed-expert weights: 32 layers × 8 experts × 3 matrices × 4096 × 14336 × 2 B
    experts = 32 * 8 * 3 * 4096 * 14336 * 2  # = 90,194,313,216 B
    assert experts == 90_194_313_216
    # ep = 4: each device keeps 2 of the 8 experts and every dense weight (attention,
    # embeddings, router, norms)
    assert four.memory_breakdown["weights"] == pytest.approx(
        one.memory_breakdown["weights"] - 0.75 * experts, rel=1e-12)
    # 8 sequences over 4 groups: 2 per device, each 512 + 65 = 577 tokens × 131,072 B
    # (2 · 32 layers · 8 KV heads · 128 · 2 B)
    assert four.memory_breakdown["kv_cache"] == pytest.approx(2 * 577 * 131_072)
    # the replica's throughput counts all 8 sequences
    assert four.tokens_per_s == pytest.approx(8 * 65 / four.e2e_latency)


def test_all_to_all_by_hand(runs):
    four = runs[4]
    # α(4 ranks) = 3.7 µs + 0.37 µs · (4 − 2) = 4.44 µs; bw' = 450 GB/s × 0.75 = 337.5 GB/s.
    # decode step: a micro-batch of 8/4 = 2 tokens, each sent to its 2 experts:
    # n = 2 · 2 · 4096 · 2 B = 32,768 B per rank → 4.44 µs + 3/4 · 32768 / 337.5e9 = 4.513 µs,
    # dispatch + combine in each of the 32 MoE layers: 64 calls per step
    a, bw = 4.44e-6, 337.5e9
    step = 64 * (a + 0.75 * 32768 / bw)
    assert step == pytest.approx(64 * 4.5128e-6, rel=1e-4)
    # prefill: 2 prompts × 512 tokens per group → n = 1024 · 2 · 4096 · 2 B = 16.78 MB
    pre = 64 * (a + 0.75 * 1024 * 2 * 4096 * 2 / bw)
    assert pre == pytest.approx(64 * 41.72e-6, rel=1e-3)
    assert four.phase_seconds["ep_comm"] == pytest.approx(pre + 64 * step, rel=1e-9)
    assert all_to_all(32768, 4, 450e9, a, link_efficiency=0.75, latency="call") == \
        pytest.approx(step / 64, rel=1e-12)
    # no tensor parallelism inside a group: nothing else communicates
    assert four.phase_seconds["tp_comm"] == 0.0
    assert sum(four.phase_seconds.values()) == pytest.approx(four.e2e_latency, rel=1e-9)


def test_ep_reads_fewer_expert_bytes_per_device_and_decodes_faster(runs):
    # the 70 B of experts split 4 ways: a decode step reads ~1/4 of the expert bytes a single
    # device reads at the same batch, so TPOT falls though each step pays 64 all-to-alls
    one, four = runs[1], runs[4]
    assert four.tpot < one.tpot
    assert four.tokens_per_s_per_device < one.tokens_per_s_per_device * 4


@pytest.mark.parametrize("kw,field", [
    (dict(model=M, ep=3), "ep=3 must divide the 8 routed experts"),
    (dict(model="llama-3.1-8b", ep=2), "ep=2: Llama"),
    (dict(model=M, ep=0), "ep"),
    (dict(model=M, ep=2, preset="mlsysim"), "ep=2: preset 'mlsysim'"),
    (dict(model=M, ep=2, draft="llama-3.2-1b"), "ep=2 with a draft model"),
])
def test_bad_ep_names_the_field(kw, field):
    model = kw.pop("model")
    with pytest.raises(RooflineError, match=field.replace("(", r"\(")):
        rl.serve(model, "H100", **kw)


def test_data_parallel_attention_does_not_replicate_mla_kv():
    # DeepSeek-V3's latent KV (61 layers × (512 + 64) × 1 B in fp8 = 35,136 B per token) is
    # replicated on every TP rank; with ep = 8 each device holds only its 8 of the 64 sequences
    kw = dict(batch=64, prompt_len=1024, output_len=256, precision="fp8", kv_precision="fp8")
    tp8 = rl.serve("deepseek-v3", "H200", tp=8, **kw)
    ep8 = rl.serve("deepseek-v3", "H200", ep=8, **kw)
    per_token = 61 * (512 + 64) * 1
    assert tp8.memory_breakdown["kv_cache"] == pytest.approx(64 * 1280 * per_token)
    assert ep8.memory_breakdown["kv_cache"] == pytest.approx(8 * 1280 * per_token)
    assert ep8.devices == tp8.devices == 8
    assert ep8.phase_seconds["ep_comm"] > 0 and ep8.phase_seconds["tp_comm"] == 0.0
