"""Byte-identity check for speed work: print one line per configuration with a digest of its
outputs, so that a tree before and after a speed change can be compared with ``diff``. Run by
hand:

    python benchmarks/outputs_digest.py train > /tmp/train_before.txt
    python benchmarks/outputs_digest.py simulate > /tmp/sim_before.txt
    python benchmarks/outputs_digest.py solve > /tmp/solve_before.txt
    python benchmarks/outputs_digest.py train --no-bands > /tmp/train_numbers.txt

``--stable``: each result's digest covers only its declared fields (``STABLE_FIELDS``, the
``to_dict()`` keys each result type had when they were declared), not ``str(result)`` and not a
field added since; so a change that adds a field to a result (which changes every default
digest) leaves every ``--stable`` line as it was when no declared number moved. A declared field
that is gone raises a KeyError (a renamed field is a change to say, not to hide). A new field is
covered once someone adds it to its set, in a commit of its own: from that commit on the
``--stable`` lines include it (compare trees on the same side of it). Combine with
``--no-bands`` to leave out the bands as well.

``--no-bands``: every uncertainty band switched off while the lines are made
(``roofline.uncertainty.band`` returns None, so no result has a band: no
"(80 %: …)" in ``str`` and an empty ``uncertainty`` in ``to_dict()``); a change that moves only
bands (a new validation row, a refit of the residuals) then leaves every line as it was, which
proves that no number moved.

``train``: 93 ``rl.train`` configurations (dense, MoE, fp8, LoRA, cp, interleave, every
recompute and ZeRO level, unequal stages, eager elementwise, bf16 optimizer, infeasible splits,
the same model passed as a name, as one Model object and as an equal copy of it); each line
is a SHA-256 of ``str(result)`` and ``repr(result.to_dict())``, or the error's text.
``simulate``: ``simulate_serving`` configurations (chunked and whole prompts, both KV
policies, three engines, loads below and above capacity), each a SHA-256 of the pickled
``to_dict()``. ``solve``: ``rl.solve`` and ``rl.serve`` on zoo parts and on copies of one part
(pickled, replaced, its 16-bit peaks edited), each a SHA-256 of ``str`` and ``repr(to_dict())``.
"""

from __future__ import annotations

import contextlib
import hashlib
import pickle
import sys
from collections.abc import Iterator
from typing import Any

import roofline as rl


def _digest(b: bytes) -> str:
    return hashlib.sha256(b).hexdigest()[:16]


#: per result type, the ``to_dict()`` fields the ``--stable`` digest covers (declared in
#: session 31; see the module docstring before adding one)
STABLE_FIELDS: dict[str, tuple[str, ...]] = {
    "train": (
        "model", "cluster", "device", "devices", "precision", "preset", "global_batch",
        "seq_len", "micro_batch", "microbatches", "tp", "pp", "dp", "ep", "etp", "interleave",
        "recompute", "zero", "sequence_parallel", "step_time", "tokens_per_s", "mfu", "hfu",
        "model_flops_per_step", "hardware_flops_per_step", "breakdown", "t_fill",
        "memory_per_device", "memory_capacity", "feasible", "reason", "power_w",
        "other_power_w", "price_per_hour", "region", "pue", "optimizer", "pp_stages",
        "lora_rank", "lora_targets", "cp", "pp_overlap", "trainable_params", "conv_layout",
        "conv_layout_assumed", "warnings", "samples_per_s", "energy_per_step", "uncertainty"),
    "serve": (
        "model", "hardware", "batch", "prompt_len", "output_len", "precision", "preset",
        "engine", "kv_window", "tp", "pp", "ep", "devices", "ttft", "tpot", "e2e_latency",
        "tokens_per_s", "tokens_per_s_per_device", "steady_tpot", "steady_tokens_per_s", "mbu",
        "mfu", "kv_cache_bytes", "memory_breakdown", "memory_capacity", "max_batch", "feasible",
        "reason", "phase_seconds", "t_fill", "shares", "notes", "client_time",
        "price_per_hour", "region", "pue", "uncertainty"),
    "solve": (
        "model", "hardware", "hardware_key", "batch", "precision", "preset", "phase", "seq_len",
        "context", "latency", "latency_bound", "t_compute", "t_memory", "t_overhead", "t_fill",
        "throughput", "tokens_per_s", "bottleneck", "flops", "bytes", "arithmetic_intensity",
        "ridge_point", "ridge_point_effective", "peak_flops_per_s", "bandwidth_bytes_per_s",
        "mfu", "mbu", "memory_footprint", "memory_breakdown", "memory_capacity", "feasible",
        "reason", "energy", "power_model", "warnings", "client_time", "price_per_hour",
        "region", "pue", "uncertainty"),
    "simulate": (
        "layout", "devices", "requests", "rate", "ttft", "tpot", "e2e", "queue_delay",
        "throughput_tokens_per_s", "tokens_per_s_per_device", "completed_rate", "overloaded",
        "overload_reason", "goodput", "goodput_fraction", "slo", "preemptions", "rejected",
        "iterations", "mean_in_system", "littles_rhs", "mean_batch", "time_split", "notes",
        "uncertainty"),
}
#: set by ``--stable``
STABLE = False


