"""Re-predict a committed validation run with and without each group of measured terms.

Same measurements (the run's validate.csv), same spec (its measured.toml); predictions from the
spec as measured, and from the spec with one group of terms removed (set to its neutral
default): the cold-weight terms, the evicted-dispatch terms, the bf16 GEMM model. Prints the
summary per subset for each, the whole models, and the single ops each group changes.

    python3 benchmarks/bench_calibrate_ablation.py docs/validation/cpu-run
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

#: each measured term switched off (None) in the grouped Efficiency (engine/efficiency.py)
GROUPS = {
    "cold weights": lambda e: replace(e, cpu=replace(e.cpu, cold=None)),
    "evicted dispatch": lambda e: replace(e, cpu=replace(e.cpu, evicted=None)),
    "bf16 GEMM model": lambda e: replace(e, gemm_bf16=None),
}


def _rows(hw, eff, items, meas) -> list[Row]:  # type: ignore[no-untyped-def]
    presets.register_efficiency(hw, eff)
    rows = []
    for it in items:
        pred, bound, _ = _predict(it, hw)
        m = meas[it.name]
        rows.append(Row(name=it.name, group=m["group"], measured_s=float(m["measured_s"]),
                        spread=float(m["spread"]), predicted_s=pred, bound_s=bound))
    return rows


def main(folder: str) -> None:
    d = Path(folder)
    hw = hardware(str(d / "measured.toml"))
    meas = {r["name"]: r for r in csv.DictReader(open(d / "validate.csv"))}
    items = [it for it in suite(False, True) if it.name in meas]
    full = presets.efficiency_for(hw, "default")
    variants = {"as measured": full}
    for name, off in GROUPS.items():
        variants[f"without {name}"] = replace(off(full), label=f"{full.label}/no-{name}")
    results = {label: _rows(hw, eff, items, meas) for label, eff in variants.items()}
    presets.register_efficiency(hw, None)
    for label, rows in results.items():
        s = summarize(rows)
        print(f"{label}:")
        for grp, e in s["default"].items():
            print(f"  {grp:<8} n={int(e['n']):>2} geomean {e['geomean']:.3f}x  within 1.25x "
                  f"{e['within_1.25']:.0%}  1.5x {e['within_1.5']:.0%}  2x {e['within_2.0']:.0%}")
    labels = list(results)
    print("whole models: measured, then pred/meas " + " | ".join(labels))
    for i, r in enumerate(results["as measured"]):
        if r.group == "model":
            print(f"  {r.name:<24} {r.measured_s * 1e3:8.2f} ms  "
                  + " | ".join(f"{results[lb][i].ratio:.2f}" for lb in labels))
    base = results["as measured"]
    for label in labels[1:]:
        changed = [(a.name, a.ratio, b.ratio) for a, b in zip(results[label], base)
                   if a.group != "model" and abs(a.predicted_s - b.predicted_s) > 1e-12]
        print(f"single ops whose prediction the {label.removeprefix('without ')} changes: "
              f"{len(changed)}" + "".join(f"\n  {n}: {x:.2f} -> {y:.2f}" for n, x, y in changed))


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "docs/validation/cpu-run")
