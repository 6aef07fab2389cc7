"""The CPU calibration run behind docs/validation/cpu.md: measure, then validate, in one process.

    python3 benchmarks/bench_calibrate_cpu.py --out docs/validation/cpu-run [--threads 1]

Writes ``measured.toml`` (the spec), ``validate.csv``, ``validate.png``, ``validate.txt`` and
``run.txt`` (wall times of both phases, the load average before and after, thread count) into
``--out``. Targets checked by hand against the printed numbers: measure in 1-2 minutes,
measure + validate in at most 3 minutes on the 2-core machine.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", required=True)
    ap.add_argument("--threads", type=int, default=None)
    ap.add_argument("--wait-quiet", type=float, default=0.0,
                    help="first wait up to this many seconds for the 1-minute load average "
                         "to drop below 0.5 (other tenants on a shared machine)")
    args = ap.parse_args()
    t_wait = time.perf_counter()
    while os.getloadavg()[0] >= 0.5 and time.perf_counter() - t_wait < args.wait_quiet:
        time.sleep(5)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    import torch

    import roofline as rl

    load0 = os.getloadavg()
    t0 = time.perf_counter()
    spec = out / "measured.toml"
    rl.measure(spec, progress=False, threads=args.threads)
    t1 = time.perf_counter()
    v = rl.validate(spec, progress=False, csv_path=out / "validate.csv",
                    plot_path=out / "validate.png", threads=args.threads)
    t2 = time.perf_counter()
    load1 = os.getloadavg()
    (out / "validate.txt").write_text(v.to_string() + "\n", encoding="utf-8")
    threads = args.threads or torch.get_num_threads()
    meta = (f"threads: {threads}\nmeasure: {t1 - t0:.1f} s\nvalidate: {t2 - t1:.1f} s\n"
            f"total: {t2 - t0:.1f} s\nload average before: {load0}\nload average after: "
            f"{load1}\ndate: {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}\n")
    (out / "run.txt").write_text(meta, encoding="utf-8")
    print(v.to_string())
    print(meta)
    return 0


if __name__ == "__main__":
    sys.exit(main())