def result_digest(x: Any, kind: str, stable: bool | None = None) -> str:
    """The digest of one result: ``str`` and ``repr(to_dict())`` (simulate: the pickled
    ``to_dict()``), or with ``stable`` (default: the ``--stable`` flag) its declared fields
    only."""
    d = x.to_dict()
    if STABLE if stable is None else stable:
        d = {k: d[k] for k in STABLE_FIELDS[kind]}
        return _digest(pickle.dumps(d) if kind == "simulate" else repr(d).encode())
    if kind == "simulate":
        return _digest(pickle.dumps(d))
    return _digest((str(x) + "\n" + repr(d)).encode())


@contextlib.contextmanager
def no_bands() -> Iterator[None]:
    """Inside: no result of solve, serve, train or simulate_serving carries an uncertainty band
    (each of their bands comes from ``roofline.uncertainty.band``, directly, through ``bands``
    / ``sum_band``, or derived from one of those: energy, economics; a lever's speed-up band,
    ``speedup_band``, is not used here)."""
    from roofline import uncertainty as U

    saved = U.band
    U.band = lambda *a, **k: None  # type: ignore[assignment]
    try:
        yield
    finally:
        U.band = saved


def train_configs() -> list[tuple[str, str, dict[str, Any]]]:
    """(model, cluster, keyword arguments) of the recorded train configurations."""
    out: list[tuple[str, str, dict[str, Any]]] = []
    gpt = dict(global_batch=1536, seq_len=2048)
    for tp, pp, rc, z, mb in [(8, 16, "selective", 1, 1), (8, 8, "full", 1, 2),
                              (4, 16, "none", 0, 1), (8, 16, "selective_op", 2, 1),
                              (8, 32, "selective", 3, 1), (2, 64, "full", 1, 4)]:
        for v in (1, 2):
            out.append(("gpt3-175b", "dgx-h100", dict(gpt, tp=tp, pp=pp, recompute=rc, zero=z,
                                                       micro_batch=mb, interleave=v, nodes=128)))
    for hw in ("dgx-a100", "dgx-h100", "hgx-h200", "amd-mi325x-8", "gb200-nvl72"):
        for m, tp, pp in [("llama-2-7b", 1, 1), ("llama-2-70b", 8, 4), ("llama-3.1-8b", 2, 1),
                          ("llama-3.1-70b", 8, 2)]:
            for prec in ("bf16", "fp16" if hw == "dgx-a100" else "fp8"):
                out.append((m, hw, dict(global_batch=512, seq_len=4096, tp=tp, pp=pp,
                                        precision=prec, nodes=8 if hw != "gb200-nvl72" else 16)))
    for m in ("mixtral-8x7b", "qwen3-30b-a3b"):
        for ep, mb in [(1, 1), (2, 1), (4, 2), (8, 1)]:
            out.append((m, "dgx-h100", dict(global_batch=256, seq_len=4096, tp=1, pp=2, ep=ep,
                                            micro_batch=mb, nodes=4)))
    for r, tgt in [(8, "all"), (16, "qkv"), (64, "all")]:
        out.append(("llama-3.1-8b", "dgx-a100", dict(global_batch=64, seq_len=2048,
                                                      lora_rank=r, lora_targets=tgt)))
    for cp in (2, 4, 8):
        out.append(("llama-3.1-8b", "dgx-h100", dict(global_batch=64, seq_len=32768, cp=cp,
                                                      tp=2, nodes=4)))
    out.append(("llama-3.1-405b", "dgx-h100", dict(global_batch=2048, seq_len=8192, tp=8,
                                                    pp=16, pp_stages=[7] + [8] * 14 + [7],
                                                    nodes=256)))
    out.append(("llama-3.1-405b", "dgx-h100", dict(global_batch=2048, seq_len=8192, tp=8,
                                                    pp=18, nodes=144)))
    out.append(("llama-3.1-70b", "dgx-h100", dict(global_batch=512, seq_len=4096, tp=8, pp=4,
                                                   recompute="full", recompute_layers=10,
                                                   nodes=8)))
    for kw in [dict(elementwise="eager"), dict(optimizer_dtype="bf16"), dict(dropout=True),
               dict(fused_attention=False), dict(sequence_parallel=False),
               dict(dp_overlap=False), dict(preset="bound"), dict(attention_kernel="fa2"),
               dict(optimizer="adamw"), dict(pp_flushes=2), dict(precision="fp16"),
               dict(tp=3), dict(pp=5, global_batch=7), dict(micro_batch=64)]:
        base: dict[str, Any] = dict(global_batch=256, seq_len=4096, tp=2, pp=2, nodes=2)
        out.append(("llama-2-7b", "dgx-a100", {**base, **kw}))
    for m in ("gpt2", "llama-3.2-1b", "qwen2.5-7b", "gemma-2-9b", "mistral-7b"):
        for gb in (8, 1024):
            out.append((m, "dgx-h100", dict(global_batch=gb, seq_len=1024, nodes=1)))
    return out


