"""rl.train against published Megatron-LM runs (data/validation/training.toml), and the one fit
of the training factors (data/presets/training.toml ``[gpu]``) with its leave-one-source-out error.

Narayanan et al. 2021 (source ``N21``) publish achieved TFLOP/s per GPU under their Eq. 3,
F = 96·B·s·l·h²·(1 + s/(6h) + V/(16·l·h)), which assumes full recomputation (Sec. 5.1); the
measured step time is derived as F / (TFLOP/s × GPUs) (``measured_step_time``). Korthikanti et al.
2022 (``K22``) publish iteration times. Micro-batch size and interleaving, where a source does
not give them, are searched (micro-batch 1, 2, 4, 8; interleave 1–4): the fastest valid choice our
model predicts, as if the authors tuned them (N21 Sec. 3.4 and 5).

The fit (``fit_training``, the procedure of the former ``scenarios/_training_fit.py`` that set the
shipped values): coordinate descent on a grid (``GRID``), three rounds, each factor in turn set to
the grid value minimising the mean |log(ours / published)| over the cases given, starting from
``START``. The ``[tpu]`` factors are not fitted (assumed; no TPU run is validated).
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any

from .cases import Case, load_cases
from .holdout import FitReport, Refit, fmt_pct, leave_one_source_out, span_pct

__all__ = ["GRID", "START", "PARAMS", "training_cases", "gpt_model", "measured_step_time",
           "predict_training", "training_errors", "fit_training", "training_holdout",
           "training_case_table", "training_holdout_table", "training_figures"]

PARAMS = ("gemm_max", "gemm_half_size", "scale_up_efficiency", "scale_out_efficiency")
GRID: dict[str, list[float]] = {
    "gemm_max": [round(0.55 + 0.01 * i, 2) for i in range(41)],
    "gemm_half_size": [16.0, 32.0, 64.0, 96.0, 128.0, 192.0, 256.0, 384.0, 512.0],
    "scale_up_efficiency": [round(0.4 + 0.05 * i, 2) for i in range(13)],
    "scale_out_efficiency": [round(0.3 + 0.05 * i, 2) for i in range(15)],
}
START = {"gemm_max": 0.75, "gemm_half_size": 32.0, "scale_up_efficiency": 0.8,
         "scale_out_efficiency": 0.8}
_ROUNDS = 3


def training_cases() -> tuple[Case, ...]:
    """The published training cases (data/validation/training.toml)."""
    return load_cases("training").cases


def _eq3_flops(sc: Mapping[str, Any]) -> float:
    B, s, L, h, V = (sc["global_batch"], sc["seq_len"], sc["layers"], sc["hidden"],
                     sc["vocab"])
    return float(96 * B * s * L * h**2 * (1 + s / (6 * h) + V / (16 * L * h)))


def measured_step_time(case: Case) -> tuple[float, str]:
    """The published step time of ``case`` in s, and how it was obtained."""
    if case.metric == "step_time":
        return case.value_si, f"{case.where}: {case.measured:g} s"
    sc = case.scenario
    F = _eq3_flops(sc)
    t = F / (case.value_si * sc["gpus"])
    B, s, L, h, V = (sc["global_batch"], sc["seq_len"], sc["layers"], sc["hidden"],
                     sc["vocab"])
    return t, (f"Eq. 3: F = 96·{B}·{s}·{L}·{h}²·(1 + {s}/(6·{h}) + {V}/(16·{L}·{h})) = "
               f"{F:.4e} FLOP; t = F / ({case.measured:g} TFLOP/s × {sc['gpus']}) = {t:.3f} s")


_MODELS: dict[tuple[int, int, int, int, int], Any] = {}


def gpt_model(heads: int, hidden: int, layers: int, vocab: int = 51200,
              seq_len: int = 2048) -> Any:
    """A Megatron GPT (GPT-2 architecture: LayerNorm, GELU, 4h MLP, biases, learned positions,
    tied embeddings) of the given shape."""
    from ..graphs.model import transformer_model
    from ..graphs.transformer import from_hf_config

    k = (heads, hidden, layers, vocab, seq_len)
    m = _MODELS.get(k)
    if m is None:
        cfg = from_hf_config({"model_type": "gpt2", "n_embd": hidden, "n_head": heads,
                              "n_layer": layers, "n_positions": seq_len, "vocab_size": vocab,
                              "activation_function": "gelu_new"},
                             name=f"megatron-gpt-{layers}x{hidden}")
        m = transformer_model(cfg, key=cfg.name, source=load_cases("training").sources["N21"])
        _MODELS[k] = m
    return m


def predict_training(case: Case, preset: str = "default") -> tuple[float, dict[str, object]]:
    """Our step time for ``case`` (the fastest over unpublished knobs) and the chosen knobs.
    Pipeline sends blocking (``pp_overlap=False``): both sources (2021, 2022) ran before
    Megatron-LM had overlap_p2p_comm (NVIDIA/Megatron-LM f9283c5a8a, 2023-05-31)."""
    from ..scenarios.training import train

    sc = case.scenario
    m = gpt_model(sc["heads"], sc["hidden"], sc["layers"], sc["vocab"], sc["seq_len"])
    tp, pp, gpus, gb = sc["tp"], sc["pp"], sc["gpus"], sc["global_batch"]
    dp = gpus // (tp * pp)
    bs = [sc["micro_batch"]] if "micro_batch" in sc else [1, 2, 4, 8]
    vs = [sc["interleave"]] if "interleave" in sc else [1, 2, 3, 4]
    best: tuple[float, dict[str, object]] | None = None
    for b in bs:
        if gb % (dp * b):
            continue
        for v in vs:
            lps = sc["layers"] // pp
            mcount = gb // (dp * b)
            if lps % v or (v > 1 and (pp == 1 or mcount % pp)):
                continue
            r = train(m, sc["cluster"], nodes=gpus // 8, global_batch=gb,
                      seq_len=sc["seq_len"], micro_batch=b, tp=tp, pp=pp, dp=dp, interleave=v,
                      recompute=sc["recompute"], zero=sc["zero"], precision=sc["precision"],
                      sequence_parallel=sc["sequence_parallel"],
                      fused_attention=sc["fused_attention"], dropout=sc["dropout"],
                      dp_overlap=sc["dp_overlap"], preset=preset, pp_overlap=False)
            if not r.feasible:
                continue
            if best is None or r.step_time < best[0]:
                best = (r.step_time, {"micro_batch": b, "interleave": v, "mfu": r.mfu,
                                      "memory_gib": r.memory_per_device["total"] / 2**30})
    if best is None:
        raise RuntimeError(f"{case.id}: no feasible configuration")
    return best


@contextmanager
def _factors(values: Mapping[str, float] | None) -> Iterator[None]:
    """Price with these [gpu] training factors instead of the shipped ones (None: shipped)."""
    from ..scenarios.training import factors as T

    if values is None:
        yield
        return
    T._OVERRIDE["gpu"] = T.TrainingFactors.fitted(**{k: float(values[k]) for k in PARAMS})
    try:
        yield
    finally:
        T._OVERRIDE.pop("gpu", None)


def training_errors(values: Mapping[str, float] | None = None,
                    cases: Sequence[Case] | None = None,
                    preset: str = "default") -> list[tuple[Case, float, float, dict[str, object]]]:
    """(case, predicted s, relative error, knobs) for each case; ``values``: [gpu] training
    factors to use instead of the shipped ones."""
    out = []
    with _factors(values):
        for c in (training_cases() if cases is None else cases):
            t, knobs = predict_training(c, preset)
            out.append((c, t, t / measured_step_time(c)[0] - 1.0, knobs))
    return out


def _log_errors(values: Mapping[str, float] | None, cases: Sequence[Case]) -> list[float]:
    return [math.log1p(e) for _, _, e, _ in training_errors(values, cases)]


def fit_training(cases: Sequence[Case] | None = None,
                 start: Mapping[str, float] | None = None) -> Refit:
    """The one fit of the [gpu] training factors on ``cases`` (default: all)."""
    cs = list(training_cases() if cases is None else cases)
    cur = dict(START if start is None else start)
    memo: dict[tuple[float, ...], float] = {}

    def score(vals: dict[str, float]) -> float:
        k = tuple(vals[p] for p in PARAMS)
        if k not in memo:
            e = _log_errors(vals, cs)
            memo[k] = sum(abs(x) for x in e) / len(e)
        return memo[k]

    for _ in range(_ROUNDS):
        for k, grid in GRID.items():
            cur[k] = min(grid, key=lambda x: score({**cur, k: x}))
    return Refit(values=cur)


def _fit_values(f: Any) -> dict[str, float]:
    """A TrainingFactors in the fit's parametrisation (gemm_max, gemm_half_size = the M and N
    half size, scale_up_efficiency, scale_out_efficiency)."""
    gemm = getattr(f, "gemm", None)
    if gemm is not None:  # grouped: gemm.max, gemm.a (= b = 2c by the fit's parametrisation)
        return {"gemm_max": float(gemm.max), "gemm_half_size": float(gemm.a),
                "scale_up_efficiency": float(f.scale_up_efficiency),
                "scale_out_efficiency": float(f.scale_out_efficiency)}
    return {k: float(getattr(f, k)) for k in PARAMS}


def training_holdout(cases: Sequence[Case] | None = None) -> FitReport:
    """In-sample and leave-one-source-out error of the [gpu] training factors."""
    from ..scenarios.training import training_factors

    cs = list(training_cases() if cases is None else cases)
    shipped = _fit_values(training_factors("gpu"))
    return leave_one_source_out("training [gpu]", cs, PARAMS, shipped, fit_training,
                                _log_errors)


def training_holdout_table(rep: FitReport | None = None) -> str:
    """The markdown hold-out tables of docs/validation/training.md."""
    from .holdout import holdout_tables

    return holdout_tables(training_holdout() if rep is None else rep,
                          lambda k, v: f"{v:g}")


def training_case_table(res: list[tuple[Case, float, float, dict[str, object]]] | None = None
                        ) -> str:
    """The markdown table of docs/validation/training.md (generated; a test checks the doc);
    ``res``: ``training_errors()`` when computed."""
    rows = ["| case | split (t·p·d, micro-batch, v, recompute) | published step | ours | error "
            "| source |", "|---|---|---|---|---|---|"]
    res = training_errors() if res is None else res
    for c, t, e, k in res:
        sc = c.scenario
        rc = sc["recompute"] + (" + SP" if sc["sequence_parallel"] else "")
        d = sc["gpus"] // (sc["tp"] * sc["pp"])
        chosen = "" if "micro_batch" in sc else " (searched)"
        rows.append(f"| {c.id} | {sc['tp']}·{sc['pp']}·{d}, b={k['micro_batch']}, "
                    f"v={k['interleave']}{chosen}, {rc} | {measured_step_time(c)[0]:.3f} s | "
                    f"{t:.3f} s | {e:+.1%} | {c.source} {c.where.split(' (')[0]} |")
    err = sorted(abs(e) for _, _, e, _ in res)
    n = len(err)
    med = (err[n // 2] if n % 2 else 0.5 * (err[n // 2 - 1] + err[n // 2]))
    rows.append("")
    rows.append(f"**{n} cases: median |error| {med:.1%}, max |error| {max(err):.1%}.**")
    return "\n".join(rows)


def training_figures(res: list[tuple[Case, float, float, dict[str, object]]] | None = None,
                     rep: FitReport | None = None) -> dict[str, str]:
    """The figures the Megatron sections of docs/validation/training.md quote (inline
    ``<!--v:KEY-->`` markers), from the case errors and hold-out its tables use: the MFU
    range, each paper predicted by the fit on the other (median, worst, the scale-up
    efficiency it lands on), the pooled held-out median and worst, the named rows' errors."""
    res = training_errors() if res is None else res
    rep = training_holdout() if rep is None else rep

    mfu = [float(k["mfu"]) for _, _, _, k in res]  # type: ignore[arg-type]
    err = {c.id: e for c, _, e, _ in res}
    out = {"trm.mfu.low": f"{min(mfu):.2f}", "trm.mfu.high": f"{max(mfu):.2f}",
           "trm.loso.median": fmt_pct(rep.loso.median_abs, 1, sign=False),
           "trm.loso.worst": fmt_pct(rep.loso.worst, 1)}
    for p in rep.per_source:
        out |= {f"trm.held.{p.source}.median": fmt_pct(p.held_out.median_abs, 1, sign=False),
                f"trm.held.{p.source}.worst": fmt_pct(abs(p.held_out.worst), 1, sign=False),
                f"trm.without.{p.source}.scale_up":
                    f"{p.fitted_without.values['scale_up_efficiency']:.2f}"}
    big = [err[f"K22 {m} {r}"] for m in ("530B", "1T") for r in ("full", "sel+SP")]
    out["trm.k22_big"] = span_pct(big, signed=False)  # sizes: the prose says over-predicted
    out["trm.n21_big"] = fmt_pct(max(abs(err["N21 529.6B"]), abs(err["N21 1008.0B"])), sign=False)
    out["trm.k22_22b_sp"] = fmt_pct(err["K22 22B sel+SP"], 1)
    return out
