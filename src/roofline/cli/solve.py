"""``roofline solve MODEL HARDWARE``: one prediction, printed or as JSON.

Also holds the argument helpers the other scenario commands share (``sweep``, ``plot``):
the batch parser (``1..256`` = powers of two), the scenario options and JSON cleaning.
"""

from __future__ import annotations

import argparse
import json
import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from ..errors import SpecError
from .output import add_output_args, emit, limits

__all__ = [
    "OP_COLUMNS",
    "add_scenario_args",
    "dump_json",
    "jsonable",
    "model_arg",
    "op_rows",
    "parse_dims",
    "natural_precision",
    "parse_batches",
    "register",
    "run",
    "scenario_kwargs",
]

#: per-op columns shown by ``--ops`` (and returned by ``--json --ops``)
OP_COLUMNS = ("name", "kind", "flops", "bytes", "intensity", "bound", "t_compute", "t_memory",
              "overhead", "time", "share")


def parse_batches(text: str | Sequence[str]) -> list[int]:
    """Batch sizes from the command line.

    ``"8"`` -> [8]; ``"1,2,4"`` -> [1, 2, 4]; ``"1..256"`` -> the powers of two from 1 to 256
    (``"3..48"`` -> 3, 6, 12, 24, 48: doubling from the first). Parts combine: ``"1..8,12"``.
    """
    parts = [text] if isinstance(text, str) else list(text)
    out: list[int] = []
    for chunk in parts:
        for piece in str(chunk).split(","):
            piece = piece.strip()
            if not piece:
                continue
            if ".." in piece:
                lo_s, hi_s = piece.split("..", 1)
                lo, hi = _int(lo_s, piece), _int(hi_s, piece)
                if hi < lo:
                    raise SpecError(f"--batch range {piece!r} runs backwards; write LOW..HIGH, "
                                    "e.g. 1..256")
                b = lo
                while b <= hi:
                    out.append(b)
                    b *= 2
            else:
                out.append(_int(piece, piece))
    if not out:
        raise SpecError(f"--batch {text!r} names no batch size; e.g. 8, 1,2,4 or 1..256")
    return list(dict.fromkeys(out))


def _int(s: str, whole: str, option: str = "--batch",
         what: str = "batch sizes are positive integers, e.g. 8, 1,2,4 or 1..256",
         noun: str = "batch") -> int:
    """A positive integer from command-line text, or a SpecError naming the option."""
    try:
        v = int(s.strip())
    except ValueError:
        raise SpecError(f"{option} {whole!r}: {s.strip()!r} is not an integer; {what}") from None
    if v < 1:
        raise SpecError(f"{option} {whole!r}: {noun} must be >= 1, got {v}")
    return v


def add_scenario_args(p: argparse.ArgumentParser, *, many_precisions: bool = False) -> None:
    """Options shared by solve, sweep and plot."""
    from ..engine.presets import PRESETS, RUNTIMES
    from ..specs.dtypes import DTYPES

    if many_precisions:
        p.add_argument("--precision", "-p", nargs="+", default=None, metavar="P",
                       choices=DTYPES,
                       help="compute dtype(s), e.g. fp16 bf16 fp8 (default: the 16-bit dtype "
                            "of the parts, fp16 where they have it, else bf16)")
    else:
        p.add_argument("--precision", "-p", default=None, metavar="P", choices=DTYPES,
                       help="compute dtype, e.g. fp16, bf16, fp8, int8 (default: the part's "
                            "16-bit dtype, fp16 where it has one, else bf16)")
    p.add_argument("--preset", default="default", choices=PRESETS,
                   help="default: fitted efficiencies and launch overheads; bound: the pure "
                        "roofline; mlsysim: mlsysim 0.1.1's whole-model conventions")
    p.add_argument("--runtime", default="eager", choices=RUNTIMES,
                   help="eager: every kernel launched from the host, each paying the preset's "
                        "per-op dispatch (default); compiled: the whole graph submitted at "
                        "once (CUDA graph, XLA), no per-op host dispatch")
    p.add_argument("--phase", choices=("forward", "prefill", "decode"), default=None,
                   help="sequence models: forward/prefill over T tokens or one decode step")
    p.add_argument("--seq-len", type=int, default=None, metavar="T",
                   help="tokens per sample (forward/prefill)")
    p.add_argument("--context", type=int, default=None, metavar="S",
                   help="decode: tokens already in the KV cache")
    p.add_argument("--dim", action="append", default=[], metavar="NAME=VALUE",
                   help="ONNX files: the value of a symbolic input dimension other than the "
                        "batch, e.g. --dim past_len=0 (repeatable)")
    p.add_argument("--seq-dim", default=None, metavar="NAME",
                   help="ONNX files: the symbolic input dimension that is the sequence "
                        "length; its value is --seq-len")