def train_lines() -> list[str]:
    lines = []
    m_obj = rl.model("llama-2-70b")
    for i, (m, cl, kw) in enumerate(train_configs()):
        try:
            r = rl.train(m, cl, **kw)
            d = result_digest(r, "train")
        except Exception as e:  # an infeasible or refused configuration is recorded too
            d = f"{type(e).__name__}: {e}"[:200]
        lines.append(f"{i:3d} {m} {cl} {sorted(kw.items())} {d}")
    # the same model as a name, an object, and again (the warm path) must give equal outputs
    kw0 = dict(global_batch=512, seq_len=4096, tp=8, pp=4, nodes=8)
    for j, m in enumerate(("llama-2-70b", m_obj, m_obj)):
        r = rl.train(m, "dgx-h100", **kw0)
        # (joined without the newline the configuration lines use: kept as recorded)
        d = (result_digest(r, "train") if STABLE
             else _digest((str(r) + repr(r.to_dict())).encode()))
        lines.append(f"obj{j} {d}")
    return lines


def simulate_lines() -> list[str]:
    lines = []
    i = 0
    for m, hw, tp in [("llama-3.1-8b", "H100", 1), ("llama-3.1-70b", "H100", 4)]:
        for chunk in (None, 512, 2048):
            for kv in ("dynamic", "reserve"):
                for rate in (2.0, 8.0, 40.0):
                    wl = rl.Workload(prompt=rl.lengths("lognormal", mean=1500, sigma=0.8,
                                                       max=8192),
                                     output=rl.lengths("lognormal", mean=300, sigma=0.6,
                                                       max=2048), rate=rate)
                    try:
                        s = rl.simulate_serving(m, hw, workload=wl, tp=tp, chunk_size=chunk,
                                                kv_policy=kv, requests=400, seed=i,
                                                max_concurrency=64)
                        d = result_digest(s, "simulate")
                    except Exception as e:
                        d = f"{type(e).__name__}: {e}"[:200]
                    lines.append(f"{i:3d} {m} {hw} tp{tp} chunk={chunk} {kv} rate={rate} {d}")
                    i += 1
    for engine in ("vllm", "vllm-v0", "vllm-v0-multistep"):
        for chunk in (None, 2048):
            wl = rl.Workload(prompt=rl.lengths("lognormal", mean=3000, sigma=0.8, max=8192),
                             output=rl.lengths("fixed", 512), rate=20.0)
            try:
                s = rl.simulate_serving("llama-3.1-70b", "H100", workload=wl, tp=2,
                                        chunk_size=chunk, engine=engine, requests=600, seed=i,
                                        max_concurrency=128)
                d = result_digest(s, "simulate")
            except Exception as e:
                d = f"{type(e).__name__}: {e}"[:200]
            lines.append(f"{i:3d} llama-3.1-70b H100 tp2 {engine} chunk={chunk} {d}")
            i += 1
    # disaggregated pools, one-token outputs, and a pool small enough to preempt (the
    # scheduler's other paths; added in session 31)
    one = rl.lengths("fixed", 1)
    for what, out, kw in (("disagg 2P+2D", None, dict(prefill_replicas=2, replicas=2)),
                          ("disagg 1P+1D one-token", one, dict(prefill_replicas=1)),
                          ("one-token chunked", one, dict(chunk_size=512)),
                          ("one-token whole", one, dict(chunk_size=None)),
                          ("preempting", None, dict(max_concurrency=512, chunk_size=2048)),
                          ("preempting whole", None, dict(max_concurrency=512,
                                                          chunk_size=None))):
        wl = rl.Workload(prompt=rl.lengths("lognormal", mean=3000, sigma=0.8, max=8192),
                         output=out or rl.lengths("lognormal", mean=1500, sigma=0.6, max=8192),
                         rate=20.0)
        kw = {"max_concurrency": 128, **kw}
        try:
            s = rl.simulate_serving("llama-3.1-70b", "H100", workload=wl, tp=2, requests=600,
                                    seed=i, **kw)
            d = _digest(pickle.dumps(s.to_dict()))
            what += f" ({s.preemptions} preemptions)"
        except Exception as e:
            d = f"{type(e).__name__}: {e}"[:200]
        lines.append(f"{i:3d} llama-3.1-70b H100 tp2 {what} {d}")
        i += 1
    return lines


