"""``roofline serve MODEL HARDWARE``: TTFT, TPOT, throughput and memory of serving an LLM."""

from __future__ import annotations

import argparse
from typing import Any

__all__ = ["register", "run"]


def register(sub: Any) -> None:
    p: argparse.ArgumentParser = sub.add_parser(
        "serve", help="LLM serving: TTFT, TPOT, tokens/s, KV cache, max batch",
        description="Predict prefill (TTFT), decode (TPOT) and throughput of serving an LLM "
                    "with a static batch, and its continuous-batching steady state.")
    p.add_argument("model", help="zoo name, HF config.json or model TOML")
    p.add_argument("hardware", help="zoo name or hardware TOML")
    p.add_argument("--batch", type=int, default=1, help="concurrent requests (default 1)")
    p.add_argument("--prompt", type=int, default=1024, help="prompt tokens (default 1024)")
    p.add_argument("--output", type=int, default=128, help="output tokens (default 128)")
    p.add_argument("--precision", default="bf16", help="compute dtype (default bf16)")
    p.add_argument("--kv-precision", default=None, help="KV-cache dtype (e.g. fp8)")
    p.add_argument("--weight-precision", default=None, help="weight dtype (int8, int4, fp8)")
    p.add_argument("--group-size", type=int, default=None, help="quantisation group size")
    p.add_argument("--tp", type=int, default=1, help="tensor-parallel degree")
    p.add_argument("--pp", type=int, default=1, help="pipeline-parallel degree")
    p.add_argument("--preset", default="default", help="default | bound | mlsysim")
    p.add_argument("--engine", default="trtllm",
                   help="serving-engine profile from data/presets/serving.toml: trtllm "
                        "(current TensorRT-LLM), trtllm-legacy (v0.5/v0.6), vllm, eager")
    p.add_argument("--prefix-cached", type=int, default=0, help="prompt tokens already cached")
    p.add_argument("--chunk", type=int, default=None, help="chunked-prefill chunk size")
    p.add_argument("--kv-window", default="ring", choices=("ring", "full"),
                   help="sliding-window layers: keep only the window in the KV cache (ring, "
                        "the default) or every token (full)")
    p.add_argument("--ops", action="store_true", help="also print the decode step per op")
    p.add_argument("--json", action="store_true", help="print JSON")
    p.add_argument("--advise", action="store_true",
                   help="rank the levers (batch, quantization, KV precision, tp/pp, hardware)")
    p.add_argument("--latency-slo-ms", type=float, default=None, metavar="X",
                   help="with --advise: TPOT SLO in ms")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from ..scenarios.serving import serve
    from .solve import dump_json, op_rows

    s = serve(args.model, args.hardware, batch=args.batch, prompt_len=args.prompt,
              output_len=args.output, precision=args.precision, kv_precision=args.kv_precision,
              weight_precision=args.weight_precision, group_size=args.group_size, tp=args.tp,
              pp=args.pp, preset=args.preset, engine=args.engine,
              prefix_cached=args.prefix_cached, chunk_size=args.chunk,
              kv_window=args.kv_window)
    if args.advise:
        from .advise import print_levers

        args.only, args.objective, args.rows = None, "throughput", 25
        return print_levers(s, args)
    if args.json:
        d = s.to_dict()
        if args.ops and s.feasible:
            d["decode_ops"] = op_rows(s.decode, None)
        print(dump_json(d))
        return 0
    print(s)
    if args.ops and s.decode is not None:
        print()
        print(s.decode.ops.to_string() if hasattr(s.decode.ops, "to_string") else s.decode.ops)
    return 0
