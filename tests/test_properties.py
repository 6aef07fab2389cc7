"""Issue 11 §5: property-based tests. Every public function, called with generated arguments
(valid ones mixed with junk of every type), returns a result or raises a RooflineError — never
another exception; results obey the invariants physics and the design state.

Profiles (tests/conftest.py): "ci" by default, ``HYPOTHESIS_PROFILE=deep`` by hand (figures in
docs/validation/robustness.md).
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import assume, example, given, note
from hypothesis import strategies as st

import roofline as rl
from roofline.errors import RooflineError

# -- argument pools ---------------------------------------------------------------------------

JUNK = st.sampled_from([
    None, True, False, 0, -1, 1, 2, 2.5, 3.0, "2", "", "bogus", "fp16", [], [1], (0,), (), {},
    {"a": 1}, math.nan, math.inf, -math.inf, 10**30, 2**63, -(2**31), np.int8(3),
    np.uint8(1), np.int64(-4), np.float32(0.5), np.float64(7.0), np.bool_(True),
    np.array([1, 2]), np.array([[1]]), b"x", 1e-300, 1e308, object(), "\x1b[31mred",
])
LLMS = ["gpt2", "qwen2.5-0.5b", "llama-3.2-1b", "mixtral-8x7b", "gemma-2-9b", "deepseek-v3"]
MODELS = LLMS + ["resnet50", "mobilenet_v2", "bert-base-uncased", "vit-b-16"]
HWS = ["A100", "H100", "gaudi3", "mi300x", "tpu-v5e", "l4", "epyc-9654", "raspberry-pi-5",
       "apple-m2-max", "t4"]
DTYPES = ["fp16", "bf16", "fp8", "int8", "fp32", "tf32", "int4", "fp4", "fp64"]
POS = st.integers(1, 4096)
SMALL = st.integers(1, 64)


def mix(valid: st.SearchStrategy) -> st.SearchStrategy:
    """Mostly valid values, sometimes junk."""
    return st.one_of(valid, valid, valid, JUNK)


def kwargs(**pools: st.SearchStrategy) -> st.SearchStrategy:
    return st.fixed_dictionaries({}, optional={k: mix(v) for k, v in pools.items()})


def call(fn, *args, **kw):
    """The result, or None when the library refused the input with a RooflineError."""
    note(f"{getattr(fn, '__name__', fn)}{args} {kw}")
    try:
        return fn(*args, **kw)
    except RooflineError:
        return None


SOLVE = dict(batch=POS, precision=st.sampled_from(DTYPES),
             preset=st.sampled_from(["default", "bound", "mlsysim", "bogus"]),
             phase=st.sampled_from(["forward", "prefill", "decode"]), seq_len=POS,
             context=POS, fused_attention=st.booleans(), kv_precision=st.sampled_from(DTYPES),
             weight_precision=st.sampled_from(DTYPES), group_size=st.sampled_from([32, 128]),
             fuse=st.booleans(), runtime=st.sampled_from(["eager", "compiled"]))
SERVE = dict(batch=POS, prompt_len=POS, output_len=st.integers(1, 512),
             precision=st.sampled_from(DTYPES), kv_precision=st.sampled_from(DTYPES),
             weight_precision=st.sampled_from(DTYPES), tp=st.sampled_from([1, 2, 4, 8]),
             pp=st.sampled_from([1, 2]), preset=st.sampled_from(["default", "bound", "mlsysim"]),
             engine=st.sampled_from(["trtllm", "vllm", "eager", "vllm-v1"]),
             chunk_size=st.integers(1, 2048), kv_window=st.sampled_from(["ring", "full"]))
#: rl.serve's arguments that go together (each refused alone: test_serve_refuses_...):
#: draft_len and acceptance need a draft model, kv_link_bytes_per_s a decode_hardware, and
#: prefix_cached is below the prompt
DRAFT = dict(draft_len=st.integers(1, 8), acceptance=st.floats(0, 1))
SPLIT = dict(kv_link_bytes_per_s=st.floats(1e9, 1e12))


@st.composite
def serve_kwargs(draw) -> dict:
    """SERVE's pools (each sometimes junk) in combinations rl.serve accepts when their values
    are valid: a draft with its knobs, a decode part with its link, a cached prefix shorter
    than the prompt (1024 tokens by default)."""
    kw = draw(kwargs(**SERVE))
    if draw(st.booleans()):
        kw["draft"] = draw(mix(st.sampled_from([None, "gpt2", "qwen2.5-0.5b"])))
        if kw["draft"] is not None:
            kw.update(draw(kwargs(**DRAFT)))
    if draw(st.booleans()):
        kw["decode_hardware"] = draw(mix(st.sampled_from([None, "A100", "L4"])))
        if kw["decode_hardware"] is not None:
            kw.update(draw(kwargs(**SPLIT)))
    prompt = kw.get("prompt_len", 1024)
    if draw(st.booleans()):
        kw["prefix_cached"] = draw(mix(st.integers(0, prompt - 1) if type(prompt) is int
                                       and 1 <= prompt <= 2**20 else st.integers(0, 512)))
    return kw
TRAIN = dict(micro_batch=st.sampled_from([1, 2, 4]), tp=st.sampled_from([1, 2, 4, 8]),
             pp=st.sampled_from([1, 2, 4]), ep=st.sampled_from([1, 2]),
             interleave=st.sampled_from([1, 2]),
             recompute=st.sampled_from(["none", "selective", "full"]),
             zero=st.integers(0, 3), precision=st.sampled_from(DTYPES),
             nodes=st.integers(1, 4), sequence_parallel=st.booleans(),
             fused_attention=st.booleans(), dropout=st.booleans(), dp_overlap=st.booleans(),
             preset=st.sampled_from(["default", "bound"]))


def finite_or_infeasible(r, *fields: str) -> None:
    if getattr(r, "feasible", False):
        for f in fields:
            v = getattr(r, f)
            assert math.isfinite(v) and v >= 0, (f, v, r)


# -- every public function x generated arguments: a result or a RooflineError -----------------

@given(st.sampled_from(MODELS), st.sampled_from(HWS), kwargs(**SOLVE))
def test_solve_never_raises_a_foreign_exception(m, hw, kw):
    r = call(rl.solve, m, hw, **kw)
    if r is not None:
        finite_or_infeasible(r, "latency", "latency_bound", "memory_footprint")
        assert str(r)


@given(st.sampled_from(MODELS), st.lists(st.sampled_from(HWS), max_size=3),
       kwargs(batch=st.lists(POS, max_size=5), precision=st.lists(st.sampled_from(DTYPES),
                                                                   max_size=3),
              preset=SOLVE["preset"], phase=SOLVE["phase"], seq_len=POS, context=POS,
              fuse=st.booleans(), runtime=SOLVE["runtime"]))
def test_sweep_never_raises_a_foreign_exception(m, hws, kw):
    s = call(rl.sweep, m, hws, **kw)
    if s is not None:
        assert len(s) == len(s["latency"]) and str(s)


@example("gpt2", "A100", {"output_len": 1})  # printing divided by TPOT = 0 (deep run)
@given(st.sampled_from(LLMS + ["resnet50"]), st.sampled_from(HWS), serve_kwargs())
def test_serve_never_raises_a_foreign_exception(m, hw, kw):
    r = call(rl.serve, m, hw, **kw)
    if r is not None:
        finite_or_infeasible(r, "ttft", "tpot", "e2e_latency")
        assert str(r)


#: combinations rl.serve refuses whatever the rest: (the arguments, what the message names)
SERVE_REFUSED = st.one_of(
    st.builds(lambda v: ({"draft_len": v}, "draft_len"), DRAFT["draft_len"]),
    st.builds(lambda v: ({"acceptance": v}, "acceptance"), DRAFT["acceptance"]),
    st.builds(lambda v: ({"draft": None, "draft_len": v}, "draft_len"), DRAFT["draft_len"]),
    st.builds(lambda v: ({"kv_link_bytes_per_s": v}, "kv_link_bytes_per_s"),
              SPLIT["kv_link_bytes_per_s"]),
    st.builds(lambda p, extra: ({"prompt_len": p, "prefix_cached": p + extra}, "prefix_cached"),
              st.integers(1, 2048), st.integers(0, 64)),
    st.builds(lambda e: ({"engine": e}, "engine"), st.sampled_from(["tgi", "sglang"])),
)


@given(st.sampled_from(LLMS[:3]), st.sampled_from(["A100", "H100", "l4"]), SERVE_REFUSED,
       st.fixed_dictionaries({}, optional=dict(
           batch=SMALL, output_len=st.integers(1, 256),
           precision=st.sampled_from(["bf16", "fp16"]), chunk_size=st.integers(1, 2048))))
def test_serve_refuses_what_does_not_go_together(m, hw, bad, kw):
    """What the SERVE pools no longer draw together is refused with a RooflineError naming the
    argument, never another exception nor a silent result; the rest are valid values."""
    args, name = bad
    note(f"serve({m!r}, {hw!r}, **{ {**kw, **args} })")
    with pytest.raises(RooflineError, match=name):
        rl.serve(m, hw, **{**kw, **args})


@given(st.one_of(
    st.builds(lambda c, d: ({"chunk_size": c, "max_batched_tokens": c + d},
                            "max_batched_tokens"), st.integers(1, 4096), st.integers(1, 4096)),
    st.builds(lambda d: ({"max_batched_tokens": 2048 + d}, "max_batched_tokens"),
              st.integers(1, 4096)),
    st.builds(lambda v: ({"kv_link_bytes_per_s": v}, "kv_link_bytes_per_s"),
              SPLIT["kv_link_bytes_per_s"]),
    st.builds(lambda t: ({"prefill_tp": t}, "prefill_tp"), st.sampled_from([1, 2, 4]))))
def test_simulate_serving_refuses_what_does_not_go_together(bad):
    """simulate_serving's arguments that were ignored in some combination (a max_batched_tokens
    beside a different chunk_size, a KV link or a prefill TP without prefill workers): a
    RooflineError naming the argument, before anything is simulated."""
    args, name = bad
    wl = rl.Workload(prompt=64, output=8, rate=1.0)
    with pytest.raises(RooflineError, match=name):
        rl.simulate_serving("gpt2", "A100", workload=wl, requests=5, **args)


@given(st.sampled_from(LLMS[:3]), st.sampled_from(HWS[:5]),
       kwargs(batch=st.lists(SMALL, max_size=4), context=st.lists(POS, max_size=4),
              precision=st.sampled_from(DTYPES), tp=st.sampled_from([1, 2]),
              preset=st.sampled_from(["default", "bound", "mlsysim"]),
              engine=SERVE["engine"], kv_window=SERVE["kv_window"]))
def test_serve_sweep_never_raises_a_foreign_exception(m, hw, kw):
    from roofline.scenarios.serving import serve_sweep

    kw.setdefault("batch", [1])
    kw.setdefault("context", [128])
    out = call(serve_sweep, m, hw, **kw)
    if out is not None:
        assert out["tpot"].ndim == 4


@given(st.sampled_from(LLMS[:3]), st.sampled_from(HWS[:4]),
       kwargs(prompt_len=st.integers(1, 1024), output_len=st.integers(1, 256),
              ttft_slo=st.floats(1e-3, 10), tpot_slo=st.floats(1e-4, 1),
              precision=st.sampled_from(DTYPES[:4]), tp=st.sampled_from([1, 2]),
              engine=SERVE["engine"]))
def test_serving_capacity_never_raises_a_foreign_exception(m, hw, kw):
    for k, v in (("prompt_len", 256), ("output_len", 32), ("ttft_slo", 1.0), ("tpot_slo", 0.1)):
        kw.setdefault(k, v)
    c = call(rl.serving_capacity, m, hw, **kw)
    if c is not None:
        assert c.rate_per_s >= 0 and math.isfinite(c.rate_per_s)


@given(st.sampled_from(["gpt2", "llama-3.2-1b", "mixtral-8x7b"]),
       st.sampled_from(["dgx-h100", "dgx-a100", "tpu-v5p-pod"]),
       st.sampled_from([8, 16, 64]), st.sampled_from([128, 512, 2048]), kwargs(**TRAIN))
def test_train_never_raises_a_foreign_exception(m, cl, gb, seq, kw):
    r = call(rl.train, m, cl, global_batch=gb, seq_len=seq, **kw)
    if r is not None:
        finite_or_infeasible(r, "step_time", "tokens_per_s")
        assert str(r)


@given(st.sampled_from(["gpt2", "llama-3.2-1b"]), st.sampled_from(["dgx-h100", "dgx-a100"]),
       kwargs(micro_batches=st.lists(st.sampled_from([1, 2, 4, 8]), max_size=3),
              interleaves=st.lists(st.sampled_from([1, 2]), max_size=2),
              recomputes=st.lists(st.sampled_from(["none", "selective", "full"]), max_size=3),
              zeros=st.lists(st.integers(0, 3), max_size=3), max_tp=st.sampled_from([1, 2, 8]),
              top=st.integers(1, 50), include_infeasible=st.booleans(),
              precision=st.sampled_from(DTYPES[:3])))
def test_best_parallelism_never_raises_a_foreign_exception(m, cl, kw):
    t = call(rl.best_parallelism, m, cl, global_batch=64, seq_len=512, **kw)
    if t is not None:
        assert len(t) <= kw.get("top", 20) if isinstance(kw.get("top"), int) else True
        assert np.isfinite(np.asarray(t["step_time"], dtype=float)).all()


@given(JUNK, st.sampled_from(["model", "hardware", "cluster", "precision"]))
def test_resolvers_never_raise_a_foreign_exception(junk, which):
    call(getattr(rl, which), junk)


@given(st.text(max_size=300))
def test_resolvers_take_any_text(s):
    for which in ("model", "hardware", "cluster", "precision"):
        call(getattr(rl, which), s)


@given(kwargs(weights=st.sampled_from(DTYPES), kv=st.sampled_from(DTYPES),
              activations=st.sampled_from(DTYPES), group_size=st.integers(1, 4096)),
       st.sampled_from(DTYPES))
def test_precision_never_raises_a_foreign_exception(kw, spec):
    p = call(rl.precision, spec, **kw)
    if p is not None:
        assert p.weight_bytes > 0


# -- invariants --------------------------------------------------------------------------------

VALID_SOLVE = st.fixed_dictionaries(
    {"batch": st.integers(1, 512), "precision": st.sampled_from(["fp16", "bf16", "fp32"])},
    optional={"preset": st.sampled_from(["default", "bound"]),
              "runtime": st.sampled_from(["eager", "compiled"]), "fuse": st.booleans()})
ALL_HW = rl.list_hardware()


@given(st.sampled_from(MODELS), st.sampled_from(ALL_HW), VALID_SOLVE)
def test_solve_invariants(m, hw, kw):
    r = call(rl.solve, m, hw, **kw)
    assume(r is not None and math.isfinite(r.latency))
    assert r.latency_bound > 0 and r.latency > 0
    assert 0 <= r.mfu <= 1 + 1e-9
    # throughput within what peak compute allows: flops per second <= the dense peak
    assert r.flops / r.latency <= r.peak_flops_per_s * (1 + 1e-9)


@example("mobilenet_v2", "mi300x", {"batch": 154, "precision": "fp16"})  # found by the deep run
@given(st.sampled_from(MODELS), st.sampled_from(ALL_HW), VALID_SOLVE)
def test_solve_estimate_never_undercuts_its_bound(m, hw, kw):
    r = call(rl.solve, m, hw, **kw)
    assume(r is not None and math.isfinite(r.latency))
    assert r.latency >= r.latency_bound * (1 - 1e-9)


@given(st.sampled_from(MODELS), st.sampled_from(HWS), st.integers(1, 256), st.integers(1, 256),
       st.sampled_from(["default", "bound"]))
def test_latency_is_monotone_in_batch(m, hw, b1, b2, preset):
    lo, hi = sorted((b1, b2))
    a = call(rl.solve, m, hw, batch=lo, preset=preset)
    b = call(rl.solve, m, hw, batch=hi, preset=preset)
    assume(a is not None and b is not None and math.isfinite(a.latency))
    assert b.latency >= a.latency * (1 - 1e-9)


@given(st.sampled_from(LLMS), st.sampled_from(HWS), st.integers(1, 4000), st.integers(1, 4000),
       st.integers(1, 64))
def test_decode_step_is_monotone_in_context(m, hw, s1, s2, batch):
    lo, hi = sorted((s1, s2))
    a = call(rl.solve, m, hw, phase="decode", context=lo, batch=batch)
    b = call(rl.solve, m, hw, phase="decode", context=hi, batch=batch)
    assume(a is not None and b is not None and math.isfinite(a.latency))
    assert b.latency >= a.latency * (1 - 1e-9)


@given(st.sampled_from(LLMS[:4]), st.sampled_from(HWS[:6]), st.integers(1, 64),
       st.integers(1, 1024), st.integers(1, 256), st.integers(1, 256))
def test_serve_is_monotone_in_output_and_prompt_length(m, hw, batch, prompt, n1, n2):
    lo, hi = sorted((n1, n2))
    a = call(rl.serve, m, hw, batch=batch, prompt_len=prompt, output_len=lo)
    b = call(rl.serve, m, hw, batch=batch, prompt_len=prompt, output_len=hi)
    # (a longer output can pass the model's max_position_embeddings: then it cannot run)
    assume(a is not None and b is not None and math.isfinite(a.e2e_latency)
           and math.isfinite(b.e2e_latency))
    assert b.e2e_latency >= a.e2e_latency * (1 - 1e-9)
    c = call(rl.serve, m, hw, batch=batch, prompt_len=prompt + 1, output_len=lo)
    if c is not None and math.isfinite(c.ttft):
        assert c.ttft >= a.ttft * (1 - 1e-9)


@given(st.sampled_from(MODELS), st.lists(st.sampled_from(HWS), min_size=1, max_size=3),
       st.lists(st.integers(1, 512), min_size=1, max_size=4),
       st.sampled_from(["fp16", "bf16", "int8"]), st.sampled_from(["default", "bound"]))
def test_sweep_equals_solve(m, hws, batches, prec, preset):
    s = call(rl.sweep, m, hws, batch=batches, precision=prec, preset=preset)
    assume(s is not None)
    for row in s.to_dicts()[:6]:
        r = rl.solve(m, row["hardware"] if row["hardware"] in hws else
                     hws[[rl.hardware(h).name for h in hws].index(row["hardware"])],
                     batch=row["batch"], precision=prec, preset=preset)
        if not math.isfinite(r.latency):
            assert not row["feasible"]
            continue
        assert row["latency"] == pytest.approx(r.latency, rel=1e-9)
        assert row["feasible"] == r.feasible


@given(st.sampled_from(["gpt2", "qwen2.5-0.5b", "llama-3.2-1b"]),
       st.sampled_from(["H100", "A100", "L4", "mi300x"]), st.integers(1, 64),
       st.integers(2, 4000))
def test_serve_sweep_equals_serve(m, hw, batch, context):
    from roofline.scenarios.serving import serve_sweep

    out = serve_sweep(m, hw, batch=[batch], context=[context])
    s = call(rl.serve, m, hw, batch=batch, prompt_len=context - 1, output_len=2)
    assume(s is not None and math.isfinite(s.tpot))
    assert out["tpot"][0, 0, 0, 0] == pytest.approx(s.tpot, rel=1e-9)


@given(st.sampled_from(["gpt2", "llama-3.2-1b"]), st.sampled_from(["dgx-h100", "dgx-a100"]),
       st.sampled_from([1, 2]), st.integers(0, 4))
def test_train_equals_its_search_row(m, cl, nodes, pick):
    t = rl.best_parallelism(m, cl, global_batch=64, seq_len=512, nodes=nodes, top=5)
    assume(len(t) > pick)
    row = t[pick]
    r = rl.train(m, cl, global_batch=64, seq_len=512, nodes=nodes, tp=row["tp"], pp=row["pp"],
                 dp=row["dp"], ep=row["ep"], micro_batch=row["micro_batch"],
                 interleave=row["interleave"], recompute=row["recompute"], zero=row["zero"])
    assert r.step_time == pytest.approx(row["step_time"], rel=1e-9)


# -- equal specs -> equal results across cache states (issue 11 §1, §5) ------------------------

HW_TEXT = """schema = 1
key = "fuzzhw"
name = "Fuzz accelerator"
[sources]
ds = "generated by the property test"
[peak]
bf16 = {{ value = {peak}, unit = "TFLOP/s", source = "ds" }}
fp16 = {{ value = {peak}, unit = "TFLOP/s", source = "ds" }}
[[memory]]
name = "HBM"
capacity = {{ value = 80, unit = "GB", source = "ds" }}
bandwidth = {{ value = {bw}, unit = "TB/s", source = "ds" }}
[links.scale_up]
bandwidth = {{ value = 450, unit = "GB/s", source = "ds" }}
"""


@given(st.lists(st.tuples(st.sampled_from([100, 400, 1000]), st.sampled_from([0.5, 2, 5])),
                min_size=2, max_size=5))
def test_equal_specs_give_equal_results_across_cache_states(tmp_path_factory, specs):
    d = tmp_path_factory.mktemp("hw")
    seen: dict[tuple, tuple] = {}
    for i, (peak, bw) in enumerate(specs):
        p = d / f"hw{i}.toml"  # the same key in every file: only the content differs
        p.write_text(HW_TEXT.format(peak=peak, bw=bw))
        hw = rl.hardware(p)
        s = rl.serve("gpt2", hw, batch=4, prompt_len=64, output_len=8)
        r = rl.solve("gpt2", hw, batch=4)
        got = (s.tpot, s.ttft, r.latency)
        fresh = seen.setdefault((peak, bw), got)
        assert got == fresh  # equal specs: equal results, whatever was priced in between
    for (k1, v1), (k2, v2) in zip(list(seen.items()), list(seen.items())[1:]):
        if k1[1] != k2[1]:  # a different memory bandwidth moves the decode step
            assert v1[0] != v2[0]


def test_train_sees_a_changed_device_peak():
    c = rl.cluster("dgx-h100")
    fast = rl.train("gpt2", c, global_batch=64, seq_len=512)
    hw = c.device
    slow_dev = hw.with_peak("bf16", hw.peak("bf16") / 10, "test: a tenth of the peak")
    from dataclasses import replace

    slow = rl.train("gpt2", replace(c, device=slow_dev), global_batch=64, seq_len=512)
    assert slow.step_time > fast.step_time
    assert slow.mfu <= 1


# -- spec files mutated field by field -----------------------------------------------------------

def _leaves(doc, path=()):
    """(path, value) of every scalar in a parsed TOML/JSON document."""
    if isinstance(doc, dict):
        for k, v in doc.items():
            yield from _leaves(v, (*path, k))
    elif isinstance(doc, list):
        for i, v in enumerate(doc):
            yield from _leaves(v, (*path, i))
    else:
        yield path, doc


def _set(doc, path, value):
    import copy

    out = copy.deepcopy(doc)
    node = out
    for k in path[:-1]:
        node = node[k]
    node[path[-1]] = value
    return out


MUTANTS = st.one_of(
    st.floats(allow_nan=True, allow_infinity=True), st.integers(-(2**63), 2**63),
    st.sampled_from([0, -1, 1e-300, 1.7e308, -6.5e16, True, "", "x", "2", [], {}, [1, 2]]),
    st.text(max_size=20))
HW_ZOO = ["a100-sxm4-80gb", "h100-sxm5", "gaudi3", "mi300x", "tpu-v5e", "epyc-9654", "l4"]


@given(st.sampled_from(HW_ZOO), st.data())
def test_hardware_spec_mutated_field_by_field(tmp_path_factory, key, data):
    import tomllib

    from roofline._data import DATA

    path = next((DATA / "hardware").rglob(f"{key}.toml"))
    doc = tomllib.loads(path.read_text())
    leaves = [p for p, _ in _leaves(doc)]
    where = data.draw(st.sampled_from(leaves))
    value = data.draw(MUTANTS)
    note(f"{key}: {'.'.join(map(str, where))} = {value!r}")
    from roofline.specs.hardware import parse_hardware

    try:
        hw = parse_hardware(_set(doc, where, value), origin="mutant.toml")
    except RooflineError:
        return
    r = call(rl.solve, "gpt2", hw, batch=4, precision=hw.dtypes[0])
    if r is not None and r.feasible:
        assert math.isfinite(r.latency) and r.latency > 0
        assert r.memory_footprint >= 0


HF_BASE = {"model_type": "llama", "hidden_size": 512, "num_attention_heads": 8,
           "num_key_value_heads": 2, "num_hidden_layers": 4, "intermediate_size": 1376,
           "vocab_size": 32000, "max_position_embeddings": 2048, "sliding_window": 256,
           "num_local_experts": 4, "num_experts_per_tok": 2, "tie_word_embeddings": False}


@given(st.sampled_from(sorted(HF_BASE)), MUTANTS)
def test_hf_config_mutated_field_by_field(field, value):
    from roofline.graphs.importers.hf_config import from_hf_config
    from roofline.graphs.model import transformer_model

    note(f"{field} = {value!r}")
    try:
        cfg = from_hf_config({**HF_BASE, field: value}, name="mutant")
    except RooflineError:
        return
    m = transformer_model(cfg, key="mutant", name="mutant")
    for phase in ("prefill", "decode"):
        r = call(rl.solve, m, "H100", batch=64, phase=phase, seq_len=128, context=128)
        if r is not None and r.feasible:
            assert math.isfinite(r.latency) and r.latency > 0
            assert r.memory_footprint > 0  # vocab_size -6.5e16 gave -3.35e19 B, feasible


@example("qwen2.5-0.5b", "gaudi3", 167, 2, 2, 2, "eager")  # the reproducer
@given(st.sampled_from(LLMS[:4]), st.sampled_from(ALL_HW), st.integers(1, 256),
       st.integers(1, 2048), st.integers(1, 64), st.sampled_from([1, 2]),
       st.sampled_from(["trtllm", "vllm", "eager"]))
def test_serve_estimate_never_undercuts_its_bound(m, hw, batch, prompt, out, tp, engine):
    s = call(rl.serve, m, hw, batch=batch, prompt_len=prompt, output_len=out, tp=tp,
             engine=engine)
    assume(s is not None and s.feasible)
    for k, v in s.phase_seconds.items():
        assert v >= -1e-12 * s.e2e_latency, (k, v)
