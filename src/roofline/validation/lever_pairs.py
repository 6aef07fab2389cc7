"""The paired residuals behind a lever's speed-up band (roofline.uncertainty.speedup_band).

A lever's speed-up is the ratio of two predictions, base / changed. Their errors share the
source's offset (one document's software stack and setup), which cancels in the ratio, so its
band comes from *pairs* of published cases of one source that differ in one lever, not from two
independent bands. For a pair (a, b) of one class and one source, d = e_a − e_b (e = log(ours /
measured) of a time, roofline.validation.uncertainty) is log(our ratio / the measured ratio).

``compute_pairs()`` lists every such pair: both cases of one class and one source (and, for a
serving class, one metric: a TPOT and a tokens/s row are different quantities), whose scenarios
differ in keys of exactly one lever family (``FAMILY``: the families of roofline.analysis.levers,
e.g. ``tp`` and ``micro_batch`` are both "parallelism"). A pair that also differs in a key that
is not a lever (prompt or output length, sequence length, dropout, ...) is left out, and so is
a pair that changes two families: DeepLearningExamples' ResNet-50 AMP and TF32 rows (source
rn50) differ in precision and in the convolution layout (the recipe runs AMP channels last,
TF32 in NCHW: ``conv_layout``, family "layout"), so they calibrate no precision lever, and
rl.levers gives a combination of levers no speed-up band (docs/validation/uncertainty.md). Training
scenarios compare the per-device batch (global batch / devices), so a run scaled out at a fixed
per-device batch differs in "parallelism" only. The inference cases' ``engine`` is a label (not
an input of rl.solve) and is ignored.

Pools (``POOLS``) group the classes whose pairs stand for the levers of one call: ``solve``
(GPU inference, preset default), ``solve-bound`` (the same cases, preset bound), ``serve`` (the
decode-side serving classes: a serve lever ranks by the time per output token) and ``train``.

``write_pairs()`` stores the pairs (ids and family; the residuals stay in residuals.toml) in
data/validation/lever_pairs.toml (``python -m roofline.validation.lever_pairs --write``; a test
checks the file equals what the code lists). ``pair_coverage`` is the calibration: for each
source, the band fitted without that source's pairs and the fraction of its pairs inside.
"""

from __future__ import annotations

import itertools
import math
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ..errors import RooflineError
from ..uncertainty import DEFAULT_LEVEL, POOLS, fit_pair_band, pair_residuals
from .holdout import fmt_pct

__all__ = ["FAMILY", "CLASS_DOMAINS", "compute_pairs", "pairs_text", "write_pairs", "pair_coverage",
           "pairs_table", "pairs_figures", "PAIRS_PATH", "binomial_p", "coverage_gate"]

PAIRS_PATH = Path(__file__).resolve().parents[1] / "data" / "validation" / "lever_pairs.toml"

#: scenario key -> lever family (roofline.analysis.levers.LEVER_FAMILIES); a key not here is a
#: change of the workload, not a lever
FAMILY = {
    "batch": "batch", "per_device_batch": "batch",
    "precision": "precision", "kv": "precision", "activations": "precision",
    "fuse": "fusion", "fused_attention": "fusion", "attention_kernel": "fusion",
    "runtime": "runtime", "engine": "runtime",
    "hardware": "hardware", "cluster": "hardware",
    "tp": "parallelism", "pp": "parallelism", "dp": "parallelism", "ep": "parallelism",
    "etp": "parallelism",
    "cp": "parallelism", "gpus": "parallelism", "chips": "parallelism", "zero": "parallelism",
    "recompute": "parallelism", "sequence_parallel": "parallelism", "micro_batch": "parallelism",
    "accumulation": "parallelism", "interleave": "parallelism", "dp_overlap": "parallelism",
    "model": "shape", "layers": "shape", "hidden": "shape", "heads": "shape", "vocab": "shape",
    # the convolutions' activation layout (train's conv_layout): a software setting a user
    # changes (PyTorch's channels_last), not the workload; no lever of rl.levers changes it
    "conv_layout": "layout",
}

#: class -> the validation files (roofline.validation.load_cases domains) its cases come from
CLASS_DOMAINS = {
    "gpu-inference": ("inference",), "gpu-inference-bound": ("inference",),
    "serving-decode": ("serving",), "serving-llamacpp": ("llamacpp",),
    "serving-vllm-rocm": ("rocm_serving",),
    "gpu-training": ("training", "training_graphs", "training_runs"),
    "tpu-training": ("tpu_training",),
}

#: per domain, scenario keys that are labels, not inputs of the call
_LABELS = {"inference": ("engine",)}
_SAME_METRIC = ("serving-decode", "serving-llamacpp", "serving-vllm-rocm")


