"""Unhappy paths found by the session-31 audit ("never a silent wrong number"): each test failed
before its fix."""

from __future__ import annotations

import numpy as np
import pytest

import roofline as rl
from roofline.errors import SpecError


def test_simulate_serving_refuses_requests_longer_than_the_context() -> None:
    # rl.serve calls prompt + output past max_position_embeddings infeasible; the simulation
    # used to price such requests (its step tables are read at capped lengths) and print a TTFT
    w = rl.Workload(prompt=rl.lengths("fixed", 200_000), output=rl.lengths("fixed", 10), rate=1)
    with pytest.raises(SpecError, match="max_position_embeddings=131072"):
        rl.simulate_serving("llama-3.1-8b", "H100", workload=w, requests=20)
    assert not rl.serve("llama-3.1-8b", "H100", prompt_len=200_000, output_len=10).feasible


def test_simulate_serving_context_edge_is_the_serve_rule() -> None:
    # prompt + output = context + 1 is servable (the last token is not fed back), as in serve
    cap = 131_072
    ok = rl.Workload(prompt=rl.lengths("fixed", cap - 9), output=rl.lengths("fixed", 10),
                     rate=0.01)
    assert rl.serve("llama-3.1-8b", "H100", prompt_len=cap - 9, output_len=10).feasible
    sim = rl.simulate_serving("llama-3.1-8b", "H100", workload=ok, requests=2)
    assert sim.rejected == 0
    over = rl.Workload(prompt=rl.lengths("fixed", cap - 8), output=rl.lengths("fixed", 10),
                       rate=0.01)
    assert not rl.serve("llama-3.1-8b", "H100", prompt_len=cap - 8, output_len=10).feasible
    with pytest.raises(SpecError, match="1 of 1 requests|2 of 2 requests"):
        rl.simulate_serving("llama-3.1-8b", "H100", workload=over, requests=2)


def _plan(hw: str, prompt: int, **kw):  # type: ignore[no-untyped-def]
    w = rl.Workload(prompt=rl.lengths("fixed", prompt), output=rl.lengths("fixed", 50), rate=2)
    return rl.plan_serving("llama-3.1-8b", hw, devices=2, workload=w,
                           slo=rl.SLO(ttft_p99=2.0, tpot_p99=0.05), requests=100,
                           max_simulations=1, max_tp=2, pp_options=(1,),
                           chunk_sizes=(2048,), disaggregated=False, **kw)


def test_plan_serving_default_precisions_on_a_part_without_bf16() -> None:
    # V100 has fp16 but no bf16 (or fp8): the default search used bf16 only, refused every
    # layout and blamed "no layout meets the TPOT target even at batch 1"
    plan = _plan("V100", 1000)
    assert plan.best is not None
    assert "fp16" in plan.best.layout and "bf16" not in plan.best.layout
    assert len(plan.infeasible) == 0


def test_plan_serving_says_why_nothing_runs() -> None:
    # every layout refused for a reason that is not memory: the reason is the one given, not
    # "does not fit", and the note names it rather than a TPOT shortfall
    plan = _plan("V100", 1000, precisions=[("bf16", "bf16")])
    reasons = [str(r) for r in plan.infeasible["reason"]]
    assert reasons and all(r.startswith("cannot run: ") and "no bf16 peak" in r
                           for r in reasons)
    assert any("no bf16 peak" in n for n in plan.notes)
    assert not any("TPOT target" in n for n in plan.notes)
    over = _plan("H100", 200_000, precisions=[("bf16", "bf16")])
    assert any("max_position_embeddings=131072" in n for n in over.notes)


