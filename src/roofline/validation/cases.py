"""The one loader of published validation measurements (src/roofline/data/validation/*.toml).

Every domain (``inference``, ``serving``, ``serving_mix``, ``training``, ``training_graphs``,
``training_runs``, ``collectives``, ``edge``, ``llamacpp``, ``llamacpp_pp``, ``client``,
``gemm``, ``gemm_judged``, ``cdna_gemm``, ``cdna_tuned``, ``vendors``, ``tpu_training``,
``rocm_serving``, ``vendor_training``) is one
TOML file with a ``[sources]`` table (key -> the document: title, version or commit, table /
page) and ``[[case]]`` entries. Each case carries

* ``id`` (unique), ``source`` (a ``[sources]`` key) and ``where`` (the table / page / row of the
  number): a case without them is refused, as is a source key the file does not define;
* ``metric``, ``measured`` (> 0, copied from the source) and ``unit`` (one the domain allows for
  that metric; the loader converts to SI);
* the scenario that reproduces the measurement: the domain's required keys, and optional ones
  (``[defaults]`` may give values shared by every case; a case's own value wins);
* optionally ``note`` (what the source leaves open and we assume), ``derivation`` (how a
  scenario value follows from the source), ``date``, and
  ``known_outlier`` with its ``reason``.

An unknown key, a missing one or a value of the wrong type is a ``SpecError`` naming the file,
the case and the key: a typo never silently becomes a default.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from types import MappingProxyType
from typing import Any

from ..errors import SourceError, SpecError, unknown

__all__ = ["Case", "ValidationSet", "DOMAINS", "load_cases", "parse_cases"]

_NUM = (int, float)

#: per domain: metric -> {unit: factor to SI}, required scenario keys, optional scenario keys
DOMAINS: dict[str, dict[str, Any]] = {
    "inference": {
        "metrics": {"throughput": {"1/s": 1.0}, "latency": {"ms": 1e-3}},
        "required": {"model": str, "hardware": str, "batch": int, "precision": str,
                     "fuse": bool, "runtime": str, "engine": str},
        "optional": {"activations": str, "seq_len": int, "fused_attention": bool,
                     "fuse_qkv": bool},
    },
    "serving": {
        "metrics": {"tok_s_gpu": {"tok/s/GPU": 1.0}, "tok_s": {"tok/s": 1.0},
                    "ttft": {"ms": 1e-3, "s": 1.0}, "tpot": {"ms": 1e-3, "s": 1.0},
                    "e2e": {"ms": 1e-3, "s": 1.0}},
        "required": {"model": str, "hardware": str, "precision": str, "kv": str,
                     "activations": str, "batch": int, "tp": int, "prompt": int, "output": int,
                     "engine": str},
        "optional": {},
    },
    "serving_mix": {
        "metrics": {"ttft_p50": {"ms": 1e-3}, "ttft_p99": {"ms": 1e-3}, "tpot_p50": {"ms": 1e-3},
                    "tpot_p99": {"ms": 1e-3}, "tok_s": {"tok/s": 1.0}},
        "required": {"model": str, "hardware": str, "precision": str, "kv": str, "tp": int,
                     "pp": int, "engine": str, "requests": int, "rate": _NUM, "prompt": str,
                     "output": str, "max_concurrency": int, "chunk": int,
                     "max_batched_tokens": int, "kv_policy": str, "seeds": int},
        # trace: a file of data/validation/traces/ with the run's per-request prompt and
        # output token counts, all offered at t = 0; it replaces prompt / output (rate inf).
        # median_itl: the same row's published median inter-token latency, ms — a consistency
        # check of the row (serving_mix.implied_concurrency), not predicted
        "optional": {"trace": str, "median_itl": _NUM},
    },
    "training": {
        "metrics": {"tflops_per_gpu": {"TFLOP/s/GPU": 1e12}, "step_time": {"s": 1.0}},
        "required": {"heads": int, "hidden": int, "layers": int, "tp": int, "pp": int,
                     "gpus": int, "global_batch": int, "cluster": str, "precision": str,
                     "zero": int, "fused_attention": bool, "dropout": bool, "dp_overlap": bool,
                     "recompute": str, "sequence_parallel": bool, "vocab": int, "seq_len": int},
        "optional": {"micro_batch": int, "interleave": int},
    },
    "vendors": {  # per-architecture factors of parts that are not NVIDIA (validation/vendors.py)
        "metrics": {"tflops": {"TFLOP/s": 1e12}, "tbps": {"TB/s": 1e12}, "e2e": {"s": 1.0},
                    "tok_s": {"tok/s": 1.0}},
        "required": {"kind": str, "hardware": str, "role": str},
        "optional": {"dtype": str, "m": int, "n": int, "k": int, "op": str, "model": str,
                     "precision": str,
                     "kv": str, "activations": str, "batch": int, "tp": int, "prompt": int,
                     "output": int, "engine": str, "clock": str},
    },
    "rocm_serving": {  # AMD's ROCm vLLM on MI300X: the vllm-rocm profile (rocm_serving.py)
        "metrics": {"e2e": {"s": 1.0}},
        "required": {"model": str, "hardware": str, "precision": str, "kv": str,
                     "activations": str, "batch": int, "tp": int, "prompt": int, "output": int,
                     "role": str},
        "optional": {},
    },
    "tpu_training": {  # MaxText runs on TPUs: the [tpu] training fraction (tpu_training.py)
        "metrics": {"tok_s_chip": {"tok/s/chip": 1.0}},
        "required": {"model": str, "cluster": str, "chips": int, "global_batch": int,
                     "micro_batch": int, "seq_len": int, "saved": str},
        "optional": {},
    },
    "edge": {  # edge devices: a vendor's latency table, llama.cpp decode tokens/s
        "metrics": {"latency": {"ms": 1e-3}, "tokens_per_s": {"tok/s": 1.0}},
        "required": {"model": str, "hardware": str, "batch": int, "precision": str,
                     "engine": str},
        "optional": {"phase": str, "context": int, "weights": str, "group_size": int},
    },
    "attention": {
        "metrics": {"tflops": {"TFLOP/s": 1e12}},
        "required": {"hardware": str, "kernel": str, "direction": str, "batch": int, "heads": int,
                     "seq_len": int, "head_dim": int, "causal": bool},
        "optional": {"fit": bool, "dtype": str},
    },
    "collectives": {
        "metrics": {"busbw": {"GB/s": 1e9}, "time": {"us": 1e-6}},
        "required": {"cluster": str, "ranks": int, "bytes": int, "algorithm": str},
        "optional": {"scale_up_gbps": int, "scale_out_gbps": float, "collective": str,
                     "nvls_disabled": bool, "nics": int, "fabric": str, "host": str},
    },
    "gemm": {  # measured matmul kernel rates per shape (the tile / wave model)
        "metrics": {"flops_per_s": {"FLOP/s": 1.0, "TFLOP/s": 1e12}},
        "required": {"hardware": str, "dtype": str, "b": int, "m": int, "n": int, "k": int},
        # timing "op": the kernel and its launch (default: kernel time); clock "max": the harness
        # runs each call alone, at the part's maximum boost clock (default: the peaks' clock)
        "optional": {"timing": str, "clock": str},
    },
    "gemm_judged": {  # as "gemm", sources no fit uses (validation/gemm_judged.py)
        "metrics": {"flops_per_s": {"FLOP/s": 1.0, "TFLOP/s": 1e12}},
        "required": {"hardware": str, "dtype": str, "b": int, "m": int, "n": int, "k": int},
        # scaling: how fp8 operands are scaled ("block": 1 x 128 / 128 x 128 scales), stated only
        "optional": {"timing": str, "clock": str, "scaling": str},
    },
    "cdna_gemm": {  # as "gemm", on AMD CDNA parts (the CDNA tile parameters; validation/cdna.py)
        "metrics": {"flops_per_s": {"FLOP/s": 1.0, "TFLOP/s": 1e12}},
        "required": {"hardware": str, "dtype": str, "b": int, "m": int, "n": int, "k": int},
        "optional": {},
    },
    "cdna_tuned": {  # tuned GEMM kernel times on CDNA parts, judged only (validation/cdna_tuned.py)
        "metrics": {"kernel_time": {"us": 1e-6}, "flops_per_s": {"TFLOP/s": 1e12}},
        "required": {"hardware": str, "dtype": str, "b": int, "m": int, "n": int, "k": int},
        "optional": {"out_dtype": str},
    },
    "training_graphs": {
        "metrics": {"throughput": {"1/s": 1.0}},
        "required": {"model": str, "cluster": str, "dp": int, "precision": str,
                     "micro_batch": int, "accumulation": int, "optimizer": str},
        "optional": {"seq_len": int, "conv_layout": str},
    },
    "client": {
        "metrics": {"latency": {"ms": 1e-3}},
        "required": {"model": str, "hardware": str, "batch": int, "precision": str,
                     "fuse": bool, "runtime": str},
        "optional": {},
    },
    "llamacpp": {
        "metrics": {"tok_s": {"tok/s": 1.0}},
        "required": {"model": str, "hardware": str, "precision": str, "output": int},
        "optional": {},
    },
    "llamacpp_pp": {
        "metrics": {"pp_tok_s": {"tok/s": 1.0}},
        "required": {"model": str, "hardware": str, "precision": str, "prompt": int},
        "optional": {},
    },
    "training_runs": {
        "metrics": {"tok_s_gpu": {"tok/s/GPU": 1.0}, "mfu": {"%": 0.01}},
        "required": {"model": str, "cluster": str, "gpus": int, "global_batch": int,
                     "seq_len": int, "precision": str, "tp": int, "pp": int},
        "optional": {"micro_batch": int, "interleave": int, "recompute": str, "zero": int,
                     "lora_rank": int, "lora_targets": str, "cp": int, "ep": int, "etp": int,
                     "sequence_parallel": bool,
                     "moe_routing": str, "moe_dispatcher": str, "attention_kernel": str,
                     "cp_overlap": bool,
                     "ep_overlap": bool, "elementwise": str, "optimizer_dtype": str,
                     "pp_flushes": int, "recompute_layers": int, "pp_overlap": bool,
                     "pp_account_embedding": bool, "pp_account_loss": bool,
                     "stack": str, "heads": int, "hidden": int, "layers": int, "vocab": int},
    },
}
#: runs on parts that are not NVIDIA's: the training_runs scenario, judged apart
#: (validation/vendor_training.py)
DOMAINS["vendor_training"] = DOMAINS["training_runs"]

_COMMON = {"id": str, "source": str, "where": str, "metric": str, "measured": _NUM, "unit": str}
_COMMON_OPT = {"note": str, "derivation": str, "date": str, "known_outlier": bool,
               "reason": str}


@dataclass(frozen=True, slots=True, kw_only=True)
class Case:
    """One published measurement and the scenario that reproduces it."""

    id: str  #: unique within its domain; the name the validation doc shows
    domain: str  #: inference | serving | training
    source: str  #: key of the domain's [sources] table
    where: str  #: table / page / row of the source the number is copied from
    metric: str  #: what was measured (the domain's metrics)
    measured: float  #: the published number, in ``unit``
    unit: str  #: the published unit
    value_si: float  #: ``measured`` in SI (1/s, s, tokens/s, FLOP/s)
    scenario: Mapping[str, Any]  #: the domain's scenario keys (read-only)
    note: str = ""  #: what the source leaves open and we assume
    derivation: str = ""  #: how a scenario value was derived from the source, where it was
    date: str = ""
    known_outlier: bool = False  #: far off for a cause outside the model (``reason`` says which)
    reason: str = ""

    def __getitem__(self, key: str) -> Any:
        """The scenario value ``key`` (``case["model"]``)."""
        return self.scenario[key]

    def __contains__(self, key: object) -> bool:
        return key in self.scenario

    def get(self, key: str, default: Any = None) -> Any:
        return self.scenario.get(key, default)


@dataclass(frozen=True, slots=True, kw_only=True)
class ValidationSet:
    """The cases of one domain and the documents they come from."""

    domain: str
    sources: Mapping[str, str]  #: key -> the document (title, version / commit, tables)
    cases: tuple[Case, ...]
    origin: str  #: the file it was read from

    def by_source(self) -> dict[str, tuple[Case, ...]]:
        """Cases grouped by source key, in the order the sources first appear."""
        out: dict[str, list[Case]] = {}
        for c in self.cases:
            out.setdefault(c.source, []).append(c)
        return {k: tuple(v) for k, v in out.items()}

    def case(self, case_id: str) -> Case:
        for c in self.cases:
            if c.id == case_id:
                return c
        raise unknown(f"{self.domain} validation case", case_id, [c.id for c in self.cases])


def _check_type(value: Any, typ: Any, where: str, key: str) -> None:
    ok = isinstance(value, typ) and not (isinstance(value, bool) and typ in (int, _NUM))
    if not ok:
        names = typ.__name__ if isinstance(typ, type) else "number"
        article = "an" if names[0] in "aeiou" else "a"  # "an int", "a str"
        raise SpecError(f"{where}: {key} = {value!r} must be {article} {names}")


def _parse_case(raw: Mapping[str, Any], domain: str, schema: Mapping[str, Any],
                sources: Mapping[str, str], defaults: Mapping[str, Any], origin: str) -> Case:
    cid = raw.get("id")
    where = f"{origin} case {cid!r}"
    if not isinstance(cid, str) or not cid:
        raise SpecError(f"{origin}: a case without an id (keys: {', '.join(sorted(raw))})")
    if not raw.get("source"):
        raise SourceError(f"{where} has no source; every case names a [sources] key "
                          f"({', '.join(sources)})")
    if raw["source"] not in sources:
        raise unknown(f"source of {where}", str(raw["source"]), list(sources))
    if not raw.get("where"):
        raise SourceError(f"{where} has no 'where' (the table / page / row of its number)")
    req, opt = schema["required"], schema["optional"]
    allowed = {**_COMMON, **_COMMON_OPT, **req, **opt}
    extra = [k for k in raw if k not in allowed]
    if extra:
        raise SpecError(f"{where}: unknown key {extra[0]!r}; allowed: {', '.join(allowed)}")
    vals = {**defaults, **raw}
    missing = [k for k in (*_COMMON, *req) if k not in vals]
    if missing:
        raise SpecError(f"{where}: missing {', '.join(missing)}")
    for k, v in vals.items():
        _check_type(v, allowed[k], where, k)
    metrics = schema["metrics"]
    if vals["metric"] not in metrics:
        raise unknown(f"metric of {where}", vals["metric"], list(metrics))
    units = metrics[vals["metric"]]
    if vals["unit"] not in units:
        raise SpecError(f"{where}: unit {vals['unit']!r} for metric {vals['metric']!r}; "
                        f"allowed: {', '.join(units)}")
    measured = float(vals["measured"])
    if not (math.isfinite(measured) and measured > 0):
        raise SpecError(f"{where}: measured = {measured!r} must be a positive number")
    if vals.get("known_outlier") and not vals.get("reason"):
        raise SpecError(f"{where}: a known_outlier needs its reason")
    scen = {k: v for k, v in vals.items() if k in req or k in opt}
    return Case(id=cid, domain=domain, source=vals["source"], where=vals["where"],
                metric=vals["metric"], measured=measured, unit=vals["unit"],
                value_si=measured * units[vals["unit"]], scenario=MappingProxyType(scen),
                note=vals.get("note", ""), derivation=vals.get("derivation", ""),
                date=vals.get("date", ""),
                known_outlier=bool(vals.get("known_outlier", False)),
                reason=vals.get("reason", ""))


def parse_cases(doc: Mapping[str, Any], domain: str, origin: str = "<data>") -> ValidationSet:
    """A ValidationSet from a parsed TOML document of ``domain``; refuses unsourced cases."""
    if domain not in DOMAINS:
        raise unknown("validation domain", domain, list(DOMAINS))
    schema = DOMAINS[domain]
    sources = doc.get("sources")
    if not isinstance(sources, Mapping) or not sources:
        raise SourceError(f"{origin}: no [sources] table")
    for k, v in sources.items():
        if not isinstance(v, str) or not v.strip():
            raise SourceError(f"{origin}: source {k!r} must describe its document, got {v!r}")
    defaults = doc.get("defaults", {})
    known = {**schema["required"], **schema["optional"]}
    for k, v in defaults.items():
        if k not in known:
            raise SpecError(f"{origin} [defaults]: unknown key {k!r}; allowed: "
                            f"{', '.join(known)}")
        _check_type(v, known[k], f"{origin} [defaults]", k)
    raw = doc.get("case", [])
    if not raw:
        raise SpecError(f"{origin}: no [[case]] entries")
    cases = tuple(_parse_case(c, domain, schema, sources, defaults, origin) for c in raw)
    seen: set[str] = set()
    for c in cases:
        if c.id in seen:
            raise SpecError(f"{origin}: case id {c.id!r} appears twice")
        seen.add(c.id)
    return ValidationSet(domain=domain, sources=MappingProxyType(dict(sources)), cases=cases,
                         origin=origin)


def load_cases(domain: str) -> ValidationSet:
    """The packaged validation cases of ``domain`` (data/validation/<domain>.toml), checked."""
    from .._data import DATA, read_toml

    if domain not in DOMAINS:
        raise unknown("validation domain", domain, list(DOMAINS))
    path: Path = DATA / "validation" / f"{domain}.toml"
    return parse_cases(read_toml(path), domain, origin=f"data/validation/{path.name}")
