"""The one memory-fit check (engine/memory.py): the same rule and the same message (decimal bytes,
units.fmt_bytes) in solve, sweep, serve, serve_sweep, train and best_parallelism."""

from __future__ import annotations

import numpy as np

import roofline as rl
from roofline.engine.memory import fit_reason, fits, memory_fit
from roofline.scenarios.serving import serve_sweep

GiB = 2**30


def test_message_by_hand() -> None:
    parts = {"weights": 2.5 * GiB, "kv_cache": 0.5 * GiB, "workspace": 0.0}
    ok, total, why = memory_fit(parts, 2 * GiB, "Box")
    # 2.5 + 0.5 = 3 GiB = 3.221e9 B needed, 2 GiB = 2.147e9 B there (decimal prefixes, 4
    # significant digits); zero parts are not listed
    assert (ok, total) == (False, 3 * GiB)
    assert why == ("needs 3.221 GB per device, Box has 2.147 GB (weights 2.684 GB, KV cache "
                   "536.9 MB)")
    assert fit_reason(0.25e9, 0.125e9, "Tiny") == "needs 250 MB per device, Tiny has 125 MB"
    assert memory_fit({"weights": 2.0 * GiB}, 2 * GiB, "Box") == (True, 2 * GiB, "")  # == fits
    assert fits(np.array([1.0, 3.0]) * GiB, 2 * GiB).tolist() == [True, False]


def test_solve_and_sweep_say_the_same() -> None:
    # Llama-3.1-70B in fp16: 70.55e9 parameters × 2 B = 141.1 GB of weights on a 16 GiB
    # (17.18 GB) T4
    r = rl.solve("llama-3.1-70b", "T4", batch=1, precision="fp16", seq_len=128)
    assert not r.feasible
    assert r.reason.startswith("needs 142.2 GB per device, NVIDIA T4 has 17.18 GB (weights "
                               "141.1 GB, ")
    row = rl.sweep("llama-3.1-70b", ["T4"], batch=[1], precision="fp16",
                   seq_len=128).to_dicts()[0]
    assert not row["feasible"] and row["reason"] == r.reason


def test_serve_and_train_use_it() -> None:
    s = rl.serve("llama-3.1-70b", "H100", batch=512, prompt_len=4096)
    assert not s.feasible
    assert s.reason.startswith("needs ") and " per device, NVIDIA H100 SXM5 80GB has 85.9 GB (" \
        in s.reason and s.reason.endswith("; the largest batch that fits is 0")
    t = rl.train(rl.model("gpt3-175b"), rl.cluster("dgx-a100", nodes=1), global_batch=8,
                 seq_len=2048, tp=8)
    assert not t.feasible and t.reason.startswith("needs 404.2 GB per device, NVIDIA A100 SXM4 "
                                                  "80GB has 85.9 GB (weights 43.71 GB, ")


def test_serve_sweep_fit_is_the_same_rule() -> None:
    """serve_sweep fits when weights + KV + workspace <= capacity, as fits() says for the
    same sums (its footprint has no activation term: decode activations are small)."""
    out = serve_sweep("llama-3.1-8b", "H100", batch=[1, 4096], context=[8192])
    assert out["fits"][0, 0, :, 0].tolist() == [True, False]