def test_group_size_needs_quantised_weights() -> None:
    # a per-group scale belongs to quantised weights; on fp16 weights it used to add 2/g bytes
    # per weight (Llama 3.1 8B: +125 MB, serve TPOT +0.5 %) without a word
    with pytest.raises(SpecError, match="group_size=128 needs quantised weights"):
        rl.precision("fp16", group_size=128)
    with pytest.raises(SpecError, match="group_size"):
        rl.solve("llama-3.1-8b", "H100", group_size=128)
    with pytest.raises(SpecError, match="group_size"):
        rl.serve("llama-3.1-8b", "H100", group_size=128)
    assert rl.precision("fp16", weights="int4", group_size=128).weight_overhead_bytes == 2 / 128
    assert rl.precision("int4", group_size=32).weight_overhead_bytes == 2 / 32
    assert rl.precision("bf16", weights="fp8", group_size=128).weights == "fp8"
    # a GGUF type carries its own block scales: refused as weights= before, but given as the
    # spec its 0.0625 B per weight (Q4_0: 4.5 bits) was replaced by 2/128 without a word
    for kw in ({"spec": "q4_0"}, {"spec": "fp16", "weights": "q4_0"}):
        with pytest.raises(SpecError, match="GGUF type 'q4_0' has its own block scales"):
            rl.precision(**kw, group_size=128)
    assert rl.precision("q4_0").weight_overhead_bytes == 4.5 / 8 - 0.5
    assert rl.precision("q4_0", weights="int4", group_size=128).weight_overhead_bytes == 2 / 128


def test_solve_refuses_a_length_its_phase_ignores() -> None:
    # forward has no KV cache and decode takes one token: context= in forward and seq_len= in
    # decode were dropped silently while the Result echoed the forward context as if priced
    with pytest.raises(SpecError, match="context=100000 does not apply to phase 'forward'"):
        rl.solve("llama-3.1-8b", "H100", context=100_000)
    with pytest.raises(SpecError, match="seq_len=100 does not apply to phase 'decode'"):
        rl.solve("llama-3.1-8b", "H100", phase="decode", seq_len=100)
    one = rl.solve("llama-3.1-8b", "H100", phase="decode", seq_len=1, context=512)
    assert one.latency == rl.solve("llama-3.1-8b", "H100", phase="decode", context=512).latency
    pre = rl.solve("llama-3.1-8b", "H100", phase="prefill", seq_len=128, context=4096)
    assert pre.latency > rl.solve("llama-3.1-8b", "H100", phase="prefill", seq_len=128).latency
    with pytest.raises(SpecError, match="does not apply to phase 'forward'"):
        rl.sweep("llama-3.1-8b", ["H100"], batch=[1, 2], context=4096)
    with pytest.raises(SpecError, match="no sequence dimension"):
        rl.solve("resnet50", "H100", context=100)


def test_decode_sweep_past_the_context_cannot_run() -> None:
    # serve_sweep (and explore's decode spaces) priced a step at 200k tokens of context on a
    # 131k-context model and called it fitting; rl.serve calls the same request infeasible
    from roofline.scenarios.serving import serve_sweep

    out = serve_sweep("llama-3.1-8b", "H100", batch=[1], context=[131_072, 131_073])
    assert out["fits"][0, 0, :, 0].all() and (out["tpot"][0, 0, :, 0] > 0).all()
    assert not out["fits"][0, 0, :, 1].any() and np.isnan(out["tpot"][0, 0, :, 1]).all()
    assert rl.serve("llama-3.1-8b", "H100", prompt_len=131_072, output_len=1).feasible
    assert not rl.serve("llama-3.1-8b", "H100", prompt_len=131_072, output_len=2).feasible
    space = rl.Space(kind="decode", model=["llama-3.1-8b"], hardware=["H100"],
                     scenario=dict(batch=[1], context=[2048, 200_000]))
    res = rl.explore(space, objectives=["tokens_per_s_per_device"], constraints=["fits"])
    assert res.passed == 1


def test_simulate_serving_a_prompt_that_fills_the_context() -> None:
    # prompt = the whole context, one output token: servable (serve's rule), and the step
    # tables stay finite although the decode sweep refuses a context past the model's
    cfg_cap = rl.model("gpt2").config.max_positions  # a small context keeps this fast
    assert rl.serve("gpt2", "H100", prompt_len=cfg_cap, output_len=1).feasible
    w = rl.Workload(prompt=rl.lengths("fixed", cfg_cap), output=rl.lengths("fixed", 1), rate=1)
    sim = rl.simulate_serving("gpt2", "H100", workload=w, requests=5)
    assert sim.rejected == 0 and np.isfinite(sim.ttft.p99)