def _scenarios(cls: str) -> dict[str, tuple[str, dict[str, Any]]]:
    """case id -> (metric, scenario keys compared) of the class's cases."""
    from .cases import load_cases

    out = {}
    for dom in CLASS_DOMAINS[cls]:
        for c in load_cases(dom).cases:
            sc = {k: v for k, v in c.scenario.items() if k not in _LABELS.get(dom, ())}
            n = sc.get("gpus", sc.get("chips", sc.get("dp")))
            if "global_batch" in sc and isinstance(n, int) and n > 0:
                sc["per_device_batch"] = sc.pop("global_batch") / n
            out[c.id] = (c.metric, sc)
    return out


def _families(a: Mapping[str, Any], b: Mapping[str, Any]) -> set[str]:
    """The lever families of the keys that differ between a and b ("" for a key that is not a
    lever)."""
    return {FAMILY.get(k, "") for k in set(a) | set(b) if a.get(k) != b.get(k)}


def _family(a: Mapping[str, Any], b: Mapping[str, Any]) -> str | None:
    """The one lever family whose keys are all that differ between a and b (None: none, a key
    that is not a lever, or several families)."""
    fams = _families(a, b)
    if len(fams) != 1 or "" in fams:
        return None
    return fams.pop()


def compute_pairs() -> list[tuple[str, str, str, str, str, str]]:
    """(pool, class, source, id a, id b, family) of every pair, classes in POOLS order."""
    from ..uncertainty import residuals

    out = []
    for pool, classes in POOLS.items():
        for cls in classes:
            sc = _scenarios(cls)
            rows = [(i, s) for i, s, _ in residuals(cls)]
            for (ia, sa), (ib, sb) in itertools.combinations(rows, 2):
                (ma, a), (mb, b) = sc[ia], sc[ib]
                if sa != sb or (cls in _SAME_METRIC and ma != mb):
                    continue
                fam = _family(a, b)
                if fam is not None:
                    out.append((pool, cls, sa, ia, ib, fam))
    return out


def _q(s: str) -> str:
    return '"' + s.replace("\\", "\\\\").replace('"', '\\"') + '"'


def pairs_text() -> str:
    """The text of data/validation/lever_pairs.toml from ``compute_pairs()``."""
    lines = ["# Pairs of published cases of one source that differ in one lever, per pool of",
             "# uncertainty classes: the speed-up band of a lever (roofline.uncertainty).",
             "# Generated by `python -m roofline.validation.lever_pairs --write` (do not edit);",
             "# the residuals are in residuals.toml. Method: docs/validation/uncertainty.md.", ""]
    for pool, cls, src, a, b, fam in compute_pairs():
        lines += ["[[pair]]", f"pool = {_q(pool)}", f"class = {_q(cls)}", f"source = {_q(src)}",
                  f"a = {_q(a)}", f"b = {_q(b)}", f"family = {_q(fam)}", ""]
    return "\n".join(lines)


def write_pairs(path: Path = PAIRS_PATH) -> None:
    path.write_text(pairs_text(), encoding="utf-8")


def pair_coverage(pool: str, level: float = DEFAULT_LEVEL
                  ) -> tuple[int, int, list[tuple[str, int, int]], dict[str, tuple[int, int]]]:
    """(covered, pairs, per source (source, pairs, covered), per family (pairs, covered)): each
    source's pairs against the band fitted on every other source's pairs."""
    rows = pair_residuals(pool)
    per: list[tuple[str, int, int]] = []
    fam: dict[str, tuple[int, int]] = {}
    tot = 0
    for s in dict.fromkeys(src for src, _, _ in rows):
        h = fit_pair_band([d for src, _, d in rows if src != s], level)
        mine = [(f, abs(d) <= h) for src, f, d in rows if src == s]
        k = sum(ok for _, ok in mine)
        per.append((s, len(mine), k))
        tot += k
        for f, ok in mine:
            n0, k0 = fam.get(f, (0, 0))
            fam[f] = (n0 + 1, k0 + ok)
    return tot, len(rows), per, fam


