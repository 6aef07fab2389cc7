"""``roofline serve MODEL HARDWARE``: TTFT, TPOT, throughput and memory of serving an LLM."""

from __future__ import annotations

import argparse
from typing import Any

from ..errors import SpecError
from .econ import add_econ_args
from .output import add_output_args, emit, limits

__all__ = ["register", "run"]


def register(sub: Any) -> None:
    from ..engine.presets import PRESETS
    from ..scenarios.serving.plan import ENGINES
    from ..specs.dtypes import DTYPES

    p: argparse.ArgumentParser = sub.add_parser(
        "serve", help="LLM serving: TTFT, TPOT, tokens/s, KV cache, max batch",
        description="Predict prefill (TTFT), decode (TPOT) and throughput of serving an LLM "
                    "with a static batch, and its continuous-batching steady state.")
    p.add_argument("model", help="zoo name, HF config.json or model TOML")
    p.add_argument("hardware", help="zoo name or hardware TOML")
    p.add_argument("--batch", type=int, default=1, help="concurrent requests (default 1)")
    p.add_argument("--prompt", type=int, default=1024, help="prompt tokens (default 1024)")
    p.add_argument("--output-len", type=int, default=128, metavar="N",
                   help="output tokens per request (default 128)")
    p.add_argument("--precision", default=None, choices=DTYPES, metavar="P",
                   help="compute dtype (default: the part's 16-bit dtype, bf16 where it has "
                        "one, else fp16)")
    p.add_argument("--kv-precision", default=None, choices=DTYPES, metavar="P",
                   help="KV-cache dtype (e.g. fp8)")
    p.add_argument("--weight-precision", default=None, choices=DTYPES, metavar="P",
                   help="weight dtype (int8, int4, fp8)")
    p.add_argument("--group-size", type=int, default=None, help="quantisation group size")
    p.add_argument("--tp", type=int, default=1, help="tensor-parallel degree")
    p.add_argument("--pp", type=int, default=1, help="pipeline-parallel degree")
    p.add_argument("--preset", default="default", choices=PRESETS,
                   help="default: fitted efficiencies; bound: the pure roofline; mlsysim: "
                        "mlsysim's conventions")
    p.add_argument("--engine", default="trtllm", choices=ENGINES,
                   help="serving-engine profile from data/presets/serving.toml: trtllm "
                        "(current TensorRT-LLM, default), trtllm-legacy (v0.5/v0.6), "
                        "trtllm-v08 (v0.8, XQA decode), vllm, eager")
    p.add_argument("--prefix-cached", type=int, default=0, help="prompt tokens already cached")
    p.add_argument("--chunk", type=int, default=None, help="chunked-prefill chunk size")
    p.add_argument("--kv-window", default="ring", choices=("ring", "full"),
                   help="sliding-window layers: keep only the window in the KV cache (ring, "
                        "the default) or every token (full)")
    p.add_argument("--client", action="store_true",
                   help="latencies as a client times each request: + a per-request floor and "
                        "the prompt and output through the serving stack and host link "
                        "(engine/client.py; off by default)")
    p.add_argument("--ops", action="store_true", help="also print the decode step per op")
    p.add_argument("--advise", action="store_true",
                   help="rank the levers (batch, quantization, KV precision, tp/pp, hardware)")
    p.add_argument("--latency-slo-ms", type=float, default=None, metavar="X",
                   help="with --advise: TPOT SLO in ms")
    p.add_argument("-o", "--output", default=None, metavar="PATH",
                   help="write the output (in --format) to this file instead of stdout")
    from .solve import add_attention_arg

    add_attention_arg(p)
    add_econ_args(p)
    add_output_args(p)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from ..scenarios.serving import serve
    from .econ import econ_data, econ_kwargs
    from .solve import natural_precision, op_rows

    if args.output is not None and args.output.strip().isdigit():
        raise SpecError(f"--output {args.output}: --output/-o is a file everywhere; the number "
                        f"of output tokens is --output-len {args.output.strip()}")
    precision = args.precision or natural_precision(args.hardware, prefer="bf16")[0]
    s = serve(args.model, args.hardware, batch=args.batch, prompt_len=args.prompt,
              output_len=args.output_len, precision=precision, kv_precision=args.kv_precision,
              weight_precision=args.weight_precision, group_size=args.group_size, tp=args.tp,
              pp=args.pp, preset=args.preset, engine=args.engine,
              prefix_cached=args.prefix_cached, chunk_size=args.chunk,
              kv_window=args.kv_window, attention_kernel=args.attention_kernel,
              client=args.client, **econ_kwargs(args))
    if args.advise:
        from .advise import print_levers

        args.only, args.objective, args.rows = None, "throughput", 25
        return print_levers(s, args)
    d = {**s.to_dict(), **econ_data(s, args)}
    tables = []
    if args.ops and s.feasible and s.decode is not None:
        d["decode_ops"] = op_rows(s.decode, None)
        tables.append(s.decode.ops)

    def text() -> str:
        out = str(s)
        if tables:
            out += "\n\n" + tables[0].to_string(**limits(args))
        return out

    return emit(args, text=text, data=d, tables=tables, obj=s, path=args.output)
