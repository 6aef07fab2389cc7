"""The seed tutorial ("Hello, Roofline" with mlsysim 0.1.1) reproduced, then answered per op.

Part 1 runs the seed's experiments under ``preset="mlsysim"`` and prints its tables:
ResNet-50 on an A100 at batch 1..256, the A100-vs-H100 crossover, Llama-3.1-8B decode.
Part 2 asks the same questions under the ``"default"`` preset (per-operator graphs,
2 FLOPs per multiply-add, per-kernel launch overhead) and prints, side by side, each number
where the two sets of conventions part ways. ``docs/tutorials/hello_roofline.md`` explains them.

Run it with ``roofline tutorial`` or ``python examples/hello_roofline.py``. Everything goes
through the public API (``rl.solve``, ``rl.sweep``); the mlsysim convention constants are read
from the preset's data file, never restated here.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

import roofline as rl

from .engine.presets import efficiency_for

__all__ = ["BATCHES", "Tutorial", "main", "tutorial_text", "run_experiments"]

BATCHES = (1, 2, 4, 8, 16, 32, 64, 128, 256)  #: the seed's batch sweep
MODEL, LLM = "resnet50", "llama-3.1-8b"
A100, H100 = "A100", "H100"
PRECISION = "fp16"


@dataclass(frozen=True, slots=True, kw_only=True)
class Tutorial:
    """Every result the tutorial prints (so tests and notebooks can read the numbers)."""

    mlsysim_a100: tuple[rl.Result, ...]  #: ResNet-50 on A100, one per batch in BATCHES
    mlsysim_h100: tuple[rl.Result, ...]  #: ResNet-50 on H100
    mlsysim_crossover: dict[str, int | None]  #: rl.sweep(...).crossover() under "mlsysim"
    mlsysim_llama: rl.Result  #: Llama-3.1-8B decode, batch 1, A100
    default_resnet: rl.Result  #: ResNet-50, batch 1, A100, per-op
    default_a100: tuple[rl.Result, ...]  #: ResNet-50 on A100 per batch, default preset
    default_h100: tuple[rl.Result, ...]
    default_crossover: dict[str, int | None]
    default_llama: rl.Result  #: Llama-3.1-8B decode, batch 1, A100, per-op
    llama_contexts: tuple[rl.Result, ...]  #: the same at several KV-cache lengths
    conventions: dict[str, float]  #: mlsysim's efficiency, activation fraction, layer tax
    mlsysim_layers: dict[str, float]  #: "layers" mlsysim charges its tax for, per model
    mlsysim_dispatch_s: dict[str, float]  #: its per-device dispatch tax


def run_experiments() -> Tutorial:
    """Solve everything the tutorial prints."""
    from .engine import mlsysim as ms  # the preset's own data: constants are not restated

    def series(hw: str, preset: str) -> tuple[rl.Result, ...]:
        return tuple(rl.solve(MODEL, hw, batch=b, precision=PRECISION, preset=preset)
                     for b in BATCHES)

    def crossover(preset: str) -> dict[str, int | None]:
        s = rl.sweep(MODEL, [A100, H100], batch=list(BATCHES), precision=PRECISION,
                     preset=preset)
        names = {rl.hardware(A100).name: A100, rl.hardware(H100).name: H100}
        return {names.get(k, k): v for k, v in s.crossover().items()}

    llama = {"batch": 1, "precision": PRECISION, "phase": "decode"}
    default_a100 = series(A100, "default")
    return Tutorial(
        mlsysim_a100=series(A100, "mlsysim"), mlsysim_h100=series(H100, "mlsysim"),
        mlsysim_crossover=crossover("mlsysim"),
        mlsysim_llama=rl.solve(LLM, A100, preset="mlsysim", **llama),  # type: ignore[arg-type]
        default_resnet=default_a100[0], default_a100=default_a100,
        default_h100=series(H100, "default"), default_crossover=crossover("default"),
        default_llama=rl.solve(LLM, A100, **llama),  # type: ignore[arg-type]
        llama_contexts=tuple(rl.solve(LLM, A100, context=c, **llama)  # type: ignore[arg-type]
                             for c in (1, 2048, 32768, 131072)),
        conventions=ms.conventions(),
        mlsysim_layers={k: ms.mlsysim_model(rl.model(k)).layers for k in (MODEL, LLM)},
        mlsysim_dispatch_s={k: ms.mlsysim_device(rl.hardware(k)).dispatch_tax
                            for k in (A100, H100)},
    )


# -- formatting ----------------------------------------------------------------------------------

def _ms(t: float) -> str:
    return f"{t * 1e3:.4f} ms"


def _us(t: float) -> str:
    return f"{t * 1e6:,.1f} µs"


def _mb(b: float) -> str:
    return f"{b / 1e6:,.2f} MB"


def _gb(b: float) -> str:
    return f"{b / 1e9:,.2f} GB"


def _grid(head: Sequence[str], rows: Sequence[Sequence[str]], left: int = 1) -> list[str]:
    widths = [max(len(h), *(len(r[j]) for r in rows)) for j, h in enumerate(head)]

    def line(cells: Sequence[str]) -> str:
        return "  ".join(c.ljust(w) if j < left else c.rjust(w)
                         for j, (c, w) in enumerate(zip(cells, widths))).rstrip()

    return ["  " + line(head), "  " + line(["-" * w for w in widths]),
            *("  " + line(r) for r in rows)]


def _by_kind(r: rl.Result) -> list[list[str]]:
    """Per op kind: count, FLOPs, bytes, kernel time (max of compute, memory), time."""
    t = r.ops
    kinds = np.asarray(t["kind"], dtype=object)
    kernel = np.maximum(np.asarray(t["t_compute"], float), np.asarray(t["t_memory"], float))
    rows = []
    for k in dict.fromkeys(kinds.tolist()):
        sel = kinds == k
        rows.append((float(np.asarray(t["time"], float)[sel].sum()), [
            k, f"{int(sel.sum())}", f"{float(np.asarray(t['flops'], float)[sel].sum()) / 1e9:,.3f}",
            f"{float(np.asarray(t['bytes'], float)[sel].sum()) / 1e6:,.1f}",
            _us(float(kernel[sel].sum())), _us(float(np.asarray(t["time"], float)[sel].sum())),
            f"{float(np.asarray(t['share'], float)[sel].sum()):.1%}"]))
    return [r for _, r in sorted(rows, key=lambda x: -x[0])]


def _top_ops(r: rl.Result, k: int) -> list[list[str]]:
    t = r.ops
    time = np.asarray(t["time"], float)
    kernel = np.maximum(np.asarray(t["t_compute"], float), np.asarray(t["t_memory"], float))
    order = np.lexsort((-kernel, -time))[:k]
    return [[str(t["name"][i]), str(t["kind"][i]), f"{float(t['flops'][i]) / 1e6:,.1f}",
             f"{float(t['bytes'][i]) / 1e6:,.2f}", f"{float(t['intensity'][i]):,.1f}",
             str(t["bound"][i]), _us(float(kernel[i])), _us(float(time[i]))] for i in order]


def tutorial_text(tut: Tutorial) -> str:
    """The tutorial's printout."""
    a1, h1 = tut.mlsysim_a100[0], tut.mlsysim_h100[0]
    c = tut.conventions
    hw_a, hw_h = rl.hardware(A100), rl.hardware(H100)
    m = rl.model(MODEL)
    out: list[str] = []
    w = out.append
    w("Hello, roofline: the seed tutorial (mlsysim 0.1.1, 'Hello, Roofline') reproduced")
    w("=" * 80)
    w("")
    w("PART 1 — the seed's experiments under preset=\"mlsysim\" (its conventions, exactly)")
    w("")
    w("1. Setup")
    w(f"  model     {m.name}: {m.params:,} parameters (our graph); mlsysim's zoo: "
      f"{a1.flops / 1e9:.4g} GFLOP per image")
    w(f"            (mlsysim's zoo counts 1 FLOP per multiply-add; we count 2: "
      f"{tut.default_resnet.flops / 1e9:.4g} GFLOP)")
    w(f"  hardware  {hw_a.name}: {PRECISION} {hw_a.peak(PRECISION) / 1e12:.4g} TFLOP/s dense, "
      f"{hw_a.main_memory.name} {hw_a.memory_bytes_per_s / 1e9:,.0f} GB/s")
    w(f"            ridge {a1.ridge_point:.4g} FLOP/B; mlsysim's effective ridge "
      f"{a1.ridge_point_effective:.4g} FLOP/B (efficiency {c['efficiency']:g} on compute)")
    w("")
    w("2. Single image (batch 1) on the A100")
    w(f"  bottleneck  {a1.bottleneck}-bound")
    w(f"  latency     {_ms(a1.latency)} = max(compute {_ms(a1.t_compute)}, memory "
      f"{_ms(a1.t_memory)}) + overhead {_ms(a1.t_overhead)}")
    w(f"  throughput  {a1.throughput:,.0f} img/s")
    w(f"  intensity   {a1.arithmetic_intensity:.1f} FLOP/B    MFU {a1.mfu:.2%}")
    w("")
    w("3. Batch sweep, ResNet-50 on the A100 (fp16)")
    rows = []
    prev = None
    for r in tut.mlsysim_a100:
        gain = "" if prev is None else f"{r.throughput / prev - 1:+.0%}"
        prev = r.throughput
        rows.append([f"{r.batch}", f"{r.latency * 1e3:.4f}", f"{r.throughput:,.0f}", gain,
                     r.bottleneck, f"{r.arithmetic_intensity:.1f}", f"{r.mfu:.2%}"])
    out.extend(_grid(["batch", "latency ms", "img/s", "gain", "bottleneck", "AI FLOP/B", "MFU"],
                     rows))
    last = tut.mlsysim_a100[-1]
    w(f"  throughput batch 1 -> 256: x{last.throughput / a1.throughput:.1f}; "
      f"compute-bound from batch {tut.mlsysim_crossover[A100]}")
    w("")
    w("4. A100 vs H100 (fp16)")
    w(f"  {hw_h.name}: {hw_h.peak(PRECISION) / 1e12:.4g} TFLOP/s "
      f"(x{hw_h.peak(PRECISION) / hw_a.peak(PRECISION):.2f}), "
      f"{hw_h.memory_bytes_per_s / 1e9:,.0f} GB/s "
      f"(x{hw_h.memory_bytes_per_s / hw_a.memory_bytes_per_s:.2f}); effective ridge "
      f"{h1.ridge_point_effective:.1f} FLOP/B")
    rows = [[f"{a.batch}", a.bottleneck, h.bottleneck, f"{a.throughput:,.0f}",
             f"{h.throughput:,.0f}", f"{h.throughput / a.throughput:.2f}x"]
            for a, h in zip(tut.mlsysim_a100, tut.mlsysim_h100)]
    out.extend(_grid(["batch", "A100", "H100", "A100 img/s", "H100 img/s", "H100/A100"], rows))
    w(f"  crossover (rl.sweep(...).crossover()): A100 batch {tut.mlsysim_crossover[A100]}, "
      f"H100 batch {tut.mlsysim_crossover[H100]}")
    i128 = BATCHES.index(128)
    w(f"  batch 1: H100 only x{h1.throughput / a1.throughput:.2f} "
      f"({h1.throughput:,.0f} vs {a1.throughput:,.0f} img/s, both {h1.bottleneck}-bound); "
      f"batch 128: x{tut.mlsysim_h100[i128].throughput / tut.mlsysim_a100[i128].throughput:.2f}")
    w("")
    ll = tut.mlsysim_llama
    w("5. Llama-3.1-8B decode, batch 1, A100 (fp16)")
    w(f"  bottleneck  {ll.bottleneck}-bound")
    w(f"  latency     {_ms(ll.latency)} (t_memory {_ms(ll.t_memory)}, t_compute "
      f"{_ms(ll.t_compute)}, overhead {_ms(ll.t_overhead)})")
    w(f"  throughput  {ll.throughput:.1f} tok/s")
    w(f"  work        {ll.flops / 1e9:.2f} GFLOP per token (2 x params), "
      f"{_gb(ll.bytes)} moved (weights x (1 + {c['activation_fraction']:g}))")
    w(f"  intensity   {ll.arithmetic_intensity:.3f} FLOP/B")
    w("")
    w("")
    w("PART 2 — the same questions, per operator (preset=\"default\", 2 FLOPs per "
      "multiply-add)")
    w("")
    d = tut.default_resnet
    w("6. ResNet-50, batch 1, A100")
    out.extend("  " + line for line in str(d).splitlines())
    w("  by op kind:")
    out.extend(_grid(["kind", "ops", "GFLOP", "MB", "kernel", "time", "share"],
                     _by_kind(d)))
    w("  top ops by time (ties broken by kernel time):")
    out.extend(_grid(["op", "kind", "MFLOP", "MB", "AI", "bound", "kernel", "time"],
                     _top_ops(d, 6)))
    w("")
    w("7. ResNet-50 batch sweep, A100 vs H100, per op")
    rows = [[f"{a.batch}", a.bottleneck, h.bottleneck, f"{a.throughput:,.0f}",
             f"{h.throughput:,.0f}", f"{a.arithmetic_intensity:.1f}"]
            for a, h in zip(tut.default_a100, tut.default_h100)]
    out.extend(_grid(["batch", "A100", "H100", "A100 img/s", "H100 img/s", "AI FLOP/B"], rows))
    cross = ", ".join(f"{k} {v if v is not None else 'never (1..256)'}"
                      for k, v in tut.default_crossover.items())
    w(f"  compute-bound from batch: {cross}")
    d256 = tut.default_a100[-1]
    w(f"  batch {d256.batch} on the A100, by op kind:")
    out.extend(_grid(["kind", "ops", "GFLOP", "MB", "kernel", "time", "share"],
                     _by_kind(d256)))
    bound = np.asarray(d256.ops["bound"], dtype=object)
    kinds = np.asarray(d256.ops["kind"], dtype=object)
    vec = (kinds == "norm") | (kinds == "elementwise")
    w(f"  compute-bound ops: {int(((bound == 'compute') & (kinds == 'conv2d')).sum())} of "
      f"{int((kinds == 'conv2d').sum())} convolutions, "
      f"{int(((bound == 'compute') & vec).sum())} of {int(vec.sum())} norms/activations/adds")
    w("")
    dl = tut.default_llama
    w("8. Llama-3.1-8B decode, batch 1, A100, per op")
    out.extend("  " + line for line in str(dl).splitlines())
    w("  by op kind:")
    out.extend(_grid(["kind", "ops", "GFLOP", "MB", "kernel", "time", "share"], _by_kind(dl)))
    w("  KV-cache length (context) changes the answer; mlsysim's aggregate ignores it:")
    rows = [[f"{r.context:,}", _ms(r.latency), _gb(r.bytes),
             _mb(r.memory_breakdown.get("kv_cache", 0.0)), f"{r.throughput:.1f}"]
            for r in tut.llama_contexts]
    out.extend(_grid(["context", "latency", "bytes moved", "KV cache", "tok/s"], rows))
    w("")
    w("")
    w("PART 3 — where the two answers part ways (explained in docs/tutorials/hello_roofline.md)")
    w("")
    out.extend(_differences(tut))
    return "\n".join(out)


