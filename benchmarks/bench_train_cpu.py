"""Measured-CPU training validation: train small models with PyTorch on this CPU, time the
steps, and compare with ``rl.train`` on this CPU's ``roofline measure`` spec.

    python benchmarks/bench_train_cpu.py --spec SPEC.toml --out DIR [--steps 10]

Each model trains in fp32 with plain SGD on random data (``torch.manual_seed(0)``): a step is
forward, cross-entropy loss, backward, ``optimizer.step()`` and ``zero_grad()``; three warm-up
steps, then the median of ``--steps`` timed steps (and the 10th-90th percentile spread), and
the median process CPU time per thread (closer to a dedicated machine's step on a shared one).
Our number is ``rl.train(rl.model(net, example_inputs=(x,)), SPEC, global_batch=B,
micro_batch=B, precision="fp32", optimizer="sgd")``: the traced forward graph, the backward
by one rule per op kind, the optimizer step, on the measured ceilings (nothing fitted to these
runs). Writes ``DIR/steps.json`` (the measured times, the machine, the load average) — the
file ``tests/validation/test_validation_cpu_training.py`` recomputes our side from.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import time
from pathlib import Path

import torch
from torch import nn

import roofline as rl


def models() -> dict[str, tuple[nn.Module, tuple[int, ...], int]]:
    """name -> (module, input shape with the batch first, classes)."""
    torch.manual_seed(0)
    mlp = nn.Sequential(nn.Flatten(), nn.Linear(784, 2048), nn.ReLU(), nn.Linear(2048, 2048),
                        nn.ReLU(), nn.Linear(2048, 10))
    cnn = nn.Sequential(
        nn.Conv2d(3, 32, 3, padding=1), nn.BatchNorm2d(32), nn.ReLU(), nn.MaxPool2d(2),
        nn.Conv2d(32, 64, 3, padding=1), nn.BatchNorm2d(64), nn.ReLU(), nn.MaxPool2d(2),
        nn.Conv2d(64, 128, 3, padding=1), nn.BatchNorm2d(128), nn.ReLU(),
        nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(128, 10))
    enc = nn.Sequential(nn.TransformerEncoder(nn.TransformerEncoderLayer(
        256, 4, 1024, batch_first=True, dropout=0.0), 2), nn.Flatten(), nn.Linear(64 * 256, 10))
    return {"mlp-784-2048-2048-10 (batch 256)": (mlp, (256, 1, 28, 28), 10),
            "cnn-3conv-32x32 (batch 64)": (cnn, (64, 3, 32, 32), 10),
            "encoder-2x256-T64 (batch 32)": (enc, (32, 64, 256), 10)}


def measure(net: nn.Module, shape: tuple[int, ...], classes: int,
            steps: int) -> tuple[float, float, float, float]:
    net.train()
    opt = torch.optim.SGD(net.parameters(), lr=0.01)
    x = torch.randn(*shape)
    y = torch.randint(0, classes, (shape[0],))
    loss_fn = nn.CrossEntropyLoss()
    times, cpu = [], []
    for i in range(steps + 3):
        t, c = time.perf_counter(), time.process_time()
        loss = loss_fn(net(x), y)
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        if i >= 3:
            times.append(time.perf_counter() - t)
            cpu.append((time.process_time() - c) / torch.get_num_threads())
    times.sort()
    q = statistics.quantiles(times, n=10)
    # CPU seconds of this process per thread: what the step takes when the threads are not
    # descheduled by other jobs (a shared machine's wall time overstates it)
    return statistics.median(times), q[0], q[-1], statistics.median(cpu)


def predict(net: nn.Module, shape: tuple[int, ...], spec: str) -> rl.TrainingResult:
    m = rl.model(net, example_inputs=(torch.empty(*shape),))
    return rl.train(m, spec, global_batch=shape[0], micro_batch=shape[0], precision="fp32",
                    optimizer="sgd")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--spec", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--steps", type=int, default=10)
    a = ap.parse_args()
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    rows = []
    for name, (net, shape, classes) in models().items():
        load0 = os.getloadavg()[0]
        med, p10, p90, cpu = measure(net, shape, classes, a.steps)
        r = predict(net, shape, a.spec)
        rows.append({"model": name, "batch": shape[0], "measured_s": med, "p10_s": p10,
                     "p90_s": p90, "cpu_s_per_thread": cpu, "ours_s": r.step_time,
                     "load_1min": load0})
        print(f"| {name} | {med * 1e3:.1f} ms ({p10 * 1e3:.1f}-{p90 * 1e3:.1f}) | "
              f"{cpu * 1e3:.1f} ms | {r.step_time * 1e3:.1f} ms | {r.step_time / med - 1:+.1%} | "
              f"{r.step_time / cpu - 1:+.1%} | {load0:.1f} |")
    (out / "steps.json").write_text(json.dumps({
        "machine": platform.processor() or platform.machine(),
        "torch": torch.__version__, "threads": torch.get_num_threads(),
        "date": time.strftime("%Y-%m-%d"), "spec": Path(a.spec).name, "rows": rows},
        indent=1) + "\n")


if __name__ == "__main__":
    main()
