"""One-shot GPU calibration run: `roofline measure` + `roofline validate` on a CUDA GPU.

Prepared for the project's H200 machine (budget: at most 5 minutes of device time):

    python3 benchmarks/bench_calibrate_h200.py --out "$OUT"            # on the GPU machine

The device machine has PyTorch but not this package installed (and no network to install it):
the script puts the checkout's ``src`` on ``sys.path`` when ``roofline`` is not importable.
Through the project's device tool: ``run(command='PYTHONUNBUFFERED=1 python3
benchmarks/bench_calibrate_h200.py --out "$OUT"', timeout_s=420)`` (5 files come back).

It writes into ``--out``:
  h200-sxm-measured.toml   the measured spec (provenance "measured: ..."), ready to commit as
                           src/roofline/data/hardware/nvidia/h200-sxm-measured.toml
  validate.csv, validate.png, validate.txt   predicted vs measured, and the summary
  log.txt                  every progress line, with elapsed seconds
Each phase is skipped (and says so) when less time is left than it needs, so a run always
ends inside the budget with whatever it measured.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", required=True, help="output folder")
    ap.add_argument("--budget-s", type=float, default=280.0, help="stop starting phases after")
    ap.add_argument("--key", default="h200-sxm-measured")
    ap.add_argument("--name", default="NVIDIA H200 SXM (measured by roofline measure)")
    args = ap.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    t0 = time.perf_counter()
    log = (out / "log.txt").open("w", encoding="utf-8")

    class Tee:
        def write(self, s: str) -> int:
            if s.strip():
                log.write(f"[{time.perf_counter() - t0:7.1f}s] {s.rstrip()}\n")
                log.flush()
            return sys.stderr.write(s)

        def flush(self) -> None:
            sys.stderr.flush()

    import torch

    try:
        import roofline as rl
    except ImportError:  # a bare checkout on the device machine: use its src/
        sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))
        import roofline as rl

    if not torch.cuda.is_available():
        print("no CUDA device visible: nothing to do", file=sys.stderr)
        return 1
    tee = Tee()
    print(f"device: {torch.cuda.get_device_name(0)}, torch {torch.__version__}", file=tee)
    spec = out / f"{args.key}.toml"
    hw = rl.measure(spec, device="cuda", progress=tee, key=args.key, name=args.name)
    print(f"measure done: {hw}", file=tee)
    left = args.budget_s - (time.perf_counter() - t0)
    if left < 60:
        print(f"only {left:.0f} s left: skipping validate", file=tee)
        return 0
    v = rl.validate(spec, progress=tee, models=left > 120, csv_path=out / "validate.csv",
                    plot_path=out / "validate.png")
    (out / "validate.txt").write_text(v.to_string() + "\n", encoding="utf-8")
    print(v.summary_string(), file=tee)
    print(f"total {time.perf_counter() - t0:.0f} s", file=tee)
    return 0


if __name__ == "__main__":
    sys.exit(main())