def add_attention_arg(p: argparse.ArgumentParser) -> None:
    """``--attention-kernel`` for solve, serve and train (engine/attention.py)."""
    from ..engine.attention import ATTENTION_KERNELS

    p.add_argument("--attention-kernel", default="auto", choices=ATTENTION_KERNELS,
                   help="fused-attention implementation: auto (the architecture's: "
                        "FlashAttention-3 on Hopper, cuDNN on Blackwell, the matmul model "
                        "elsewhere; in an fp8 train step its forward at the 16-bit rate, as "
                        "Transformer Engine runs it unless fp8_dpa is set; a kernel named here "
                        "keeps its fp8 forward), fa2, fa3, "
                        "cudnn (measured tables, data/presets/attention.toml), gemm (priced as "
                        "a matmul), unfused")


def natural_precision(hardware: Sequence[Any] | Any, prefer: str = "fp16") -> list[str]:
    """The 16-bit dtype(s) to use when ``--precision`` is not given: ``prefer`` if every part
    has it, else the other 16-bit float every part has, else one per part."""
    from ..specs.resolve import hardware as resolve_hardware

    parts: list[Any] = list(hardware) if isinstance(hardware, list | tuple) else [hardware]
    hws = [resolve_hardware(h) for h in parts]
    order = (prefer, "bf16" if prefer == "fp16" else "fp16")
    for d in order:
        if all(h.has(d) for h in hws):
            return [d]
    picks = [next((d for d in order if h.has(d)), h.dtypes[0]) for h in hws]
    return list(dict.fromkeys(picks))


def parse_dims(items: Sequence[str]) -> dict[str, int]:
    """``["seq=128", "past=0"]`` -> {"seq": 128, "past": 0}``; a repeated name keeps the last."""
    out: dict[str, int] = {}
    for item in items:
        name, eq, value = item.partition("=")
        name = name.strip()
        if not eq or not name:
            raise SpecError(f"--dim {item!r}: write NAME=VALUE, e.g. --dim seq=128")
        out[name] = _int(value, item, "--dim",
                         "a dimension is a positive integer, e.g. --dim seq=128", "a dimension")
    return out


def model_arg(args: argparse.Namespace) -> Any:
    """The model a scenario command prices: the name as given, or for an ``.onnx`` path the
    imported Model with ``--dim`` / ``--seq-dim`` applied (a file with a symbolic dimension
    left unvalued is an error naming it and the option that sets it)."""
    dims = parse_dims(getattr(args, "dim", None) or [])
    seq_dim = getattr(args, "seq_dim", None)
    spec = str(args.model)
    if not spec.lower().endswith(".onnx"):
        if dims or seq_dim is not None:
            raise SpecError(f"--dim and --seq-dim name symbolic dimensions of an ONNX file; "
                            f"model {spec!r} is not a .onnx path")
        return args.model
    if seq_dim is not None and args.seq_len is None:
        raise SpecError(f"--seq-dim {seq_dim} needs --seq-len T (the sequence length to price)")
    from ..errors import ImportGraphError
    from ..graphs.resolve import model

    kw: dict[str, Any] = {"dims": dims} if dims else {}
    if seq_dim is not None:
        kw.update(seq_dim=seq_dim, seq_len=args.seq_len)
    try:
        return model(spec, **kw)
    except ImportGraphError as e:
        missing = getattr(e, "dims", None)
        if not missing:
            raise
        opts = " ".join(f"--dim {d}=VALUE" for d in missing)
        raise ImportGraphError(
            f"{spec!r} has symbolic input dimension(s) with no value: "
            f"{', '.join(map(repr, missing))}; pass {opts} (or --seq-dim NAME --seq-len T for "
            "the sequence length)") from None


