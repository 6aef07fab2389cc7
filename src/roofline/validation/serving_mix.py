"""``rl.simulate_serving`` against published serving runs under a request mix
(data/validation/serving_mix.toml): the predictions, their errors and the tables of
docs/validation/serving.md, "Request mixes". Nothing is fitted here; the vLLM runs' engine
profiles (vllm-v0, vllm-v0-multistep, vllm-v1) are fitted on them in
roofline.validation.serving_host, whose page section gives their held-out errors."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from ..errors import SpecError
from .cases import Case, load_cases

__all__ = ["trace_rows", "implied_concurrency", "predict", "predictions", "summary",
           "summary_table", "case_table", "SIM_METRICS", "host_time_per_sequence"]

#: metric -> (ServingSim attribute, statistic)
SIM_METRICS = {"ttft_p50": ("ttft", "p50"), "ttft_p99": ("ttft", "p99"),
               "tpot_p50": ("tpot", "p50"), "tpot_p99": ("tpot", "p99")}

_COSTS: dict[tuple[Any, ...], Any] = {}


def trace_rows(name: str) -> list[tuple[int, int, float]]:
    """The (prompt tokens, output tokens, arrival s) rows of trace file ``name``
    (data/validation/traces/): every request at t = 0, an output of 0 tokens (the client's
    re-tokenised count of an empty text: one sampled token, the end of sequence) counted as 1."""
    import json

    from .._data import DATA

    doc = json.loads((DATA / "validation" / "traces" / name).read_text(encoding="utf-8"))
    return [(int(p), max(int(o), 1), 0.0) for p, o in zip(doc["input_lens"], doc["output_lens"])]


def _workload(c: Case) -> Any:
    import roofline as rl

    from ..analysis.workload import parse_lengths

    if c.get("trace"):  # the run's own requests, all offered at once
        rows = trace_rows(c["trace"])
        return len(rows), lambda seed: rl.Workload(trace=rows)
    p, o = parse_lengths(c["prompt"], "prompt"), parse_lengths(c["output"], "output")
    if math.isinf(c["rate"]):  # every request offered at once: a trace at t = 0
        n = c["requests"]
        seed_wl = rl.Workload(prompt=p, output=o, rate=1.0)
        return n, lambda seed: rl.Workload(trace=[
            (int(i), int(j), 0.0) for i, j in zip(*seed_wl.sample(n, seed)[1:])])
    wl = rl.Workload(prompt=p, output=o, rate=float(c["rate"]))
    return c["requests"], lambda seed: wl


def _setup(c: Case, seed: int) -> tuple[int, Any, int | None, int, int, Any, int]:
    """(requests, workload, chunk size or None, max concurrency, the step's token budget, the
    prompt lengths of the seed's draw, the most tokens a step carries) of case ``c``."""
    n, make = _workload(c)
    wl = make(seed)
    chunk = c["chunk"] or None
    mc = c["max_concurrency"]
    budget = chunk if chunk else c["max_batched_tokens"]
    _, isl, _ = wl.sample(n if wl._trace is None else None, seed)
    n_max = (budget + mc) if chunk else max(budget, int(isl.max())) + mc
    return n, wl, chunk, mc, budget, isl, n_max


def _run(c: Case, seed: int) -> Any:
    import roofline as rl

    from ..analysis.simulate import _ref_prompts
    from ..analysis.stepcost import step_costs

    n, wl, chunk, mc, budget, isl, n_max = _setup(c, seed)
    key = (c["model"], c["hardware"], c["tp"], c["pp"], c["precision"], c["kv"], c["engine"],
           chunk, budget, mc, c["prompt"], c.get("trace"))
    costs = _COSTS.get(key)
    if costs is None:
        costs = step_costs(c["model"], c["hardware"], tp=c["tp"], pp=c["pp"],
                           precision=c["precision"], kv_precision=c["kv"], engine=c["engine"],
                           max_tokens=n_max, ref_prompts=_ref_prompts(isl))
        _COSTS[key] = costs
    return rl.simulate_serving(c["model"], c["hardware"], workload=wl,
                               requests=None if wl._trace is not None else n, tp=c["tp"],
                               pp=c["pp"], max_concurrency=mc, chunk_size=chunk,
                               max_batched_tokens=None if chunk else budget,
                               precision=c["precision"], kv_precision=c["kv"],
                               engine=c["engine"], kv_policy=c["kv_policy"], seed=seed,
                               costs=costs)


def predict(c: Case) -> tuple[float, bool]:
    """(the simulated value in SI — mean over the case's seeds —, overloaded in any seed)."""
    vals, over = [], False
    for seed in range(c["seeds"]):
        s = _run(c, seed)
        over |= s.overloaded
        if c.metric == "tok_s":
            vals.append(s.throughput_tokens_per_s)
        else:
            attr, stat = SIM_METRICS[c.metric]
            vals.append(getattr(getattr(s, attr), stat))
    return float(np.mean(vals)), over


def predictions() -> list[tuple[Case, float, bool]]:
    """Every case with its prediction (SI) and overload flag."""
    return [(c, *predict(c)) for c in load_cases("serving_mix").cases]


def summary(rows: list[tuple[Case, float, bool]]) -> dict[str, dict[str, float]]:
    """Per source and overall: n, RMS of log(ours/measured), median |error|, worst error."""
    groups: dict[str, list[float]] = {"all": []}
    for c, v, _ in rows:
        e = math.log(v / c.value_si)
        groups["all"].append(e)
        groups.setdefault(c.source, []).append(e)
    out = {}
    for k, es in groups.items():
        a = np.asarray(es)
        worst = a[np.argmax(np.abs(a))]
        out[k] = {"n": len(a), "rms_log": float(np.sqrt(np.mean(a * a))),
                  "median_abs": float(np.median(np.abs(np.expm1(a)))),
                  "worst": float(np.expm1(worst))}
    return out


def case_table(rows: list[tuple[Case, float, bool]]) -> str:
    """The cases table of docs/validation/serving.md, "Request mixes"."""
    lines = ["| case | source | ours | measured | unit | error |", "|---|---|---:|---:|---|---:|"]
    for c, v, over in rows:
        scale = 1e3 if c.unit == "ms" else 1.0
        flag = (" (overloaded)" if over else "") + (" (known outlier)" if c.known_outlier else "")
        lines.append(f"| {c.id}{flag} | {c.source} | {v * scale:,.4g} | {c.measured:,.4g} | "
                     f"{c.unit} | {v / c.value_si - 1:+.1%} |")
    return "\n".join(lines)


_LABELS = {"all": "all", "vllm_azure": "vLLM, Poisson rates with p50/p99 (vllm_azure)",
           "lambda_vllm": "vLLM v0.5.4 / v0.6.0, 5000 prompts at once (lambda_vllm)",
           "lambda_traces": "vLLM v0.5.4, 10-320 prompts at once, per-request traces "
                            "(lambda_traces)",
           "lambda_ms_traces": "vLLM multi-step (10), 320 prompts at once, per-request "
                               "traces (lambda_ms_traces)",
           "trtbench16": "TensorRT-LLM, saturated (trtbench16)"}


def summary_table(rows: list[tuple[Case, float, bool]]) -> str:
    """The summary table of docs/validation/serving.md, "Request mixes"."""
    lines = ["| cases | n | RMS log error | median abs error | worst |",
             "|---|---:|---:|---:|---:|"]
    for k, s in summary(rows).items():
        lines.append(f"| {_LABELS.get(k, k)} | {s['n']} | {s['rms_log']:.3f} | "
                     f"{s['median_abs']:.1%} | {s['worst']:+.1%} |")
    return "\n".join(lines)


def implied_concurrency(c: Case) -> float:
    """The sequences decoding at once that a throughput case's own row implies, by Little's law:
    each decoding sequence gets one token per engine step, so throughput × inter-token time is
    the number in flight — with the row's published median ITL (``median_itl``), divided by the
    engine's scheduler steps (multi-step scheduling streams k tokens per chunk: one ITL spans k
    steps). The median of a right-skewed ITL is below its mean, so this undercounts."""
    from ..scenarios.serving.plan import serving_factors

    if c.metric != "tok_s" or c.get("median_itl") is None:
        raise SpecError(f"implied_concurrency: case {c.id!r} has metric {c.metric!r} and "
                        f"median_itl {c.get('median_itl')!r}; it needs a tok_s case with a "
                        "median_itl")
    k = int(serving_factors(c["engine"]).scheduler_steps)
    return c.value_si * float(c["median_itl"]) * 1e-3 / k


def host_time_per_sequence(rows: list[tuple[Case, float, bool]], model: str) -> float:
    """The lambda_vllm source's vLLM v0.6.0 host time per sequence per decode step, s, of
    ``model`` ("8B" | "70B"), from two measured rows alone: with 256 sequences in flight a step
    lasts 256 / throughput = device + h/k + r, k the scheduler steps per host pass (multi-step
    scheduling runs the host work once per k steps), so h = (step(k=1) − step(k=10)) /
    (1 − 1/10), h / 256 per sequence."""
    tput = {c.id.split("scheduler steps ")[1].split()[0]: c.value_si for c, _, _ in rows
            if c.source == "lambda_vllm" and c.metric == "tok_s" and f" {model} " in c.id
            and "scheduler steps" in c.id}
    step1, step10 = 256 / tput["1"], 256 / tput["10"]
    return (step1 - step10) / 0.9 / 256