def test_disaggregated_serving_on_the_same_part() -> None:
    # decode_hardware naming the prefill part (prefill and decode pools of H100s, the common
    # deployment) was read as aggregated serving: one device counted, no KV transfer in TTFT
    agg = rl.serve("llama-3.1-8b", "H100", batch=4)
    dis = rl.serve("llama-3.1-8b", "H100", batch=4, decode_hardware="H100")
    other = rl.serve("llama-3.1-8b", "H100", batch=4, decode_hardware="H200")
    assert dis.devices == other.devices == 2 * agg.devices
    assert dis.ttft == pytest.approx(other.ttft) and dis.ttft > agg.ttft
    assert dis.tpot == pytest.approx(agg.tpot)  # the same part decodes
    slow = rl.serve("llama-3.1-8b", "H100", batch=4, decode_hardware="H100",
                    kv_link_bytes_per_s=1e9)
    assert slow.ttft > dis.ttft
    # the gap is the batch's prompt KV over the link, counted by hand: K and V x 32 layers x 8
    # KV heads x 128 x 2 bytes (bf16) per token, 4 x 1024 prompt tokens, at 1 GB/s
    kv = 2 * 32 * 8 * 128 * 2 * 4 * 1024
    assert slow.ttft - agg.ttft == pytest.approx(kv / 1e9, rel=1e-9)
    # the KV link of a deployment without a decode pool was ignored
    with pytest.raises(SpecError, match="kv_link_bytes_per_s .*decode_hardware="):
        rl.serve("llama-3.1-8b", "H100", kv_link_bytes_per_s=1e9)


def test_levers_only_empty_is_refused() -> None:
    with pytest.raises(SpecError, match="only must name at least one lever"):
        rl.levers("resnet50", "A100", only=[])
    assert len(rl.levers("resnet50", "A100", only=["batch"])) > 0
    # one name is that one family: it was iterated letter by letter ("unknown lever 'b'")
    one = rl.levers("resnet50", "A100", only="batch")
    assert str(one) == str(rl.levers("resnet50", "A100", only=["batch"]))


def test_python_dash_m_roofline_runs_the_cli() -> None:
    # 'python -m roofline' stopped at "No module named roofline.__main__"; errors stay one line
    import subprocess
    import sys

    ok = subprocess.run([sys.executable, "-m", "roofline", "--version"], capture_output=True,
                        text=True)
    assert ok.returncode == 0 and rl.__version__ in ok.stdout + ok.stderr
    bad = subprocess.run([sys.executable, "-m", "roofline", "solve", "resnet50", "H10"],
                         capture_output=True, text=True)
    assert bad.returncode == 2 and bad.stderr.count("\n") == 1 and "Did you mean" in bad.stderr
    assert "Traceback" not in bad.stderr


def test_one_token_output_prints_no_nan() -> None:
    # output_len=1 has no decode step: TPOT 0 with its reason, and MBU said to be n/a rather
    # than printed "nan%"
    text = str(rl.serve("llama-3.1-8b", "H100", output_len=1))
    assert "nan" not in text.lower() and "MBU n/a (no decode step)" in text
    assert "nan" not in str(rl.serve("llama-3.1-8b", "H100", output_len=2)).lower()


def test_requirements_says_the_reference_does_not_fit() -> None:
    # the reference time of a model the reference part cannot hold was printed bare
    from roofline.units import fmt_bytes

    req = rl.requirements("llama-3.1-405b", target_latency=0.1)
    assert req.capacity_bytes > 405e9 * 2  # at least its bf16 weights, by hand
    ref = next(line for line in str(req).splitlines() if line.strip().startswith("reference"))
    assert (f"if it fit (it does not: needs {fmt_bytes(req.capacity_bytes)}, has "
            f"{fmt_bytes(rl.hardware('H100').memory_capacity_bytes)})") in ref
    small = str(rl.requirements("resnet50", target_latency=2e-3))
    assert "it does not" not in small


