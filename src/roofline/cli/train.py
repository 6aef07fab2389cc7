"""``roofline train MODEL CLUSTER --nodes N --tp T --pp P ...``: one training split priced, or
``--search`` for the ranked table of every valid split."""

from __future__ import annotations

import argparse
from typing import Any

from .output import add_output_args, emit, limits
from .solve import natural_precision

__all__ = ["register", "run"]


def register(sub: Any) -> None:
    from ..scenarios.training.options import CONV_LAYOUTS
    from ..specs.dtypes import DTYPES

    p = sub.add_parser(
        "train", help="distributed training: step time, MFU, memory per device; --search",
        description="Price one optimizer step of a decoder LM on a cluster with a tensor/"
                    "pipeline/data/expert-parallel split, or (--search) rank every valid split.")
    p.add_argument("model", help="zoo name or config/ONNX path (decoder LMs: the full split "
                   "model; any other graph: data parallel)")
    p.add_argument("cluster", help="cluster zoo name (roofline zoo has them) or .toml path")
    p.add_argument("--nodes", type=int, default=1, help="number of nodes (default 1)")
    p.add_argument("--global-batch", type=int, required=True, help="sequences per step")
    p.add_argument("--seq-len", type=int, default=None,
                   help="tokens per sequence (sequence models only)")
    p.add_argument("--optimizer", default="adam", choices=("sgd", "momentum", "adam", "adamw"),
                   help="optimizer step priced (momentum: SGD with momentum; decoders: adam, "
                   "adamw)")
    p.add_argument("--precision", default=None, choices=DTYPES, metavar="P",
                   help="compute dtype (default: the device's 16-bit dtype, bf16 where it has "
                        "one, else fp16)")
    p.add_argument("--search", action="store_true",
                   help="rank every valid (tp, pp, dp, ep, micro-batch, interleave, recompute, "
                        "zero) split that fits")
    p.add_argument("--top", type=int, default=15, help="rows shown by --search (default 15)")
    p.add_argument("--tp", type=int, default=1)
    p.add_argument("--pp", type=int, default=1)
    p.add_argument("--dp", type=int, default=None, help="default: devices / (tp·pp)")
    p.add_argument("--ep", type=int, default=1)
    p.add_argument("--etp", type=_etps, default=None, metavar="ETP[,ETP...]",
                   help="MoE: expert tensor-parallel size (Megatron-Core's MoE parallel folding; "
                        "default: tp); etp·ep must divide the tp·cp·dp ranks of a stage. With "
                        "--search: the sizes searched, each split paired with each (one value "
                        "fixes it; default: etp = tp on every split)")
    p.add_argument("--micro-batch", type=int, default=1)
    p.add_argument("--interleave", type=int, default=1, help="model chunks per device (v)")
    p.add_argument("--recompute", default=None,
                   choices=("none", "selective", "full", "selective_op"),
                   help="default: selective for decoder LMs, none for other graphs; "
                        "selective_op: torchtitan's op-level policy")
    p.add_argument("--recompute-layers", type=int, default=None,
                   help="with --recompute full: layers re-run per pipeline stage (Megatron-LM's "
                        "block method; default all)")
    p.add_argument("--no-pp-overlap", action="store_true",
                   help="pipeline sends blocking in the interleaved schedule (default: "
                        "overlapped with the next chunk's compute, Megatron's overlap_p2p_comm, "
                        "on with --interleave >= 2)")
    p.add_argument("--pp-account-embedding", action="store_true",
                   help="the embedding takes one layer's slot on the first pipeline stage "
                        "(Megatron-Core's --account-for-embedding-in-pipeline-split)")
    p.add_argument("--pp-account-loss", action="store_true",
                   help="the loss takes one layer's slot on the last pipeline stage "
                        "(Megatron-Core's --account-for-loss-in-pipeline-split)")
    p.add_argument("--pp-layout", default=None, metavar="LAYOUT",
                   help="Megatron-Core's --pipeline-model-parallel-layout string, e.g. "
                        "'E|(t|)*94,L' (E embedding, t layer, L loss, | between the pp × "
                        "interleave virtual stages); give --pp")
    p.add_argument("--cp", type=int, default=1, help="context-parallel degree (default 1)")
    p.add_argument("--cp-exposed", action="store_true",
                   help="context parallelism as an all-gather of K and V in front of the "
                        "attention, exposed (Llama 3's), instead of a ring behind it")
    p.add_argument("--elementwise", default="fused", choices=("fused", "eager"),
                   help="norms, RoPE, activation and loss: one fused kernel each, or PyTorch "
                        "eager's op chains (data/presets/eager.toml)")
    p.add_argument("--pp-flushes", type=int, default=1, metavar="K",
                   help="pipeline schedules per optimizer step (one per gradient-accumulation "
                        "step, as NeMo AutoModel runs them; default 1, Megatron's)")
    p.add_argument("--data-loader", type=_loader, default=None, metavar="LOADER:WORKERS",
                   help="image models: the host input pipeline as a ceiling on the step, "
                        "LOADER a measured pipeline (dali-cpu, pytorch) or your samples/s of "
                        "one worker, WORKERS loader workers per device (e.g. dali-cpu:16)")
    p.add_argument("--conv-layout", default=None, choices=CONV_LAYOUTS,
                   help="image models: the convolutions' activation layout, nhwc (channels "
                        "last; the default, stated as assumed in the output) or nchw "
                        "(PyTorch's default memory format: each tensor-core convolution's "
                        "input and output transposed)")
    p.add_argument("--lora-rank", type=int, default=None, metavar="R",
                   help="LoRA: a trainable adapter of rank R, every other weight frozen "
                        "(decoder LMs; default: every weight trained)")
    p.add_argument("--lora-targets", default="all", choices=("all", "qkv"),
                   help="with --lora-rank: the linears that carry the adapters (all: every "
                        "linear of the blocks; qkv: the fused q/k/v projection only, NeMo's "
                        "default placement)")
    p.add_argument("--optimizer-dtype", default="fp32", choices=("fp32", "bf16"),
                   help="gradients and Adam states in fp32 (Megatron's mixed precision) or "
                        "bf16 (NeMo's SFT recipe: Apex DistributedFusedAdam dtype bf16)")
    p.add_argument("--zero", type=int, default=None, choices=(0, 1, 2, 3),
                   help="ZeRO stage; default: 1 for decoder LMs, 0 for other graphs")
    p.add_argument("--no-sp", action="store_true", help="turn sequence parallelism off")
    p.add_argument("--moe-routing", default="random", choices=("random", "contiguous"),
                   help="MoE: how tokens spread over experts (random: uniform; contiguous: k "
                        "consecutive experts, NeMo AutoModel's fake balanced gate)")
    p.add_argument("--moe-dispatcher", default=None, choices=("flex", "alltoall"),
                   help="MoE: Megatron-Core's token dispatcher (flex: DeepEP, the default's "
                        "pricing; alltoall: NCCL all-to-all and the expert-TP all-gather)")
    p.add_argument("--ep-overlap", action="store_true",
                   help="MoE: Megatron-Core's combined 1F1B (dispatch/combine behind the "
                        "adjacent micro-batch's compute)")
    p.add_argument("--unfused-attention", action="store_true",
                   help="price the unfused QKᵀ/softmax/·V path instead of FlashAttention")
    p.add_argument("--preset", default="default", choices=("default", "bound"))
    p.add_argument("--tokens", type=float, default=None,
                   help="also report time, GPU-hours, energy, cost, carbon and failures to "
                        "train this many tokens")
    p.add_argument("--advise", action="store_true",
                   help="rank the levers (fp8, the best split, recompute, ZeRO, micro-batch)")
    p.add_argument("-o", "--output", default=None, metavar="PATH",
                   help="write the output (in --format) to this file instead of stdout")
    from .econ import add_econ_args
    from .solve import add_attention_arg

    add_attention_arg(p)
    add_econ_args(p)
    add_output_args(p)
    p.set_defaults(func=run)


