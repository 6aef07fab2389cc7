"""Issue 11 §2: every public function checks its arguments at the boundary.

Each reproducer from the issue raised a builtin exception (TypeError, OverflowError,
ZeroDivisionError, OSError...) or silently took a wrong value; each must now raise a
RooflineError naming the argument, the value and what is allowed.
"""

import inspect
import math

import numpy as np
import pytest

import roofline as rl
from roofline import _args as A
from roofline.errors import RooflineError, SpecError

TRAIN = dict(global_batch=8, seq_len=128)
BP = dict(global_batch=8, seq_len=128)

# (call, words the message must contain: the argument, the value shown, what is allowed)
REPRODUCERS = {
    "solve precision list": (lambda: rl.solve("resnet50", "A100", precision=["fp16"]),
                             ["precision", "['fp16']", "dtype name"]),
    "serve precision array": (lambda: rl.serve("gpt2", "A100", precision=np.array(["fp16"])),
                              ["precision", "array", "dtype name"]),
    "train precision dict": (lambda: rl.train("gpt2", "dgx-h100", **TRAIN, precision={}),
                             ["precision", "{}", "dtype name"]),
    "precision() list": (lambda: rl.precision(["bf16"]), ["spec", "['bf16']", "dtype name"]),
    "fused_attention list": (lambda: rl.solve("gpt2", "A100", fused_attention=[]),
                             ["fused_attention", "[]", "True or False"]),
    "serve engine list": (lambda: rl.serve("gpt2", "A100", engine=[]),
                          ["engine", "[]", "serving-engine name"]),
    "phase array": (lambda: rl.solve("gpt2", "A100", phase=np.array(["decode"])),
                    ["phase", "array", "'forward', 'prefill', 'decode'"]),
    "serve tp None": (lambda: rl.serve("gpt2", "A100", tp=None),
                      ["tp", "None", "positive integer"]),
    "serve chunk_size tuple": (lambda: rl.serve("gpt2", "A100", chunk_size=()),
                               ["chunk_size", "()", "positive integer"]),
    "kv_link text": (lambda: rl.serve("gpt2", "A100", decode_hardware="H100",
                                      kv_link_bytes_per_s="x"),
                     ["kv_link_bytes_per_s", "'x'", "finite number"]),
    "decode context text": (lambda: rl.solve("gpt2", "A100", phase="decode", context="5"),
                            ["context", "'5'", "positive integer"]),
    "train dp_overlap None": (lambda: rl.train("gpt2", "dgx-h100", **TRAIN, dp_overlap=None),
                              ["dp_overlap", "None", "True or False"]),
    "sweep empty precision": (lambda: rl.sweep("gpt2", "A100", batch=[1, 2], precision=[]),
                              ["precision", "at least 1", "got 0"]),
    "micro_batches zero": (lambda: rl.best_parallelism("gpt2", "dgx-h100", **BP,
                                                       micro_batches=(0,)),
                           ["micro_batches[0]", ">= 1", "got 0"]),
    "recomputes bogus": (lambda: rl.best_parallelism("gpt2", "dgx-h100", **BP,
                                                     recomputes=("bogus",)),
                         ["recomputes[0]", "'bogus'", "'selective'"]),
    "micro_batches scalar": (lambda: rl.best_parallelism("gpt2", "dgx-h100", **BP,
                                                         micro_batches=4),
                             ["micro_batches", "4", "list or tuple"]),
    "top nan": (lambda: rl.best_parallelism("gpt2", "dgx-h100", **BP, top=math.nan),
                ["top", "nan", "positive integer"]),
    "top negative": (lambda: rl.best_parallelism("gpt2", "dgx-h100", **BP, top=-1),
                     ["top", ">= 1", "-1"]),
    "zeros seven": (lambda: rl.best_parallelism("gpt2", "dgx-h100", **BP, zeros=(7,)),
                    ["zeros[0]", "7", "0, 1, 2, 3"]),
    "model NUL path": (lambda: rl.model("nul\x00.toml"), ["model", "nul"]),
    "model long path": (lambda: rl.model("a" * 300 + ".toml"), ["model", "too long"]),
    "model long json path": (lambda: rl.model("/tmp/" + "b" * 300 + ".json"),
                             ["model", "too long"]),
    "ttft_slo bool": (lambda: rl.serving_capacity("gpt2", "A100", prompt_len=128,
                                                  output_len=16, ttft_slo=True, tpot_slo=0.1),
                      ["ttft_slo", "True", "finite number"]),
    "batch text": (lambda: rl.solve("gpt2", "A100", batch="2"),
                   ["batch", "'2'", "positive integer"]),
    "batch fraction": (lambda: rl.solve("gpt2", "A100", batch=2.9),
                       ["batch", "2.9", "positive integer"]),
    "batch bool": (lambda: rl.serve("gpt2", "A100", batch=True),
                   ["batch", "True", "positive integer"]),
    "batch huge": (lambda: rl.solve("gpt2", "A100", batch=10**30),
                   ["batch", "largest accepted", "1,073,741,824"]),
    "sweep batch array 2-D": (lambda: rl.sweep("gpt2", "A100", batch=np.ones((2, 2), int)),
                              ["batch", "1-D", "(2, 2)"]),
    "serve_sweep context zero": (lambda: rl.scenarios.serving.serve_sweep(
        "gpt2", "A100", batch=[1], context=np.array([4, 0])), ["context[1]", ">= 1", "0"]),
    "unknown keyword": (lambda: rl.solve("gpt2", "A100", batchh=2),
                        ["batchh", "Did you mean 'batch'"]),
    "missing required": (lambda: rl.train("gpt2", "dgx-h100", seq_len=128),
                         ["global_batch", "missing"]),
    "cluster nodes float": (lambda: rl.cluster("dgx-h100", nodes=1.5),
                            ["nodes", "1.5", "positive integer"]),
    "train zero text": (lambda: rl.train("gpt2", "dgx-h100", **TRAIN, zero="1"),
                        ["zero", "'1'", "0, 1, 2, 3"]),
    "acceptance above one": (lambda: rl.serve("gpt2", "A100", draft="gpt2", acceptance=1.5),
                             ["acceptance", "1.5", "[0, 1]"]),
    "plot dpi text": (lambda: rl.plot_roofline("A100", dpi="high"), ["dpi", "'high'"]),
    "measure device": (lambda: rl.measure(device="tpu", progress=False),
                       ["device", "'tpu'", "'cpu'"]),
    "validate min_time negative": (lambda: rl.validate("A100", min_time_s=-1.0,
                                                       progress=False),
                                   ["min_time_s", "-1.0", "finite number"]),
}


