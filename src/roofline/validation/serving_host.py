"""The vLLM host time per engine generation (data/presets/serving.toml ``vllm-v0``,
``vllm-v0-multistep``, ``vllm-v1``): the fit on the vLLM runs whose version is known or
assumed — the request-mix runs of data/validation/serving_mix.toml (engine: a generation
profile) and the static vLLM cases of data/validation/serving.toml (V0 by their dates:
``STATIC_GENERATION``, each with its own engine's decode kernel: PR #2192's ``vllm-legacy``
reads the KV cache once per query head; that file's own fit keeps pricing them with ``vllm`` /
``vllm-legacy``) — and its leave-one-source-out error.

What is fitted: per generation, ``step_overhead`` (s per decode step of each pipeline stage)
and ``seq_overhead`` (s per sequence per step) — vLLM's Python scheduler, block manager,
sampler and output processing. Everything else (kernels, all-reduces, the per-layer and
per-request terms) is the ``vllm`` profile's, inherited through ``base``. The multi-step
profile is not fitted: it is the V0 profile with ``scheduler_steps`` = 10 (the runs'
``--num-scheduler-steps``), which pays the step and sequence host time once per 10 steps.

The fit (``fit_host``): coordinate descent — a golden-section search of each factor over its
bounds, ``_STEPS`` steps, ``_ROUNDS`` rounds, from 0 — then ``_SIMPLEX`` Nelder–Mead steps
(``_simplex``) and a compass search (``_pattern``), on the RMS of log(ours / measured) over
one generation's cases, each case simulated with ``rl.simulate_serving`` on step tables built
once per layout without host time (``analysis.stepcost.with_host`` adds each trial's). A
generation without a case among the cases given is not fitted: it takes the fitted
generations' values (what one would assume for a vLLM never measured), and the note says so.
Leave one source out: each source's cases predicted by the fit on the others.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import replace
from statistics import median
from typing import Any

from ..errors import SpecError
from .cases import Case, load_cases
from .holdout import FitReport, Refit, leave_one_source_out
from .serving import _golden

__all__ = ["GENERATIONS", "HOST_PARAMS", "HOST_BOUNDS", "host_cases", "outlier_cases",
           "predict_host",
           "host_errors", "fit_host", "host_holdout", "shipped_host_values", "stored_fits",
           "stored_fit", "write_fits",
           "host_holdout_table", "host_case_table", "outlier_table", "host_miss_table",
           "MISS_TARGET", "tpot_spread_table", "host_direction_table"]

#: the fitted generations; the multi-step profile derives from the first
GENERATIONS = ("vllm-v0", "vllm-v1")
DERIVED = {"vllm-v0-multistep": "vllm-v0"}
HOST_PARAMS = ("step_overhead", "seq_overhead")
HOST_BOUNDS = {"step_overhead": (0.0, 20e-3), "seq_overhead": (0.0, 400e-6)}
_ROUNDS, _STEPS, _SIMPLEX = 2, 12, 30

_DEV: dict[tuple[Any, ...], Any] = {}  # step tables without host time, per layout
_SIM: dict[tuple[Any, ...], Any] = {}  # simulations, per case layout and host factors


#: the static vLLM cases of data/validation/serving.toml (priced there with ``vllm``): vLLM V0
#: by their dates (their sources name no version; data/validation/serving.toml notes)
STATIC_GENERATION = "vllm-v0"
#: the static cases' engines: ``vllm`` and the profiles that differ from it only in kernels
#: (``vllm-legacy``: PagedAttention decode), whose kernel switch the generation profile takes
STATIC_ENGINES = ("vllm", "vllm-legacy")


def _all_cases() -> tuple[Case, ...]:
    from .serving import serving_cases

    names = set(GENERATIONS) | set(DERIVED)
    return tuple(c for c in serving_cases() if c["engine"] in STATIC_ENGINES) + \
        tuple(c for c in load_cases("serving_mix").cases if c["engine"] in names)


def host_cases() -> tuple[Case, ...]:
    """The cases of the vLLM generation profiles — fitted and judged: the request-mix runs
    whose engine is one of them, and the static vLLM cases (``STATIC_GENERATION``); a
    ``known_outlier`` (a row its own numbers contradict: ``outlier_cases``) is not among them."""
    return tuple(c for c in _all_cases() if not c.known_outlier)


def outlier_cases() -> tuple[Case, ...]:
    """The generation profiles' known outliers: shown on the page with their reason, neither
    fitted nor counted in the errors."""
    return tuple(c for c in _all_cases() if c.known_outlier)


def _engine(c: Case) -> str:
    return STATIC_GENERATION if c.domain == "serving" else str(c["engine"])


def _factors(engine: str) -> Any:
    from ..scenarios.serving.plan import serving_factors

    return serving_factors(engine)


def shipped_host_values() -> dict[str, float]:
    """'generation.factor' -> shipped value."""
    return {f"{g}.{n}": float(getattr(_factors(g), n)) for g in GENERATIONS for n in HOST_PARAMS}


def _profile(engine: str, values: Mapping[str, float] | None) -> Any:
    """The engine's profile with ``values`` applied (a derived profile takes its base's)."""
    f = _factors(engine)
    if values is None:
        return f
    g = DERIVED.get(engine, engine)
    return replace(f, **{n: values[f"{g}.{n}"] for n in HOST_PARAMS})


def _simulate(c: Case, factors: Any, seed: int) -> Any:
    import roofline as rl

    from ..analysis.stepcost import step_costs, with_host
    from ..scenarios.serving.plan import without_host
    from .serving_mix import _setup

    n, wl, chunk, mc, budget, isl, n_max = _setup(c, seed)
    lay = (c["model"], c["hardware"], c["tp"], c["pp"], c["precision"], c["kv"], chunk, budget,
           mc, c["prompt"], c.get("trace"), c["engine"])
    dev = _DEV.get(lay)
    if dev is None:
        from ..analysis.simulate import _ref_prompts

        dev = _DEV[lay] = step_costs(
            c["model"], c["hardware"], tp=c["tp"], pp=c["pp"], precision=c["precision"],
            kv_precision=c["kv"], engine=without_host(_factors(c["engine"])),
            max_tokens=n_max, ref_prompts=_ref_prompts(isl))
    key = (lay, c["rate"], c["requests"], c["output"], c["kv_policy"],
           c["max_batched_tokens"], seed, factors)
    sim = _SIM.get(key)
    if sim is None:
        if len(_SIM) > 4096:
            _SIM.clear()
        sim = _SIM[key] = rl.simulate_serving(
            c["model"], c["hardware"], workload=wl,
            requests=None if wl._trace is not None else n, tp=c["tp"], pp=c["pp"],
            max_concurrency=mc, chunk_size=chunk, max_batched_tokens=None if chunk else budget,
            precision=c["precision"], kv_precision=c["kv"], engine=factors,
            kv_policy=c["kv_policy"], seed=seed, costs=with_host(dev, factors))
    return sim


def predict_host(c: Case, values: Mapping[str, float] | None = None) -> float:
    """The simulated value of ``c`` in SI (mean over its seeds) with the generation factors
    ``values`` ('generation.factor'; None: shipped)."""
    from .serving import predict_serving
    from .serving_mix import SIM_METRICS

    f = _profile(_engine(c), values)
    if c.domain == "serving":  # a static batch: rl.serve, with its own engine's decode kernel
        f = replace(f, kv_per_query_head=_factors(c["engine"]).kv_per_query_head)
        return predict_serving(c, f)
    vals = []
    for seed in range(c["seeds"]):
        s = _simulate(c, f, seed)
        if c.metric == "tok_s":
            vals.append(s.throughput_tokens_per_s)
        else:
            attr, stat = SIM_METRICS[c.metric]
            vals.append(getattr(getattr(s, attr), stat))
    return sum(vals) / len(vals)


def host_errors(values: Mapping[str, float] | None = None,
                cases: Sequence[Case] | None = None) -> list[tuple[Case, float, float]]:
    """(case, ours, log(ours / measured)) for each case."""
    out = []
    for c in host_cases() if cases is None else cases:
        v = predict_host(c, values)
        out.append((c, v, math.log(v / c.value_si)))
    return out


def _fit_generation(g: str, mine: Sequence[Case]) -> dict[str, float]:
    """HOST_PARAMS of generation ``g`` fitted on its cases ``mine`` (memoised per case set:
    a leave-one-source-out fit that keeps all of a generation's cases reuses it)."""
    key = (g, tuple(sorted(c.id for c in mine)))
    if key in _FITS:
        return dict(_FITS[key])
    cur = {f"{g}.{n}": 0.0 for n in HOST_PARAMS}

    def score(vals: dict[str, float]) -> float:
        es = [e for _, _, e in host_errors({**_ZERO, **vals}, mine)]
        return math.sqrt(sum(e * e for e in es) / len(es))

    def coordinates(cur: dict[str, float]) -> dict[str, float]:
        cur = dict(cur)
        best = score(cur)
        for nm in HOST_PARAMS:
            k = f"{g}.{nm}"

            def f(v: float, k: str = k) -> float:
                return score({**cur, k: v})

            xv, fv = _golden(f, *HOST_BOUNDS[nm], steps=_STEPS)
            if fv < best:
                best, cur[k] = fv, xv
        return cur

    for _ in range(_ROUNDS):
        cur = coordinates(cur)
    keys = [f"{g}.{n}" for n in HOST_PARAMS]
    # along the valley, then a pattern search: the simulated objective is not smooth (each
    # trial moves discrete scheduling events), so the end point is a minimum at the
    # resolution of its last steps, not of a golden section
    cur = _pattern(score, _simplex(score, cur, keys), keys)
    _FITS[key] = dict(cur)
    return cur


def _pattern(score: Any, cur: dict[str, float], keys: list[str]) -> dict[str, float]:
    """Compass search: each factor moved by ± 5 %, then 2 %, then 1 % of its interval (within
    it) while that lowers ``score``; the result is no worse than any such move."""
    cur, best = dict(cur), score(cur)
    for frac in (0.05, 0.02, 0.01):
        moved = True
        while moved:
            moved = False
            for k in keys:
                lo, hi = HOST_BOUNDS[k.split(".", 1)[1]]
                for v in (cur[k] - frac * (hi - lo), cur[k] + frac * (hi - lo)):
                    if lo <= v <= hi:
                        fv = score({**cur, k: v})
                        if fv < best:
                            best, cur[k], moved = fv, v, True
    return cur


def _simplex(score: Any, start: dict[str, float], keys: list[str],
             iters: int = _SIMPLEX) -> dict[str, float]:
    """Nelder–Mead from ``start`` over ``keys`` in units of each factor's interval, clipped
    to the intervals: the coordinate search creeps along a valley where the per-step and
    per-sequence terms trade off (a run whose batch hardly changes); this follows it."""
    lo = [HOST_BOUNDS[k.split(".", 1)[1]][0] for k in keys]
    span = [HOST_BOUNDS[k.split(".", 1)[1]][1] - a for k, a in zip(keys, lo)]

    def val(x: list[float]) -> dict[str, float]:
        return {**start, **{k: a + min(max(xi, 0.0), 1.0) * w
                            for k, xi, a, w in zip(keys, x, lo, span)}}

    x0 = [(start[k] - a) / w for k, a, w in zip(keys, lo, span)]
    pts = [x0] + [[xi + (0.05 if i == j else 0.0) for j, xi in enumerate(x0)]
                  for i in range(len(keys))]
    fs = [score(val(x)) for x in pts]
    for _ in range(iters):
        order = sorted(range(len(pts)), key=fs.__getitem__)
        pts, fs = [pts[i] for i in order], [fs[i] for i in order]
        c = [sum(x[j] for x in pts[:-1]) / (len(pts) - 1) for j in range(len(keys))]
        xr = [2 * cj - wj for cj, wj in zip(c, pts[-1])]
        fr = score(val(xr))
        if fr < fs[0]:
            xe = [3 * cj - 2 * wj for cj, wj in zip(c, pts[-1])]
            fe = score(val(xe))
            pts[-1], fs[-1] = (xe, fe) if fe < fr else (xr, fr)
        elif fr < fs[-2]:
            pts[-1], fs[-1] = xr, fr
        else:
            xc = [(cj + wj) / 2 for cj, wj in zip(c, pts[-1])]
            fc = score(val(xc))
            if fc < fs[-1]:
                pts[-1], fs[-1] = xc, fc
            else:  # shrink toward the best
                pts = [pts[0]] + [[(a + b) / 2 for a, b in zip(pts[0], x)] for x in pts[1:]]
                fs = [fs[0]] + [score(val(x)) for x in pts[1:]]
    return val(pts[min(range(len(pts)), key=fs.__getitem__)])


_FITS: dict[tuple[Any, ...], dict[str, float]] = {}
_ZERO = {f"{g}.{n}": 0.0 for g in GENERATIONS for n in HOST_PARAMS}


def fit_host(cases: Sequence[Case] | None = None) -> Refit:
    """Fit HOST_PARAMS of each generation with a case in ``cases`` on its own cases (a
    derived profile's count as its base's); the others take the fitted ones' mean."""
    cases = list(host_cases() if cases is None else cases)
    gen_of = {c.id: DERIVED.get(_engine(c), _engine(c)) for c in cases}
    fitted = [g for g in GENERATIONS if g in gen_of.values()]
    cur = dict(_ZERO)
    for g in fitted:
        cur.update(_fit_generation(g, [c for c in cases if gen_of[c.id] == g]))
    notes = []
    for g in GENERATIONS:
        if g in fitted or not fitted:
            continue
        for nm in HOST_PARAMS:
            cur[f"{g}.{nm}"] = sum(cur[f"{x}.{nm}"] for x in fitted) / len(fitted)
        notes.append(f"no {g} case left: its {', '.join(HOST_PARAMS)} take the fitted "
                     f"generations' values ({', '.join(fitted)})")
    return Refit(values=cur, note="; ".join(notes))


FITS_FILE = "serving_host_fits.toml"  #: data/validation/: the fits' stored results


def _fit_label(cases: Sequence[Case]) -> str:
    srcs = list(dict.fromkeys(c.source for c in host_cases()))
    left = [x for x in srcs if x not in {c.source for c in cases}]
    return "all" if not left else "without " + ", ".join(left)


def stored_fits() -> dict[str, Refit]:
    """The fits' results as stored in data/validation/serving_host_fits.toml (written by
    ``write_fits``): 'all' and 'without <source>' -> Refit."""
    from .._data import DATA, read_toml

    doc = read_toml(DATA / "validation" / FITS_FILE)
    return {k: Refit(values={n: float(v) for n, v in t["values"].items()}, note=t["note"])
            for k, t in doc["fit"].items()}


def stored_fit(cases: Sequence[Case]) -> Refit:
    """The stored result of ``fit_host(cases)`` (the case sets host_holdout fits)."""
    return stored_fits()[_fit_label(cases)]


def write_fits() -> str:
    """Run ``fit_host`` on every case and without each source; the TOML text of the file."""
    cs = list(host_cases())
    sets = [cs] + [[c for c in cs if c.source != x] for x in dict.fromkeys(c.source for c in cs)]
    out = ["# The results of roofline.validation.serving_host.fit_host (the vLLM generations' host",
           "# time) on every case and without each source, as docs/validation/serving.md reports",
           "# them; generated, not edited: python -m roofline.validation.serving_host --write",
           "# (tests/validation/test_validation_serving_host.py checks each is the fit's minimum).",
           "schema = 1", ""]
    for sub in sets:
        r = fit_host(sub)
        out += [f'[fit."{_fit_label(sub)}"]', f"note = {json.dumps(r.note)}",
                f'[fit."{_fit_label(sub)}".values]']
        out += [f'"{k}" = {v!r}' for k, v in r.values.items()] + [""]
    return "\n".join(out)


def host_holdout(cases: Sequence[Case] | None = None, fit: Any = None) -> FitReport:
    """In-sample and leave-one-source-out error of the generation profiles. ``fit``: the
    fitting function (default: the stored results of ``fit_host``, ``stored_fit``; pass
    ``fit_host`` to run it)."""
    cs = list(host_cases() if cases is None else cases)

    def log_errors(values: Mapping[str, float] | None, sub: Sequence[Case]) -> list[float]:
        return [e for _, _, e in host_errors(values, sub)]

    return leave_one_source_out("vLLM generations", cs,
                                [f"{g}.{n}" for g in GENERATIONS for n in HOST_PARAMS],
                                shipped_host_values(), fit or stored_fit, log_errors)


def _fmt(k: str, v: float) -> str:
    return f"{v * 1e3:.2f} ms" if k.endswith("step_overhead") else f"{v * 1e6:.1f} µs"


def host_holdout_table(rep: FitReport | None = None) -> str:
    """The markdown hold-out tables of docs/validation/serving.md, "vLLM generations"."""
    from .holdout import holdout_tables

    return holdout_tables(host_holdout() if rep is None else rep, _fmt)


#: the unseen-source target of issue 18 on these cases: a median |error| at or under this
MISS_TARGET = 0.10


def _table_args(errs: Sequence[tuple[Case, float, float]],
                held: Mapping[str, float] | None) -> None:
    """The host tables' inputs: at least one case, and (given) a held-out error for each."""
    if not errs:
        raise SpecError("errs=[]: the host tables need at least one (case, ours, log error) "
                        "row (host_errors())")
    if held is not None:
        missing = [c.id for c, _, _ in errs if c.id not in held]
        if missing:
            raise SpecError(f"held lacks {len(missing)} of the {len(errs)} cases in errs "
                            f"(first: {missing[0]!r}): it must map every case id to its "
                            "held-out log error (host_holdout().held_out_errors)")


def host_miss_table(errs: Sequence[tuple[Case, float, float]],
                    held: Mapping[str, float]) -> str:
    """Where the cases' held-out median comes from, per source (docs/validation/serving.md,
    "what the remaining miss is made of"): its cases, its median |error| held out and
    in-sample, how many of its cases are more than ``MISS_TARGET`` off each way, and the median
    over every case with this source's cases at their in-sample errors and every other case
    held out (what this source's own fold costs the pooled figure); the last row, every case.
    ``errs``: ``host_errors()``; ``held``: case id -> log error of the fit without its source
    (``host_holdout().held_out_errors``). Either empty, or a case missing from ``held``:
    SpecError."""
    _table_args(errs, held)

    def mag(e: float) -> float:
        return abs(math.expm1(e))

    rows = [(c.source, mag(e), mag(held[c.id])) for c, _, e in errs]
    lines = ["| source | cases | held out: median | in-sample: median | "
             f"over {MISS_TARGET:.0%}: held out | "
             "in-sample | all cases' held-out median, this source in-sample |",
             "|---|---:|---:|---:|---:|---:|---:|"]

    def cells(sub: Sequence[tuple[str, float, float]]) -> str:
        return (f"{len(sub)} | {median([h for _, _, h in sub]):.1%} | "
                f"{median([i for _, i, _ in sub]):.1%} | "
                f"{sum(h > MISS_TARGET for _, _, h in sub)} | "
                f"{sum(i > MISS_TARGET for _, i, _ in sub)}")

    for src in dict.fromkeys(r[0] for r in rows):
        mixed = [i if s == src else h for s, i, h in rows]
        lines.append(f"| {src} | {cells([r for r in rows if r[0] == src])} | "
                     f"{median(mixed):.1%} |")
    lines.append(f"| every case | {cells(rows)} | |")
    return "\n".join(lines).replace("%", " %")


#: a case's metric -> its label in ``host_direction_table``; a latency priced below the
#: measured one and a throughput priced above it are both "faster than measured"
_METRIC_LABEL = {"ttft_p50": "p50 TTFT", "ttft_p99": "p99 TTFT", "tpot_p50": "p50 TPOT",
                 "tpot_p99": "p99 TPOT", "tok_s": "output tok/s", "e2e": "e2e latency"}


def host_direction_table(errs: Sequence[tuple[Case, float, float]],
                         held: Mapping[str, float]) -> str:
    """Which way each source's cases miss, per metric (docs/validation/serving.md, "what the
    remaining miss is made of"): per (source, metric), the cases, the median signed error held
    out and in-sample, and how many are priced faster than measured held out (a latency below
    it, a throughput above it). ``errs``: ``host_errors()``; ``held``: case id -> log error of
    the fit without its source (``host_holdout().held_out_errors``). Either empty, or a case
    missing from ``held``: SpecError (``_table_args``, as the other host tables)."""
    _table_args(errs, held)
    odd = [(c.id, c.metric) for c, _, _ in errs if c.metric not in _METRIC_LABEL]
    if odd:  # which way is "faster" is known only for these
        raise SpecError(f"errs: case {odd[0][0]!r} has metric {odd[0][1]!r}; the direction "
                        f"table knows {sorted(_METRIC_LABEL)} (tok_s a throughput, the rest "
                        "latencies)")
    groups: dict[tuple[str, str], list[tuple[float, float]]] = {}
    for c, _, e in errs:
        groups.setdefault((c.source, c.metric), []).append((held[c.id], e))
    lines = ["| source | metric | cases | held out: median error | in-sample: median error | "
             "held out: priced faster than measured |", "|---|---|---:|---:|---:|---:|"]
    for (src, metric), rows in groups.items():
        faster = sum(h > 0 if metric == "tok_s" else h < 0 for h, _ in rows)
        lines.append(f"| {src} | {_METRIC_LABEL[metric]} | {len(rows)} | "
                     f"{math.expm1(median([h for h, _ in rows])):+.1%} | "
                     f"{math.expm1(median([i for _, i in rows])):+.1%} | "
                     f"{faster} of {len(rows)} |")
    return "\n".join(lines).replace("%", " %")


def tpot_spread_table(errs: Sequence[tuple[Case, float, float]]) -> str:
    """Per run with both a p50 and a p99 TPOT case (ids ending "p50 TPOT" / "p99 TPOT"): the
    two measured and ours (shipped fit) in ms and their ratio p99 / p50, the spread of the
    per-request TPOT across a run's requests. ``errs``: ``host_errors()``."""
    by_id = {c.id: (c.value_si, v) for c, v, _ in errs}
    lines = ["| run | measured p50 / p99 TPOT | p99 / p50 | ours p50 / p99 | p99 / p50 |",
             "|---|---:|---:|---:|---:|"]
    for c, _, _ in errs:
        if not c.id.endswith(" p50 TPOT") or c.id[:-8] + "p99 TPOT" not in by_id:
            continue
        (m50, o50), (m99, o99) = by_id[c.id], by_id[c.id[:-8] + "p99 TPOT"]
        lines.append(f"| {c.id[:-9]} | {m50 * 1e3:.1f} / {m99 * 1e3:.1f} ms | {m99 / m50:.2f} | "
                     f"{o50 * 1e3:.1f} / {o99 * 1e3:.1f} ms | {o99 / o50:.2f} |")
    return "\n".join(lines)


def host_case_table(errs: Sequence[tuple[Case, float, float]] | None = None,
                    held: Mapping[str, float] | None = None) -> str:
    """Per case: the generation profile, ours (shipped), measured, the error in-sample and
    held out (``held``: case id -> log error of the fit without its source). ``errs`` empty,
    or a case missing from ``held``: SpecError."""
    errs = host_errors() if errs is None else errs
    _table_args(errs, held)
    lines = ["| case | source | profile | ours | measured | unit | error | held out |",
             "|---|---|---|---:|---:|---|---:|---:|"]
    for c, v, e in errs:
        scale = c.measured / c.value_si  # SI -> the published unit
        h = "" if held is None else f"{math.expm1(held[c.id]):+.1%}"
        lines.append(f"| {c.id} | {c.source} | {_engine(c)} | {v * scale:,.4g} | "
                     f"{c.measured:,.4g} | {c.unit} | {math.expm1(e):+.1%} | {h} |")
    return "\n".join(lines)


def outlier_table() -> str:
    """The known outliers (``outlier_cases``): ours with the shipped values and with the stored
    fit without their source, measured, and why they are neither fitted nor counted."""
    fits = stored_fits()
    lines = ["| case | profile | ours | without its source | measured | unit | why not fitted |",
             "|---|---|---:|---:|---:|---|---|"]
    for c in outlier_cases():
        scale = c.measured / c.value_si
        v = predict_host(c)
        w = predict_host(c, fits[f"without {c.source}"].values)
        lines.append(f"| {c.id} | {_engine(c)} | {v * scale:,.4g} ({v / c.value_si - 1:+.1%}) | "
                     f"{w * scale:,.4g} ({w / c.value_si - 1:+.1%}) | {c.measured:,.4g} | "
                     f"{c.unit} | {c.reason} |")
    return "\n".join(lines)


if __name__ == "__main__":  # python -m roofline.validation.serving_host --write
    import sys

    from .._data import DATA

    text = write_fits()
    if "--write" in sys.argv:
        (DATA / "validation" / FITS_FILE).write_text(text + "\n", encoding="utf-8")
    print(text)
