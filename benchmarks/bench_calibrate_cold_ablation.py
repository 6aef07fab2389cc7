"""Re-predict a committed validation run with and without the cold-weight terms.

Same measurements (the run's validate.csv), same spec (its measured.toml), two predictions:
the spec as measured, and the spec with ``cold_after``, ``cold_read_max``, ``cold_pack_max``
and ``pack_min_rows`` removed. Prints the summary per subset for both, and the whole models.

    python3 benchmarks/bench_calibrate_cold_ablation.py docs/validation/cpu-run
"""

from __future__ import annotations

import csv
import sys
from dataclasses import replace
from pathlib import Path

from roofline.calibrate.validate import Row, _predict, summarize
from roofline.calibrate.workloads import suite
from roofline.engine import presets
from roofline.specs import hardware

COLD = ("cold_after", "cold_read_max", "cold_pack_max", "pack_min_rows")


def main(folder: str) -> None:
    d = Path(folder)
    hw = hardware(str(d / "measured.toml"))
    meas = {r["name"]: r for r in csv.DictReader(open(d / "validate.csv"))}
    items = [it for it in suite(False, True) if it.name in meas]
    on = presets.efficiency_for(hw, "default")
    off = replace(on, **{f: type(getattr(on, f))(getattr(presets.BOUND, f)) for f in COLD},
                  label=on.label + "/no-cold")
    results = {}
    for label, eff in (("without cold terms", off), ("with cold terms", on)):
        presets.register_efficiency(hw.key, eff)
        rows = []
        for it in items:
            pred, bound, _ = _predict(it, hw)
            m = meas[it.name]
            rows.append(Row(name=it.name, group=m["group"], measured_s=float(m["measured_s"]),
                            spread=float(m["spread"]), predicted_s=pred, bound_s=bound))
        results[label] = rows
        s = summarize(rows)
        print(f"{label}:")
        for grp, e in s["default"].items():
            print(f"  {grp:<8} n={int(e['n']):>2} geomean {e['geomean']:.3f}x  within 1.25x "
                  f"{e['within_1.25']:.0%}  1.5x {e['within_1.5']:.0%}  2x {e['within_2.0']:.0%}")
    print("whole models: measured, predicted without -> with cold terms (ratio)")
    for a, b in zip(*results.values()):
        if a.group == "model":
            print(f"  {a.name:<46} {a.measured_s * 1e3:8.2f} ms  {a.predicted_s * 1e3:8.2f} "
                  f"({a.ratio:.2f}) -> {b.predicted_s * 1e3:8.2f} ({b.ratio:.2f})")
    changed = [(a.name, a.ratio, b.ratio) for a, b in zip(*results.values())
               if a.group != "model" and abs(a.predicted_s - b.predicted_s) > 1e-12]
    print(f"single ops whose prediction changed: {len(changed)}"
          + "".join(f"\n  {n}: {x:.2f} -> {y:.2f}" for n, x, y in changed))


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "docs/validation/cpu-run")