def solve_lines() -> list[str]:
    """``rl.solve`` and ``rl.serve`` over zoo parts and copies of one part (a pickled copy, an
    equal ``replace``, one with its fp16 and bf16 peaks halved: solve runs these models in fp16,
    serve in bf16), which the caches keyed on hardware content must tell apart or share
    correctly."""
    from dataclasses import replace

    lines = []
    h100 = rl.hardware("H100")
    parts: list[Any] = ["A100", "H100", "H200", "MI300X", "L4", "rpi5", h100,
                        pickle.loads(pickle.dumps(h100)), replace(h100),
                        h100.with_peak("fp16", h100.peak("fp16") / 2, "halved (a test copy)")
                        .with_peak("bf16", h100.peak("bf16") / 2, "halved (a test copy)")]
    for j, hw in enumerate(parts):
        for m, kw in [("resnet50", dict(batch=1)), ("resnet50", dict(batch=64, precision="int8")),
                      ("bert-base", dict(batch=8, fuse=True)),
                      ("llama-3.1-8b", dict(batch=4, seq_len=512))]:
            try:
                r = rl.solve(m, hw, **kw)
                d = result_digest(r, "solve")
            except Exception as e:
                d = f"{type(e).__name__}: {e}"[:200]
            lines.append(f"solve {j} {hw if isinstance(hw, str) else hw.key} {m} "
                         f"{sorted(kw.items())} {d}")
        for m, kw in [("llama-3.1-8b", dict(batch=8, prompt_len=2048, output_len=256)),
                      ("llama-3.1-8b", dict(batch=1, prompt_len=128, output_len=64,
                                            precision="fp8"))]:
            try:
                s = rl.serve(m, hw, **kw)
                d = result_digest(s, "serve")
            except Exception as e:
                d = f"{type(e).__name__}: {e}"[:200]
            lines.append(f"serve {j} {hw if isinstance(hw, str) else hw.key} {m} "
                         f"{sorted(kw.items())} {d}")
    return lines


if __name__ == "__main__":
    args = [a for a in sys.argv[1:] if a not in ("--no-bands", "--stable")]
    STABLE = "--stable" in sys.argv[1:]
    what = args[0] if args else "train"
    run = {"train": train_lines, "simulate": simulate_lines, "solve": solve_lines}[what]
    with no_bands() if "--no-bands" in sys.argv[1:] else contextlib.nullcontext():
        print("\n".join(run()))