def _differences(tut: Tutorial) -> list[str]:
    a1, d = tut.mlsysim_a100[0], tut.default_resnet
    c = tut.conventions
    out: list[str] = []
    w = out.append
    peak = a1.peak_flops_per_s
    consistent = d.flops / (peak * c["efficiency"])
    w("a. FLOP convention (1 MAC = 1 FLOP in mlsysim's zoo, 2 here)")
    w(f"  ResNet-50 per image: mlsysim {a1.flops / 1e9:.4g} GFLOP, ours "
      f"{d.flops / 1e9:.4g} GFLOP (x{d.flops / a1.flops:.3f})")
    w(f"  mlsysim divides its MAC count by a 2-FLOP/MAC peak x {c['efficiency']:g}: t_compute "
      f"{_us(a1.t_compute)}; in one convention it would be {_us(consistent)}"
      f" ({'compute' if consistent > a1.t_memory else 'memory'}-bound against t_memory "
      f"{_us(a1.t_memory)})")
    w(f"  its AI {a1.arithmetic_intensity:.1f} is MACs/B; in FLOP/B: "
      f"{a1.arithmetic_intensity * d.flops / a1.flops:.1f} vs ridge {a1.ridge_point:.1f}")
    w("b. Bytes: activations as 10 % of weights vs counted per op")
    w_m = a1.memory_breakdown["weights"]
    wd = float(np.asarray(d.ops["weight_bytes"], float).sum())
    ad = float(np.asarray(d.ops["act_bytes"], float).sum())
    w(f"  mlsysim batch 1: {_mb(a1.bytes)} = weights {_mb(w_m)} x (1 + "
      f"{c['activation_fraction']:g})")
    w(f"  ours batch 1:    {_mb(d.bytes)} = weights {_mb(wd)} + activation traffic {_mb(ad)} "
      f"({ad / wd:.2f}x the weights)")
    a256, d256 = tut.mlsysim_a100[-1], tut.default_a100[-1]
    w(f"  batch 256: mlsysim {_gb(a256.bytes)} (AI {a256.arithmetic_intensity:.1f}), ours "
      f"{_gb(d256.bytes)} (AI {d256.arithmetic_intensity:.1f} FLOP/B)")
    w("c. Efficiency: one 0.5 on compute only vs per op class and size")
    w(f"  mlsysim: effective ridge {a1.ridge_point_effective:.1f} FLOP/B, memory at 100 % of "
      f"{a1.bandwidth_bytes_per_s / 1e9:,.0f} GB/s")
    w(f"  ours:    effective ridge {d.ridge_point_effective:.1f} FLOP/B (GEMM efficiency by "
      "M, N, K; memory and vector efficiencies apart)")
    w("d. Fixed costs: per-layer tax vs per-kernel launch/dispatch")
    nl = tut.mlsysim_layers[MODEL]
    w(f"  mlsysim: dispatch {_us(tut.mlsysim_dispatch_s[A100])} + {nl:g} layers x "
      f"{_us(c['layer_tax'])} = {_us(a1.t_overhead)} per batch, whatever the batch")
    t = d.ops
    kernel = np.maximum(np.asarray(t["t_compute"], float), np.asarray(t["t_memory"], float))
    eff = efficiency_for(rl.hardware(A100), "default")
    at_floor = int((kernel + eff.launch.kernel_gap < eff.launch.dispatch).sum())
    w(f"  ours:    {len(t)} kernels, each max(kernel + {_us(eff.launch.kernel_gap)} gap, "
      f"{_us(eff.launch.dispatch)} dispatch); {at_floor} of them wait on dispatch: overhead "
      f"{_us(d.t_overhead)} of {_us(d.latency)}")
    w(f"  kernel time alone: {_us(float(kernel.sum()))}; roofline bound {_us(d.latency_bound)}")
    w("e. The bottleneck label")
    w(f"  mlsysim: '{a1.bottleneck}' (t_memory {_us(a1.t_memory)} > t_compute "
      f"{_us(a1.t_compute)}) though overhead is {a1.t_overhead / a1.latency:.0%} of latency")
    w(f"  ours:    '{d.bottleneck}' (overhead {d.t_overhead / d.latency:.0%} of latency)")
    w("f. Crossover batch")
    def cx(v: int | None) -> str:
        return "never in 1..256" if v is None else str(v)

    w(f"  mlsysim: A100 {cx(tut.mlsysim_crossover[A100])}, H100 "
      f"{cx(tut.mlsysim_crossover[H100])}; ours: A100 {cx(tut.default_crossover[A100])}, "
      f"H100 {cx(tut.default_crossover[H100])}")
    w(f"  throughput at batch 256 on the A100: mlsysim {a256.throughput:,.0f} img/s, ours "
      f"{d256.throughput:,.0f} img/s")
    ll, dl = tut.mlsysim_llama, tut.default_llama
    ot = dl.ops
    names = np.asarray(ot["name"], dtype=object)
    kinds = np.asarray(ot["kind"], dtype=object)
    lm = float(np.asarray(ot["bytes"], float)[names == "lm_head"].sum())
    emb = float(np.asarray(ot["bytes"], float)[kinds == "embedding"].sum())
    kv = float(np.asarray(ot["kv_bytes"], float).sum())
    w("g. Decode: aggregate 2 x params vs the ops of one token")
    w(f"  mlsysim: {ll.flops / 1e9:.2f} GFLOP, {_gb(ll.bytes)} (weights x "
      f"{1 + c['activation_fraction']:g}), "
      f"latency {_ms(ll.latency)}")
    w(f"  ours:    {dl.flops / 1e9:.2f} GFLOP, {_gb(dl.bytes)}: lm_head {_gb(lm)}, embedding "
      f"lookup {_mb(emb)}, KV cache {_mb(kv)} at context {dl.context:,}; latency "
      f"{_ms(dl.latency)}")
    w(f"  ours spends {_ms(dl.t_memory)} on memory (at the preset's bandwidth efficiency) and "
      f"{_ms(dl.t_overhead)} on {len(ot)} kernel launches")
    return out


def main(argv: Sequence[str] | None = None) -> int:
    """Print the tutorial (``roofline tutorial``, ``python examples/hello_roofline.py``)."""
    p = argparse.ArgumentParser(prog="hello_roofline", description=__doc__.splitlines()[0])
    p.parse_args(argv)
    print(tutorial_text(run_experiments()))
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