def scenario_kwargs(args: argparse.Namespace) -> dict[str, Any]:
    for name in ("seq_len", "context"):
        v = getattr(args, name, None)
        if v is not None and v < 1:
            raise SpecError(f"--{name.replace('_', '-')} must be >= 1, got {v}")
    return {"preset": args.preset, "phase": args.phase, "seq_len": args.seq_len,
            "context": args.context, "runtime": getattr(args, "runtime", "eager")}


def jsonable(v: Any) -> Any:
    """Plain JSON data: numpy scalars unwrapped, NaN/inf -> None (strict JSON has neither)."""
    if isinstance(v, Mapping):
        return {str(k): jsonable(x) for k, x in v.items()}
    if isinstance(v, list | tuple | np.ndarray):
        return [jsonable(x) for x in v]
    if isinstance(v, np.generic):
        v = v.item()
    if isinstance(v, float) and (math.isnan(v) or math.isinf(v)):
        return None
    return v


def dump_json(data: Any) -> str:
    return json.dumps(jsonable(data), indent=2, allow_nan=False)


def op_rows(result: Any, k: int | None) -> list[dict[str, Any]]:
    """The top-``k`` ops by estimated time (all when ``k`` is None), as dicts."""
    t = result.ops
    cols = [c for c in OP_COLUMNS if c in t.columns]
    if not len(t):
        return []
    # by time; ties (ops held at the per-op dispatch floor) broken by their kernel time
    kernel = np.maximum(np.asarray(t["t_compute"], dtype=float),
                        np.asarray(t["t_memory"], dtype=float))
    order = np.lexsort((-kernel, -np.asarray(t["time"], dtype=float)))
    if k is not None:
        order = order[:k]
    return [{c: _item(t[c][i]) for c in cols} for i in order]


def _item(v: Any) -> Any:
    return v.item() if isinstance(v, np.generic) else v


def register(sub: Any) -> None:
    p = sub.add_parser(
        "solve", help="predict latency, throughput and the bottleneck of one configuration",
        description="Predict one model x hardware x scenario. FLOPs count 2 per multiply-add "
                    "(except preset mlsysim, whose zoo counts 1).")
    p.add_argument("model", help="zoo name (see `roofline zoo models`), a config.json/.toml "
                                 "path or an .onnx file")
    p.add_argument("hardware", help="zoo name or alias (see `roofline zoo hardware`) or a .toml "
                                    "path")
    p.add_argument("--batch", "-b", type=int, default=1, help="batch size (default 1)")
    add_scenario_args(p)
    add_attention_arg(p)
    p.add_argument("--client", action="store_true",
                   help="latency as a client times the request: + the inputs and outputs over "
                        "the host link and serving stack and a per-request floor "
                        "(engine/client.py; off by default)")
    p.add_argument("--ops", nargs="?", type=int, const=10, default=None, metavar="K",
                   help="also show the K most expensive operators (default K=10)")
    from .econ import add_econ_args

    add_econ_args(p)
    add_output_args(p)
    p.set_defaults(func=run)


def op_table(result: Any, k: int | None) -> Any:
    """The top-``k`` operators as a Table (one unit per column, shares in %)."""
    from ..engine.result import OP_SHOW
    from ..engine.table import Table

    rows = op_rows(result, k)
    t = result.ops
    cols = [c for c in OP_SHOW if c in t.columns]
    return Table({c: [row[c] for row in rows] for c in cols}, t.units,
                 title=f"top {len(rows)} of {len(t)} operators by time "
                       "(FLOPs: 2 per multiply-add)")


def run(args: argparse.Namespace) -> int:
    from ..engine.solve import solve

    if args.ops is not None and args.ops < 1:
        raise SpecError(f"--ops must be >= 1, got {args.ops}")
    precision = args.precision or natural_precision(args.hardware)[0]
    from .econ import econ_data, econ_kwargs

    r = solve(model_arg(args), args.hardware, batch=args.batch, precision=precision,
              attention_kernel=args.attention_kernel, client=args.client,
              **scenario_kwargs(args), **econ_kwargs(args))
    data: dict[str, Any] = {**r.to_dict(), **econ_data(r, args)}
    tables = []
    if args.ops is not None and len(r.ops):
        data["ops"] = op_rows(r, args.ops)
        tables.append(op_table(r, args.ops))

    def text() -> str:
        out = str(r)
        if tables:
            out += "\n\n" + tables[0].to_string(**{**limits(args), "max_rows": None})
        return out

    return emit(args, text=text, data=data, tables=tables, obj=r)