@pytest.mark.parametrize("case", list(REPRODUCERS))
def test_reproducer_raises_a_roofline_error_naming_argument_value_and_rule(case):
    call, words = REPRODUCERS[case]
    with pytest.raises(RooflineError) as e:
        call()
    msg = str(e.value)
    for w in words:
        assert w in msg, (case, w, msg)


def test_numpy_scalars_are_taken_as_python_numbers():
    # pp=np.uint8(1) overflowed (OverflowError) inside numpy arithmetic; it is the int 1
    a = rl.serve("gpt2", "A100", batch=np.int64(4), pp=np.uint8(1), tp=np.int32(1),
                 prompt_len=np.int16(64), output_len=np.uint16(8))
    b = rl.serve("gpt2", "A100", batch=4, pp=1, tp=1, prompt_len=64, output_len=8)
    assert a.tpot == b.tpot and a.ttft == b.ttft and a.tp == 1 and type(a.tp) is int
    r = rl.serving_capacity("gpt2", "A100", prompt_len=64, output_len=8,
                            ttft_slo=np.float32(0.5), tpot_slo=np.float64(0.05))
    assert r.rate_per_s > 0


def test_integral_floats_are_taken_fractional_ones_refused():
    assert rl.solve("gpt2", "A100", batch=2.0).batch == 2
    with pytest.raises(SpecError, match="2.5"):
        rl.solve("gpt2", "A100", batch=2.5)


def test_errors_are_value_and_type_errors():
    # familiar except clauses keep working
    with pytest.raises(ValueError):
        rl.solve("gpt2", "A100", batch="2")
    with pytest.raises(TypeError):
        rl.solve("gpt2", "A100", batch="2")


def test_scalar_and_sequence_forms_of_sweep_arguments_agree():
    a = rl.sweep("gpt2", "A100", batch=4, precision="fp16")
    b = rl.sweep("gpt2", "A100", batch=(4,), precision=["fp16"])
    c = rl.sweep("gpt2", "A100", batch=np.array([4]), precision=("fp16",))
    assert a["latency"][0] == b["latency"][0] == c["latency"][0]


PUBLIC = ["solve", "sweep", "serve", "serving_capacity", "train", "best_parallelism", "model",
          "hardware", "cluster", "precision", "measure", "validate", "plot_roofline",
          "simulate_serving", "plan_serving"]


ELSEWHERE = {"plot_roofline": "roofline.viz.roofline",
             "serve_sweep": "roofline.scenarios.serving",
             "from_onnx": "roofline.graphs.importers.onnx_import",
             "from_torch": "roofline.graphs.importers.torch_import"}


@pytest.mark.parametrize("name", PUBLIC + ["serve_sweep", "from_onnx", "from_torch"])
def test_every_public_function_checks_every_parameter(name):
    import importlib

    if name in ("from_onnx", "from_torch"):
        pytest.importorskip("onnx" if name == "from_onnx" else "torch")
    fn = getattr(importlib.import_module(ELSEWHERE[name]), name) if name in ELSEWHERE \
        else getattr(rl, name)
    rules = getattr(fn, "__checked_rules__", None)
    assert rules is not None, f"{name} has no @checked argument rules"
    params = [p for p in inspect.signature(fn).parameters.values()
              if p.kind not in (p.VAR_KEYWORD, p.VAR_POSITIONAL)]
    assert {p.name for p in params} == set(rules)


def test_serve_sweep_checks_its_arguments():
    from roofline.scenarios.serving import serve_sweep

    assert hasattr(serve_sweep, "__checked_rules__")
    with pytest.raises(RooflineError, match="tp"):
        serve_sweep("gpt2", "A100", batch=[1], context=[8], tp=0)


def test_rules_reject_what_they_should():
    assert A.check_count("n", np.int8(3)) == 3
    for bad in (True, "3", 3.5, None, [3], math.inf, math.nan, np.bool_(True)):
        with pytest.raises(A.ArgumentError):
            A.check_count("n", bad)
    r = A.real(0, 1, lo_open=False)
    assert r("x", np.float32(0.5)) == 0.5 and r("x", 0) == 0.0
    for bad in (-0.1, 1.1, math.nan, math.inf, True, "0.5", None):
        with pytest.raises(A.ArgumentError):
            r("x", bad)
    assert A.flag("f", np.bool_(False)) is False
    for bad in (0, 1, "True", None):
        with pytest.raises(A.ArgumentError):
            A.flag("f", bad)
    c = A.choice("ring", "full")
    with pytest.raises(A.ArgumentError, match="Did you mean 'ring'"):
        c("kv_window", "rign")