def pairs_table(level: float = DEFAULT_LEVEL) -> str:
    """Markdown: per pool, pairs, sources, the band (ours / measured speed-up), the RMS of d
    against √2 σ (two independent cases of one source), and leave-one-source-out coverage."""
    from ..uncertainty import _spread, residuals

    lvl = fmt_pct(level, sign=False)
    lines = [f"| pool | classes | pairs | sources | {lvl} band of a speed-up | RMS of d | √2 σ "
             "(independent cases) | in-sample | LOSO | per family (covered / pairs) | "
             "per source (covered / pairs) |",
             "|---|---|---:|---:|---|---:|---:|---:|---:|---|---|"]
    for pool, classes in POOLS.items():
        rows = pair_residuals(pool)
        if not rows:
            continue
        ds = [d for _, _, d in rows]
        h = fit_pair_band(ds, level)
        k, n, per, fam = pair_coverage(pool, level)
        sig2 = _spread([(s, e) for c in classes for _, s, e in residuals(c)])[1]
        ins = sum(abs(d) <= h for d in ds) / n
        lines.append(
            f"| {pool} | {', '.join(classes)} | {n} | {len(per)} | ×{math.exp(-h):.2f} – "
            f"×{math.exp(h):.2f} | {math.sqrt(sum(d * d for d in ds) / n):.3f} | "
            f"{math.sqrt(2 * sig2):.3f} | {fmt_pct(ins, sign=False)} | "
            f"{fmt_pct(k / n, sign=False)} ({k}/{n}) | "
            + ", ".join(f"{f} {c}/{m}" for f, (m, c) in sorted(fam.items())) + " | "
            + ", ".join(f"{s} {c}/{m}" for s, m, c in per) + " |")
    return "\n".join(lines)


def pairs_figures(level: float = DEFAULT_LEVEL) -> dict[str, str]:
    """The page's inline figures: per pool ``pairs.<pool>.n``, ``.sources``, ``.band``
    (×lo–×hi), ``.loso``, ``.covered``; pooled ``pairs.all.n``, ``.covered``, ``.loso``."""
    out: dict[str, str] = {}
    tn = tk = 0
    for pool in POOLS:
        rows = pair_residuals(pool)
        if not rows:
            continue
        h = fit_pair_band([d for _, _, d in rows], level)
        k, n, per, _ = pair_coverage(pool, level)
        out |= {f"pairs.{pool}.n": str(n), f"pairs.{pool}.sources": str(len(per)),
                f"pairs.{pool}.band": f"×{math.exp(-h):.2f}–×{math.exp(h):.2f}",
                f"pairs.{pool}.loso": fmt_pct(k / n, sign=False),
                f"pairs.{pool}.covered": str(k)}
        tn, tk = tn + n, tk + k
    out |= {"pairs.all.n": str(tn), "pairs.all.covered": str(tk),
            "pairs.all.loso": fmt_pct(tk / tn, sign=False) if tn else "n/a"}
    return out


def binomial_p(k: int, n: int, p: float) -> float:
    """Exact two-sided binomial test: the probability, under k ~ Binomial(n, p), of a count no
    more likely than k (the sum of P(i) over every i with P(i) ≤ P(k) (1 + 10⁻⁷), as R's
    binom.test). In log space, log P(i) = log C(n, i) + i log p + (n − i) log(1 − p) with
    log C from lgamma: math.comb(n, i) · p^i overflowed a float above n ≈ 1000."""
    if not (isinstance(n, int) and isinstance(k, int) and 0 <= k <= n and 0 < p < 1):
        raise RooflineError(f"binomial_p: need integers 0 <= k <= n and 0 < p < 1, got k={k!r}, "
                            f"n={n!r}, p={p!r}")
    lp, lq, ln1 = math.log(p), math.log1p(-p), math.lgamma(n + 1)
    lpr = [ln1 - math.lgamma(i + 1) - math.lgamma(n - i + 1) + i * lp + (n - i) * lq
           for i in range(n + 1)]
    cut = lpr[k] + math.log1p(1e-7)
    return min(1.0, math.fsum(math.exp(x) for x in lpr if x <= cut))


def coverage_gate(counts: Mapping[str, tuple[int, int]], level: float = DEFAULT_LEVEL,
                  alpha: float = 0.05, lo: float = 0.7, hi: float = 0.9) -> list[str]:
    """The calibration gate of the speed-up bands (docs/validation/uncertainty.md): the pooled
    held-out coverage within [lo, hi], and each pool's (covered, pairs) consistent with ``level``
    by the exact two-sided binomial test at ``alpha`` / the number of pools (Bonferroni: a
    family-wise ``alpha``). Returns the failures, empty when the gate passes."""
    k = sum(c for c, _ in counts.values())
    n = sum(m for _, m in counts.values())
    out = [] if n and lo <= k / n <= hi else [f"pooled {k}/{n} outside {lo:.0%}–{hi:.0%}"]
    a = alpha / max(len(counts), 1)
    for pool, (c, m) in counts.items():
        pv = binomial_p(c, m, level)
        if pv < a:
            out.append(f"{pool} {c}/{m}: binomial p = {pv:.4f} < {a:.4f} against {level:.0%}")
    return out


if __name__ == "__main__":  # pragma: no cover - a maintenance command
    if "--write" in sys.argv:
        write_pairs()
        print(f"wrote {PAIRS_PATH}")
    print(pairs_table())