def test_simulate_serving_prefill_tp_needs_prefill_workers() -> None:
    w = rl.Workload(prompt=rl.lengths("fixed", 500), output=rl.lengths("fixed", 20), rate=2)
    with pytest.raises(SpecError, match="prefill_tp=2 .*prefill_replicas="):
        rl.simulate_serving("llama-3.1-8b", "H100", workload=w, requests=10, prefill_tp=2)
    dis = rl.simulate_serving("llama-3.1-8b", "H100", workload=w, requests=10,
                              prefill_replicas=1, prefill_tp=2)
    assert dis.devices == 3


def test_speculative_knobs_without_a_draft_are_refused() -> None:
    # draft_len / acceptance without draft= were ignored: plain decoding was priced as if the
    # speculative settings had been taken
    for kw in ({"draft_len": 8}, {"acceptance": 0.9}, {"draft_len": 4}):
        name = next(iter(kw))
        with pytest.raises(SpecError, match=f"{name}=.*needs draft="):
            rl.serve("gpt2", "H100", **kw)
    # the defaults with a draft are unchanged: 4 drafted tokens at acceptance 0.7
    a = rl.serve("llama-3.1-8b", "H100", batch=4, draft="llama-3.2-1b")
    b = rl.serve("llama-3.1-8b", "H100", batch=4, draft="llama-3.2-1b", draft_len=4,
                 acceptance=0.7)
    assert a.tpot == b.tpot and a.ttft == b.ttft
    assert rl.serve("gpt2", "H100", prompt_len=128).tpot > 0  # no draft, no knobs: plain


def test_hf_config_unknown_activation_is_refused() -> None:
    # an activation name the importer does not know was priced as the family's usual one (silu
    # for the Llama family, gelu for BERT / GPT-2 / BART) without a word
    from roofline.graphs.importers.hf_config import hf_config_model

    llama = {"model_type": "llama", "hidden_size": 256, "intermediate_size": 512,
             "num_hidden_layers": 2, "num_attention_heads": 4, "vocab_size": 1000}
    for cfg in ({**llama, "hidden_act": "fatrelu"},
                {"model_type": "gpt2", "n_embd": 256, "n_layer": 2, "n_head": 4,
                 "vocab_size": 1000, "activation_function": "fatrelu"},
                {"model_type": "bert", "hidden_size": 256, "intermediate_size": 512,
                 "num_hidden_layers": 2, "num_attention_heads": 4, "vocab_size": 1000,
                 "hidden_act": "fatrelu"}):
        with pytest.raises(SpecError, match=r"(hidden_act|activation_function)='fatrelu' .*"
                                            r"allowed: gelu, .*silu"):
            hf_config_model(cfg, key="x", name="x")
    m = hf_config_model({**llama, "hidden_act": "gelu_pytorch_tanh"}, key="x", name="x")
    assert m.config.act == "gelu_tanh"
    assert hf_config_model(llama, key="x", name="x").config.act == "silu"  # absent: default


def test_hf_config_without_a_context_takes_the_family_default() -> None:
    # an absent max_position_embeddings was 4096 for every decoder family; transformers builds
    # its family's default (LlamaConfig 2,048: a 3,000-token prompt was servable before)
    from roofline.graphs.importers.hf_config import DECODER_MAX_POSITIONS, hf_config_model
    from roofline.graphs.importers.hf_families import SUPPORTED_MODEL_TYPES

    base = {"hidden_size": 256, "intermediate_size": 512, "num_hidden_layers": 2,
            "num_attention_heads": 4, "vocab_size": 1000}
    for mt, ctx in (("llama", 2048), ("mistral", 131_072), ("qwen2", 32_768)):
        m = hf_config_model({**base, "model_type": mt}, key="x", name="x")
        assert m.config.max_positions == ctx, mt
    m = hf_config_model({**base, "model_type": "llama"}, key="x", name="x")
    assert not rl.serve(m, "H100", prompt_len=3000, output_len=8).feasible
    # every family built by the Llama-family reader has its default (no family falls through)
    others = {"gpt2", "bert", "roberta", "vit", "gemma3", "llama4", "mamba", "t5",
              "mt5", "bart", "mbart", "whisper"}
    assert set(DECODER_MAX_POSITIONS) == set(SUPPORTED_MODEL_TYPES) - others