def _etps(text: str) -> tuple[int, ...]:
    """``--etp 1`` or ``--etp 1,2,4``: positive integers (train and best_parallelism check
    the values against the model)."""
    parts = text.split(",")
    if not all(x.strip().isdigit() and int(x) > 0 for x in parts):
        raise argparse.ArgumentTypeError(f"{text!r}: give a positive integer, or with --search "
                                         "a comma-separated list such as 1,2,4")
    return tuple(int(x) for x in parts)


def _loader(text: str) -> tuple[Any, int]:
    """``--data-loader LOADER:WORKERS`` as train(data_loader=(loader, workers)): LOADER a name
    or a number (samples/s of one worker); train() checks both."""
    name, sep, workers = text.rpartition(":")
    if not sep or not name or not workers.isdigit():
        raise argparse.ArgumentTypeError(f"{text!r}: give LOADER:WORKERS, e.g. dali-cpu:16 or "
                                         "150:8 (samples/s of one worker, workers per device)")
    try:
        return float(name), int(workers)
    except ValueError:
        return name, int(workers)


def run(args: argparse.Namespace) -> int:
    from ..scenarios.training import best_parallelism, train
    from ..specs.resolve import cluster as resolve_cluster

    precision = args.precision or natural_precision(resolve_cluster(args.cluster).device,
                                                    prefer="bf16")[0]
    common = dict(global_batch=args.global_batch, seq_len=args.seq_len,
                  precision=precision, nodes=args.nodes,
                  fused_attention=not args.unfused_attention, preset=args.preset)
    if args.search:
        if args.data_loader is not None:
            raise SystemExit("roofline train: --data-loader prices one split (generic graphs); "
                             "it does not apply with --search")
        if args.conv_layout not in (None, "nhwc"):
            raise SystemExit("roofline train: --conv-layout prices one split (generic graphs); "
                             "it does not apply with --search")
        if args.pp_account_embedding or args.pp_account_loss or args.pp_layout is not None:
            raise SystemExit("roofline train: --pp-account-embedding / --pp-account-loss / "
                             "--pp-layout lay out one split's stages; --search prices equal "
                             "stages (pp dividing the layers)")
        if args.lora_rank is not None or args.lora_targets != "all":
            raise SystemExit("roofline train: --lora-rank / --lora-targets price one split; "
                             "--search ranks full-training splits only")
        t = best_parallelism(args.model, args.cluster, top=args.top,
                             attention_kernel=args.attention_kernel,
                             moe_routing=args.moe_routing, ep_overlap=args.ep_overlap,
                             moe_dispatcher=args.moe_dispatcher,
                             elementwise=args.elementwise,
                             optimizer_dtype=args.optimizer_dtype,
                             pp_flushes=args.pp_flushes,
                             pp_overlap=False if args.no_pp_overlap else None,
                             etps=args.etp, **common)  # type: ignore[arg-type]
        return emit(args, text=lambda: t.to_string(**limits(args)),
                    data={"title": t.title, "rows": t.to_dicts()}, tables=[t], obj=t,
                    title=t.title, path=args.output)
    from .econ import econ_data, econ_kwargs

    if args.etp is not None and len(args.etp) > 1:
        raise SystemExit(f"roofline train: --etp {','.join(map(str, args.etp))}: one split "
                         "has one expert tensor-parallel size; a list is searched with --search")
    r = train(args.model, args.cluster, micro_batch=args.micro_batch, tp=args.tp, pp=args.pp,
              dp=args.dp, ep=args.ep,
              etp=None if args.etp is None else args.etp[0], interleave=args.interleave,
              recompute=args.recompute,
              zero=args.zero, sequence_parallel=not args.no_sp, optimizer=args.optimizer,
              attention_kernel=args.attention_kernel, moe_routing=args.moe_routing,
              moe_dispatcher=args.moe_dispatcher,
              ep_overlap=args.ep_overlap, cp=args.cp, cp_overlap=not args.cp_exposed,
              elementwise=args.elementwise, optimizer_dtype=args.optimizer_dtype,
              pp_flushes=args.pp_flushes, data_loader=args.data_loader,
              conv_layout=args.conv_layout,
              recompute_layers=args.recompute_layers, lora_rank=args.lora_rank,
              lora_targets=args.lora_targets,
              pp_overlap=False if args.no_pp_overlap else None,
              pp_account_embedding=args.pp_account_embedding,
              pp_account_loss=args.pp_account_loss, pp_layout=args.pp_layout, **common,
              **econ_kwargs(args))  # type: ignore[arg-type]
    if args.advise:
        from .advise import print_levers

        args.latency_slo_ms, args.only, args.objective, args.rows = None, None, "throughput", 25
        return print_levers(r, args)
    extra: dict[str, Any] = {}
    rel: Any = None
    if args.tokens and r.feasible:  # a split that does not run has no time to train
        rel = r.reliability(args.tokens)
        extra = {"tokens": args.tokens, "time_to_train_s": r.time_to_train(args.tokens),
                 "gpu_hours": r.gpu_hours(args.tokens),
                 "energy_to_train_j": r.energy_to_train(args.tokens),
                 "cost_to_train_usd": r.cost_to_train(args.tokens),
                 "carbon_to_train_kg": r.carbon_to_train(args.tokens),
                 "uncertainty_to_train": {k: b.to_dict() for k, b in
                                          r.uncertainty_to_train(args.tokens).items()},
                 "reliability": rel.to_dict()}

    def text() -> str:
        out = str(r)
        if extra:
            cost, co2 = extra["cost_to_train_usd"], extra["carbon_to_train_kg"]
            u = r.uncertainty_to_train(args.tokens)

            def rng(k: str, scale: float, f: str, pre: str = "") -> str:  # " (80 %: lo–hi)"
                b = u.get(k)
                return "" if b is None else (f" ({b.level * 100:.0f} %: {pre}{b.low / scale:{f}}"
                                             f"–{pre}{b.high / scale:{f}})")

            out += (f"\n  {args.tokens:.4g} tokens: {extra['time_to_train_s'] / 86400:.3g} days"
                    f"{rng('time_to_train', 86400, '.3g')}, "
                    f"{extra['gpu_hours']:,.0f} device-hours, "
                    f"{extra['energy_to_train_j'] / 3.6e9:,.0f} MWh"
                    f"{rng('energy_to_train', 3.6e9, ',.0f')}"
                    + ("" if cost is None else
                       f", ${cost:,.0f}{rng('cost_to_train', 1, ',.0f', '$')}")
                    + ("" if co2 is None else f", {co2 / 1e3:,.4g} t CO2e"
                       f"{rng('carbon_to_train', 1e3, ',.4g')}")
                    + f"\n  with failures: {rel.wallclock_s / 86400:.3g} days wall-clock, "
                    f"{rel.expected_failures:,.3g} failures expected, goodput "
                    f"{rel.goodput:.1%} (job MTBF {rel.mtbf_hours:,.3g} h)")
        return out

    emit(args, text=text, data={**r.to_dict(), **extra, **econ_data(r, args)}, obj=r,
         path=args.output)
    return 0 if r.feasible else 1
