"""Failures of large training runs: MTBF, checkpoints, goodput and wall-clock with failures.

With ``N`` devices failing independently at ``λ`` per device-second (fitted to a published run,
data/economics/reliability.toml: Llama 3 405B, 419 unexpected interruptions in 54 days on 16,384
H100 → λ = 419 / (16,384 × 54 × 24 h) = 1.97e-5 per GPU-hour):

    job MTBF          M = 1 / (N λ)
    checkpoint write  δ = size / min(storage bandwidth, writers × host-link bandwidth)
    interval (Young)  τ = √(2 δ M)                                     (Young 1974)
    interval (Daly)   τ = √(2 δ M)·[1 + ⅓·√(δ/2M) + (δ/2M)/9] − δ,  δ < 2M; else τ = M
                                                                       (Daly 2006, eq. 37)
    wall-clock        T = M · e^{R/M} · (e^{(τ+δ)/M} − 1) · W / τ       (Daly 2006, eq. 13)

for ``W`` seconds of useful work and restart cost ``R``. Goodput = W / T; expected failures =
T / M; expected work lost per failure ≈ (τ + δ)/2 (first order), plus the restart R.
Checkpoint size: bf16 weights + fp32 master + Adam m, v = 14 B per parameter (the optimizer
state is sharded across data-parallel ranks under ZeRO ≥ 1, so every rank writes its shard; with
ZeRO 0 one replica — tp × pp devices — writes).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from .._display import Display
from .._text import summary_str
from ..errors import SpecError

__all__ = ["Reliability", "reliability", "young_interval", "daly_interval", "daly_wallclock",
           "failure_rate_per_device_hour", "checkpoint_bytes"]


def _pos(v: Any, name: str, zero_ok: bool = False) -> float:
    if isinstance(v, bool) or not isinstance(v, float | int) or not math.isfinite(v) or \
            v < 0 or (v == 0 and not zero_ok):
        raise SpecError(f"{name} must be a {'non-negative' if zero_ok else 'positive'} number, "
                        f"got {v!r}")
    return float(v)


def young_interval(checkpoint_s: float, mtbf_s: float) -> float:
    """Young (1974): τ = √(2 δ M)."""
    return math.sqrt(2.0 * checkpoint_s * mtbf_s)


def daly_interval(checkpoint_s: float, mtbf_s: float) -> float:
    """Daly (2006) higher-order optimum compute time between checkpoints."""
    d, m = checkpoint_s, mtbf_s
    if d >= 2 * m:
        return m
    x = d / (2 * m)
    return math.sqrt(2 * d * m) * (1 + math.sqrt(x) / 3 + x / 9) - d


def daly_wallclock(work_s: float, interval_s: float, checkpoint_s: float, restart_s: float,
                   mtbf_s: float) -> float:
    """Daly (2006): expected wall-clock of ``work_s`` seconds of work with exponential failures."""
    m = mtbf_s
    return m * math.exp(restart_s / m) * math.expm1((interval_s + checkpoint_s) / m) * \
        work_s / interval_s


def failure_rate_per_device_hour(run: str | None = None) -> tuple[float, str]:
    """(failures per device-hour, source) from a published run (default Llama 3 405B)."""
    from .data import failure_run

    r = failure_run(run)
    src = (f"{r.name}: {r.unexpected:.0f} unexpected interruptions / ({r.devices:.0f} devices × "
           f"{r.duration_s / 86400:.0f} d) — {r.provenance['unexpected_interruptions'].source}")
    return r.rate_per_device_hour, src


def checkpoint_bytes(params: float, bytes_per_param: float | None = None) -> float:
    """Bytes of one full checkpoint (weights + optimizer state, all shards)."""
    if bytes_per_param is None:
        bytes_per_param = _defaults()["checkpoint_bytes_per_param"]
    return params * bytes_per_param


def _defaults() -> dict[str, float]:
    from .._data import read_toml
    from .data import ECON, _reader

    path = ECON / "reliability.toml"
    doc = read_toml(path)
    q = _reader(doc, str(path))
    return {"restart": q(doc["defaults"]["restart"], "defaults.restart", "time")[0],
            "checkpoint_bytes_per_param": q(doc["defaults"]["checkpoint_bytes_per_param"],
                                            "defaults.checkpoint_bytes_per_param", "ratio")[0]}


@dataclass(frozen=True, slots=True, kw_only=True, repr=False)
class Reliability(Display):
    """Failures and checkpointing of one job. Seconds, bytes."""

    devices: int
    work_s: float  #: useful compute time (the failure-free time to train)
    failure_rate_per_device_hour: float
    failure_source: str
    mtbf_s: float  #: job MTBF, 1 / (N λ)
    checkpoint_bytes: float  #: NaN when not computed (fleet without a model)
    checkpoint_s: float  #: δ, time to write one checkpoint
    checkpoint_source: str
    restart_s: float  #: R, time from a failure to training again (reload, restart, warm-up)
    method: str  #: "daly" or "young"
    interval_s: float  #: τ, compute time between checkpoints
    wallclock_s: float  #: expected wall-clock including checkpoints, failures and restarts
    expected_failures: float  #: wallclock / MTBF
    p_any_failure: float  #: 1 − exp(−wallclock / MTBF)
    lost_work_per_failure_s: float  #: ≈ (τ + δ)/2 recomputed after a failure
    checkpoint_overhead: float  #: δ/τ, fraction of compute time spent writing checkpoints

    @property
    def goodput(self) -> float:
        """Useful work / wall-clock."""
        return self.work_s / self.wallclock_s

    @property
    def mtbf_hours(self) -> float:
        return self.mtbf_s / 3600.0

    @property
    def restart_cost_s(self) -> float:
        """Expected seconds lost to restarts over the job: failures × R."""
        return self.expected_failures * self.restart_s

    @property
    def lost_work_s(self) -> float:
        """Expected seconds of recomputed work over the job: failures × (τ + δ)/2."""
        return self.expected_failures * self.lost_work_per_failure_s

    def to_dict(self) -> dict[str, Any]:
        d = {f: getattr(self, f) for f in self.__dataclass_fields__}
        d.update(goodput=self.goodput, restart_cost_s=self.restart_cost_s,
                 lost_work_s=self.lost_work_s)
        return d

    @summary_str
    def __str__(self) -> str:
        h = 3600.0
        ck = "" if math.isnan(self.checkpoint_bytes) else \
            f"{self.checkpoint_bytes / 1e12:,.4g} TB, "
        return "\n".join([
            f"reliability of {self.devices:,} devices, {self.work_s / h:,.4g} h of work",
            f"  failure rate    {self.failure_rate_per_device_hour:.3g} per device-hour "
            f"({self.failure_source.split(' — ')[0]})",
            f"  job MTBF        {self.mtbf_s / h:,.4g} h",
            f"  checkpoint      {ck}{self.checkpoint_s:,.4g} s to write; every "
            f"{self.interval_s / 60:,.4g} min ({self.method})",
            f"  failures        {self.expected_failures:,.4g} expected "
            f"(P(any) {self.p_any_failure:.1%}); each loses "
            f"~{self.lost_work_per_failure_s / 60:,.3g} min of work + "
            f"{self.restart_s / 60:,.3g} min restart",
            f"  wall-clock      {self.wallclock_s / h:,.4g} h (goodput {self.goodput:.1%})",
        ])


def reliability(*, devices: int, job_hours: float, checkpoint_s: float | None = None,
                restart_s: float | None = None, failure_rate: float | None = None,
                method: str = "daly", checkpoint_bytes: float = math.nan,
                checkpoint_source: str = "given", preset: str = "default") -> Reliability:
    """Failures of a job on ``devices`` devices needing ``job_hours`` of failure-free compute.

    ``checkpoint_s``: time to write one checkpoint (δ); ``restart_s``: time to recover from a
    failure (default 300 s, assumed); ``failure_rate``: failures per device-hour (default: the
    Llama 3 405B run); ``method``: "daly" (default, Daly 2006) or "young" (Young 1974).
    ``preset="mlsysim"``: mlsysim 0.1.1's ReliabilityModel (DGX nodes of 8, node MTBF
    4,285.7 h, Young's interval, goodput 1 − δ/τ − R/M; checkpoint_s defaults to its 60 s).
    """
    if isinstance(devices, bool) or not isinstance(devices, int) or devices < 1:
        raise SpecError(f"devices must be a positive integer, got {devices!r}")
    work = _pos(job_hours, "job_hours") * 3600.0
    if preset == "mlsysim":
        from .mlsysim_compat import reliability_mlsysim

        return reliability_mlsysim(
            devices=devices, job_hours=work / 3600.0,
            checkpoint_s=None if checkpoint_s is None else _pos(checkpoint_s, "checkpoint_s"),
            restart_s=None if restart_s is None else _pos(restart_s, "restart_s", True))
    if preset != "default":
        raise SpecError(f"preset must be 'default' or 'mlsysim', got {preset!r}")
    if checkpoint_s is None:
        raise SpecError("checkpoint_s (seconds to write one checkpoint) is required for a fleet "
                        "without a model; TrainingResult.reliability() computes it")
    delta = _pos(checkpoint_s, "checkpoint_s", zero_ok=True)
    R = _defaults()["restart"] if restart_s is None else _pos(restart_s, "restart_s", True)
    if failure_rate is None:
        lam_h, src = failure_rate_per_device_hour()
    else:
        lam_h, src = _pos(failure_rate, "failure_rate"), "failure_rate given by the user"
    if method not in ("daly", "young"):
        raise SpecError(f"method must be 'daly' or 'young', got {method!r}")
    M = 3600.0 / (devices * lam_h)
    if delta == 0:  # free checkpoints: checkpoint continuously (τ -> 0), only restarts cost
        tau, wall = 0.0, work * math.exp(R / M)
    else:
        tau = daly_interval(delta, M) if method == "daly" else young_interval(delta, M)
        tau = min(tau, work) if work > 0 else tau
        wall = daly_wallclock(work, tau, delta, R, M)
    n_fail = wall / M
    return Reliability(
        devices=devices, work_s=work, failure_rate_per_device_hour=lam_h, failure_source=src,
        mtbf_s=M, checkpoint_bytes=checkpoint_bytes, checkpoint_s=delta,
        checkpoint_source=checkpoint_source, restart_s=R, method=method, interval_s=tau,
        wallclock_s=wall, expected_failures=n_fail, p_any_failure=-math.expm1(-n_fail),
        lost_work_per_failure_s=(tau + delta) / 2.0,
        checkpoint_overhead=delta / tau if tau > 0 else 0.0)


def train_reliability(t: Any, tokens: float, *, storage_bytes_per_s: float | None = None,
                      restart_s: float | None = None, failure_rate: float | None = None,
                      method: str = "daly") -> Reliability:
    """Reliability of training ``t`` (a TrainingResult) on ``tokens`` tokens."""
    from ..graphs.resolve import model as resolve_model
    from ..specs.resolve import hardware
    from .data import failure_run

    _pos(tokens, "tokens")
    params = float(resolve_model(t.model).params)
    size = checkpoint_bytes(params)
    writers = t.devices if t.zero >= 1 else t.tp * t.pp
    if storage_bytes_per_s is None:
        run = failure_run()
        storage, ssrc = run.storage_bytes_per_s, \
            f"storage {run.storage_bytes_per_s / 1e12:g} TB/s ({run.name}, sustained)"
    else:
        storage, ssrc = _pos(storage_bytes_per_s, "storage_bytes_per_s"), "storage given"
    hw = getattr(t, "_hw", None) or hardware(t.device)
    host = hw.host_link.bytes_per_s if hw.host_link is not None else math.inf
    bw = min(storage, writers * host)
    src = (f"{params / 1e9:,.4g} B params × 14 B ÷ min({ssrc}, {writers} writers × "
           f"{host / 1e9:g} GB/s host link)")
    return reliability(devices=t.devices, job_hours=t.time_to_train(tokens) / 3600.0,
                       checkpoint_s=size / bw, restart_s=restart_s, failure_rate=failure_rate,
                       method=method, checkpoint_bytes=size, checkpoint_source=src)


def validation_rows() -> list[dict[str, Any]]:
    """The failure model against published runs NOT used to set it (docs/validation/
    economics.md): predicted events = devices × hours × λ (× the GPU share of interruptions
    for a GPU-only count), observed, ratio; plus leave-one-source-out: λ fitted to each
    published run in turn, predicting the others."""
    from .data import failure_run, validation_runs

    run = failure_run()
    sources: list[tuple[str, float, float, float, str, float | None]] = [
        (run.name, run.devices, run.duration_s, run.unexpected, "interruptions", None)]
    sources += [(v.name, v.devices, v.duration_s, v.events, v.kind, v.gpu_share)
                for v in validation_runs()]
    rows = []
    for i, (name, dev, dur, ev, _, share) in enumerate(sources):  # leave-one-source-out
        lam_i = ev / (dev * dur / 3600.0) / (share if share is not None else 1.0)
        for j, (n2, d2, t2, e2, k2, s2) in enumerate(sources):
            if i == j:
                continue
            pred = d2 * t2 / 3600.0 * lam_i * (s2 if s2 is not None else 1.0)
            rows.append({"case": n2, "kind": k2, "fit": name.split(" (")[0],
                         "predicted": pred, "observed": e2, "ratio": pred / e2})
    return rows


def validation_markdown() -> str:
    """The validation table as markdown (generated from the data; a test pins the doc to it)."""
    out = ["| case | counted | rate fitted to | predicted | observed | predicted / observed |",
           "|---|---|---|---:|---:|---:|"]
    for r in validation_rows():
        out.append(f"| {r['case']} | {r['kind']} | {r['fit']} | {r['predicted']:.1f} | "
                   f"{r['observed']:.1f} | {r['ratio']:.2f} |")
    return "\n".join(out)