def test_cli_group_size_error_names_the_flags(capsys: pytest.CaptureFixture[str]) -> None:
    # on the command line the refusal named only the Python arguments (weight_precision=)
    from roofline.cli import main

    assert main(["serve", "llama-3.1-8b", "H100", "--group-size", "128"]) == 2
    err = capsys.readouterr().err
    assert "--weight-precision" in err and "--group-size" in err and err.count("\n") == 1
    assert main(["serve", "llama-3.1-8b", "H100", "--group-size", "128",
                 "--weight-precision", "int4"]) == 0


def test_a_dtype_the_part_lacks_train_refuses_solve_and_serve_mark_infeasible() -> None:
    # the documented difference (docs/training.md, docs/solve.md): one sentence, two forms
    from roofline.errors import UnsupportedDtypeError

    why = "has no bf16 peak; it has fp64, fp32, fp16"
    assert why in rl.solve("llama-3.1-8b", "V100", precision="bf16").reason
    s = rl.serve("llama-3.1-8b", "V100", precision="bf16")
    assert not s.feasible and why in s.reason
    with pytest.raises(UnsupportedDtypeError, match=why):
        rl.train("llama-3.1-8b", "V100", precision="bf16", global_batch=64, seq_len=2048)
    with pytest.raises(UnsupportedDtypeError, match="has no fp8 peak"):
        rl.best_parallelism(rl.model("llama-3.1-8b"), rl.cluster("dgx-a100", nodes=1),
                            global_batch=64, seq_len=2048, precision="fp8")


def test_plan_note_reason_is_the_most_common_then_the_first() -> None:
    # ties were broken by a set's order, which string hashing changes from one run to the next
    from roofline.analysis.plan import most_common

    assert most_common(["b", "a", "a", "b", "c"]) == "b"
    assert most_common(["c", "a", "b", "a"]) == "a"
    assert most_common(["x"]) == "x"


def test_disaggregated_steady_state_has_no_prefill_stalls() -> None:
    # a decode pool of its own never stops for a prompt: its steady TPOT is the decode step's
    # (it was priced with every prompt's prefill spread over the decode steps, as aggregated
    # serving is: 22.3 ms against 10.8 ms at batch 64), and its tokens/s are capped by what
    # the prefill pool supplies, n tokens per prompt, a prompt at a time
    n = 128
    a1 = rl.serve("llama-3.1-8b", "H100", batch=1, output_len=n)
    per_prompt = (a1.steady_tpot - a1.tpot) * n  # aggregated batch 1: tpot + prompt / n
    for b in (4, 64):
        d = rl.serve("llama-3.1-8b", "H100", batch=b, output_len=n, decode_hardware="H100")
        assert d.steady_tpot == d.tpot
        assert d.steady_tokens_per_s == pytest.approx(min(b / d.tpot, n / per_prompt),
                                                      rel=1e-9)
        agg = rl.serve("llama-3.1-8b", "H100", batch=b, output_len=n)
        assert agg.steady_tpot > agg.tpot  # aggregated keeps the prefill stalls
    # batch 64 is prefill-bound (the cap binds), batch 4 decode-bound
    d64 = rl.serve("llama-3.1-8b", "H100", batch=64, output_len=n, decode_hardware="H100")
    assert d64.steady_tokens_per_s < 64 / d64.tpot
