"""Training any graph: CNNs, ViT, BERT, imported PyTorch and ONNX modules, data parallel.

``train`` sends every model that is not a decoder LM here. One optimizer step on ``dp``
data-parallel devices, each holding the whole model:

* **Forward and backward, per op.** The model's forward graph at the micro-batch b becomes a
  training graph by one backward rule per op kind (graphs/backward.py); the engine prices it op
  by op with the preset's efficiencies (the inference-validated ones: no LLM-training GEMM fit
  is applied to these graphs). Batch norm runs in training mode: batch statistics cost a
  layer norm's 8 FLOPs per element and a second read of the input; its backward reads the
  input and dY twice and writes dX once, and its input is saved once (graphs/backward.py).
* **Gradient accumulation.** ``m = global_batch / (dp · b)`` micro-batches per step.
* **Data parallelism.** An all-reduce of the gradients (``grad_bytes`` per parameter: 4,
  fp32, also in fp16 / bf16 mixed precision: PyTorch's automatic mixed precision keeps the
  parameters in fp32 — its torch.cuda.amp documentation: "You should not call .half() on your
  model(s)" — so their gradients are fp32, https://docs.pytorch.org/1.6.0/amp.html) over the dp
  ranks (ring, hierarchical across the cluster's
  scale-up domains; ops/collectives.py), bucketed and overlapped with the last micro-batch's
  backward when ``dp_overlap`` (what does not fit under it, and at least the last bucket of
  ``DP_BUCKET_BYTES``, is exposed), as DDP and Megatron run it.
* **Optimizer step.** One op of the registered formula ``optimizer_step``
  (ops/training_formulas.py), priced by the time model like every other op (optimizer.py),
  with gradient clipping and weight decay for every optimizer: per parameter, mixed
  precision (fp32 master, 16-bit copy), Adam(W) 34 bytes (16 / 17 FLOPs), SGD with momentum
  ("momentum") 26 bytes and 9 FLOPs, plain SGD 18 bytes and 7 FLOPs; pure fp32 training (no
  master, no copy) 32, 24 and 16 bytes; every optimizer reads 4-byte gradients.
* **Memory per device.** Weights, gradients (fp32), optimizer state
  (``optimizer_state_bytes``: Adam 12 bytes per parameter with the fp32 master, momentum 8,
  SGD 4; fp32 training without the master copy: 8, 4 and 0) and the saved activations of one
  micro-batch (graphs/backward.py, an upper bound).

MFU counts model FLOPs as 3× the forward FLOPs of the matmul-class ops (convolutions, linears,
attention), as for decoders (PaLM App. B); no recomputation, so HFU = MFU.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from ..._text import a_family
from ...engine.core import time_model
from ...engine.memory import (
    STREAMED_OPTIMIZER_NOTE,
    resident_weights,
    store_reason,
    streamed_training,
    streams_weights,
)
from ...engine.presets import check_preset, efficiency_for
from ...engine.tiles import smooth_fill, without_tiles
from ...errors import SpecError, UnsupportedDtypeError
from ...graphs.backward import GROUPS, backward_graph
from ...graphs.backward import batch_norm_mask as _bn_mask
from ...graphs.backward import training_batch_norm as _train_bn
from ...graphs.resolve import model as resolve_model
from ...ops import collectives as coll
from ...ops.training_formulas import OPTIMIZERS, optimizer_state_bytes
from ...ops.xp import SCALAR
from ...specs.dtypes import precision as make_precision
from ...specs.resolve import cluster as resolve_cluster
from ...units import fmt_bytes
from .factors import cluster_links, training_factors
from .input_pipeline import input_ceiling, parse_loader
from .optimizer import optimizer_graph, optimizer_time
from .options import check_conv_layout, layout_priced_on
from .result import TrainingResult

__all__ = ["op_seconds", "train_graph"]

DP_BUCKET_BYTES = 40e6 * 4


def _nchw_transposes(g: Any) -> Any:
    """The forward graph as a framework runs it in the NCHW layout (PyTorch's default memory
    format) on tensor cores: each convolution's input is copied NCHW → NHWC before it and its
    output NHWC → NCHW after it, because the tensor-core convolution kernels work in NHWC
    (NVIDIA, via MosaicML Composer's "Channels Last" method card: "the cuDNN library performs
    a transpose to convert the tensor into NHWC format"; PyTorch's channels_last memory format
    removes them). Two ``copy`` ops per convolution (the registry's movement op: every element
    read once and written once, 0 FLOPs) with the convolution's activation bytes read and
    written; the backward rule of a copy (its inverse movement) then transposes dY in and dX
    out of each backward-data convolution. Assumption: the weight-gradient kernel reads the
    forward's transposed input and the backward's transposed dY (no further copies), and the
    weights (a few MB) are not counted. Only tensor-core precisions: an fp32 graph (CUDA-core
    convolutions, which cuDNN runs in NCHW as they are) is returned unchanged."""
    from dataclasses import replace

    from ...graphs.graph import Q

    if not _tensor_core_convs(g):
        return g
    conv = [i for i, c in enumerate(g.classes) if c == "conv"]
    ar, aw = Q["act_bytes_read"], Q["act_bytes_written"]
    cols: list[tuple[str, str, str, int, int]] = []  # (name, kind, class, source op, quantity)
    for i in range(len(g.names)):
        if i in conv:
            cols.append((f"{g.names[i]}.to_nhwc", "copy", "movement", i, ar))
        cols.append((g.names[i], g.kinds[i], g.classes[i], i, -1))
        if i in conv:
            cols.append((f"{g.names[i]}.to_nchw", "copy", "movement", i, aw))

    def costs(c: Any) -> Any:
        out = np.zeros((c.shape[0], len(cols)))
        for j, (_, _, _, i, q) in enumerate(cols):
            if q < 0:
                out[:, j] = c[:, i]
            else:  # a transpose: the tensor read once, written once
                out[ar, j] = out[aw, j] = c[q, i]
        return out
    own = np.array([q < 0 for *_, q in cols])
    src = np.array([i for *_, i, _ in cols])
    return replace(g, names=tuple(c[0] for c in cols), kinds=tuple(c[1] for c in cols),
                   classes=tuple(c[2] for c in cols), c0=costs(g.c0), c1=costs(g.c1),
                   gemm=np.where(own, g.gemm[:, src], 0.0),
                   params=np.where(own, g.params[src], 0.0),
                   fusible=None if g.fusible is None else own & g.fusible[src],
                   saves=None if g.saves is None else np.where(own, g.saves[src], -1))


def _device_ops(m: Any, p: Any, b: int, seq_len: int | None, conv_layout: str, hw: Any,
                preset: str) -> tuple[Any, Any, Any, np.ndarray]:
    """(forward graph, training graph, efficiencies, seconds per op) of one micro-batch of
    ``b`` samples on one device: training-mode batch norm, the NCHW copies when asked, the
    backward by graphs/backward.py, priced op by op with the preset's smooth efficiencies."""
    fwd = _train_bn(m.graph(precision=p, phase="forward", seq_len=seq_len, batch=b))
    if conv_layout == "nchw":
        fwd = _nchw_transposes(fwd)
    tg = backward_graph(fwd, batch_stats=_bn_mask(fwd))
    eff = without_tiles(efficiency_for(hw, preset))  # as decoder training: smooth model
    return fwd, tg, eff, time_model(tg.graph, hw, eff).evaluate(float(b)).time


def op_seconds(model: Any, cluster: Any, *, micro_batch: int, precision: Any = "bf16",
               seq_len: int | None = None, conv_layout: str | None = None,
               preset: str = "default") -> tuple[Any, np.ndarray]:
    """(training graph, seconds of each of its ops) of one micro-batch on one device of
    ``cluster``, as ``train`` prices them: for breaking a step down by op (the validation's
    per-term tables). The arguments are checked as ``train`` checks them."""
    m = resolve_model(model)
    if m.config is not None and m.config.arch == "decoder":
        raise SpecError(f"{m.name} is a decoder LM, which train prices with its own model "
                        "(scenarios/training/step.py), not op by op: op_seconds takes the "
                        "generic (any-graph) models")
    hw = resolve_cluster(cluster, None).device
    p, preset = _device_args(m, hw, precision, preset, seq_len)
    layout = check_conv_layout(conv_layout, hw)
    _, tg, _, op_t = _device_ops(m, p, _check("micro_batch", micro_batch), seq_len,
                                 layout, hw, preset)
    return tg, op_t


def _device_args(m: Any, hw: Any, precision: Any, preset: str,
                 seq_len: int | None) -> tuple[Any, str]:
    """(precision, preset) of a generic model's training on device ``hw``, checked once for
    ``train_graph`` and ``op_seconds``: a training preset, a dtype the device has, seq_len
    exactly where the model has a sequence dimension."""
    p = make_precision(precision)
    preset = check_preset(preset)
    if preset == "mlsysim":
        raise SpecError("preset='mlsysim' prices whole inference passes only; for training use "
                        "'default' or 'bound'")
    if not hw.has(p.compute):
        raise UnsupportedDtypeError(f"{hw.name} has no {p.compute} peak; it has "
                                    f"{', '.join(hw.dtypes)}")
    if m.default_seq_len is None and seq_len is not None:
        raise SpecError(f"{m.name} has no sequence dimension: seq_len does not apply")
    if m.default_seq_len is not None and seq_len is None:
        raise SpecError(f"{m.name} is a sequence model: pass seq_len=")
    return p, preset


def _check(name: str, v: Any, lo: int = 1) -> int:
    if isinstance(v, bool) or not isinstance(v, int | np.integer) or v < lo:
        raise SpecError(f"{name} must be an integer >= {lo}, got {v!r}")
    return int(v)


#: ``rl.train``'s options that only the decoder model reads, with their defaults (in order)
_DECODER_DEFAULTS = (("cp", 1), ("pp_stages", None), ("attention_kernel", "auto"),
                     ("fused_attention", True), ("dropout", False), ("elementwise", "fused"),
                     ("recompute_layers", None), ("pp_overlap", None),
                     ("pp_account_embedding", False), ("pp_account_loss", False),
                     ("pp_layout", None))


def decoder_options(*given: Any) -> dict[str, Any]:
    """Those of the decoder-only options (``_DECODER_DEFAULTS``' order) given away from their
    defaults: a generic graph refuses them rather than ignore them."""
    return {k: v for (k, d), v in zip(_DECODER_DEFAULTS, given, strict=True)
            if v is not d and v != d}


def _options(m: Any, zero: Any, recompute: Any, unused: dict[str, Any],
             decoder_only: dict[str, Any] | None = None) -> tuple[int, str]:
    """ZeRO stage and recompute mode for a graph that is not a decoder LM; a SpecError for
    what does not apply to it (tp, pp, ep, interleave; selective recompute; ``decoder_only``:
    the decoder options ``rl.train`` was given away from their defaults, which this model
    would otherwise ignore)."""
    bad = {k: v for k, v in unused.items() if v not in (None, 1, False)}
    if decoder_only:
        raise SpecError(f"training {m.name} ({a_family(m.family)} graph, not a decoder LM): "
                        f"{', '.join(f'{k}={v!r}' for k, v in decoder_only.items())} is modelled "
                        "for decoder LMs only (context parallelism, stage sizes, the attention "
                        "kernel, dropout masks, eager element-wise chains, partial recompute, "
                        "pipeline send overlap); "
                        "this graph is priced with its own ops: leave cp=1, pp_stages=None, "
                        "attention_kernel='auto', fused_attention=True, dropout=False, "
                        "elementwise='fused', recompute_layers=None, pp_overlap=None, "
                        "pp_account_embedding=False, pp_account_loss=False, pp_layout=None")
    if bad:
        raise SpecError(f"training {m.name} ({a_family(m.family)} graph, not a decoder LM) is "
                        f"modelled data parallel, with ZeRO and full recompute; "
                        f"{', '.join(f'{k}={v!r}' for k, v in bad.items())} does not apply "
                        "(tensor, pipeline and expert parallelism, pipeline schedules "
                        "(pp_flushes) and bf16 optimizer states (optimizer_dtype) are modelled "
                        "for decoder LMs): leave tp, pp, ep, interleave and pp_flushes at 1 "
                        "and optimizer_dtype at 'fp32'")
    z = 0 if zero is None else zero
    if isinstance(z, bool) or z not in (0, 1, 2, 3):
        raise SpecError(f"zero={zero!r}; allowed: 0, 1, 2, 3")
    rc = "none" if recompute is None else recompute
    if rc == "selective":
        raise SpecError(f"recompute='selective' re-runs a transformer's attention core "
                        f"(Korthikanti et al. 2022); {m.name} is trained as a generic graph: "
                        "use recompute='none' or 'full'")
    if rc not in ("none", "full"):
        raise SpecError(f"recompute={recompute!r}; allowed for {m.name}: 'none', 'full'")
    return int(z), str(rc)


def train_graph(model: Any, cluster: Any, *, global_batch: int, micro_batch: int = 1,
                seq_len: int | None = None, dp: int | None = None, precision: Any = "bf16",
                nodes: int | None = None, optimizer: str = "adam", dp_overlap: bool = True,
                preset: str = "default", zero: int | None = None, recompute: str | None = None,
                data_loader: Any = None, conv_layout: str | None = None,
                decoder_only: dict[str, Any] | None = None,
                **unused: Any) -> TrainingResult:
    """One data-parallel training step of any model (see the module docstring); ``data_loader``
    the host input pipeline's ceiling (training/input_pipeline.py, off when None);
    ``conv_layout`` "nhwc" (channels last, no copies), "nchw" (each convolution's input and
    output transposed, ``_nchw_transposes``) or None ("nhwc", assumed: ``_layout_fields``)."""
    m = resolve_model(model)
    zero, recompute = _options(m, zero, recompute, unused, decoder_only)
    loader = parse_loader(data_loader)
    c = resolve_cluster(cluster, nodes)
    hw = c.device
    p, preset = _device_args(m, hw, precision, preset, seq_len)
    if optimizer not in OPTIMIZERS:
        raise SpecError(f"optimizer={optimizer!r}; allowed: {', '.join(OPTIMIZERS)}")
    global_batch = _check("global_batch", global_batch)
    b = _check("micro_batch", micro_batch)
    dp = c.devices if dp is None else _check("dp", dp)
    if dp > c.devices:
        raise SpecError(f"dp={dp} exceeds the cluster's {c.devices} devices")
    if global_batch % (dp * b):
        raise SpecError(f"global_batch={global_batch} must be a multiple of dp·micro_batch = "
                        f"{dp}·{b} = {dp * b}")
    layout = check_conv_layout(conv_layout, hw)
    fwd, tg, eff, op_t = _device_ops(m, p, b, seq_len, layout, hw, preset)
    t = [float(op_t[tg.group == i].sum()) for i in range(len(GROUPS))]
    t_f, t_b = t[0], t[1] + t[2]
    n_mb = global_batch // (dp * b)
    P = tg.params
    fp32 = p.weights == "fp32"
    grad_b = 4.0  # fp32 gradients, also under fp16 / bf16 mixed precision (AMP; above)
    state_b = optimizer_state_bytes(optimizer, master_weights=not fp32)
    opt_g = optimizer_graph(optimizer, p, master_weights=not fp32, grad_bytes=grad_b,
                            weight_bytes=p.weight_bytes)
    f = training_factors(hw.kind, hw.key) if preset != "bound" else None
    links = cluster_links(c, f)
    g_bytes = P * grad_b
    t_rc = t_f if recompute == "full" else 0.0  # the forward again, segment by segment
    dp_exp = _dp_time(g_bytes, fwd.weight_footprint_bytes, dp, zero, links, dp_overlap,
                      t_f, t_b + t_rc, n_mb)
    shard = dp if zero >= 1 else 1  # ZeRO-1+: each rank updates 1/dp of the parameters
    streamed = streams_weights(hw)  # the update runs in the weight store: not priced
    t_opt = 0.0 if streamed else float(optimizer_time(opt_g, hw, eff, P / shard, SCALAR))
    step = n_mb * (t_f + t_b + t_rc) + dp_exp + t_opt
    wait, wait_note = (0.0, "") if loader is None else input_ceiling(loader, global_batch // dp,
                                                                      step)
    step += wait
    fl = fwd.c0[0] + fwd.c1[0] * b
    mf_step = 3.0 * float(fl[fwd.is_compute].sum()) / b * global_batch
    hf_step = mf_step * (4.0 / 3.0 if recompute == "full" else 1.0)
    saved = tg.saved_bytes(b)
    if recompute == "full":  # √n-segment checkpointing (Chen et al. 2016, §4.1)
        saved = min(saved, 2.0 * saved / math.sqrt(max(len(fwd), 1)))
    mem = {"weights": fwd.weight_footprint_bytes / (dp if zero == 3 else 1),
           "gradients": P * grad_b / (dp if zero >= 2 else 1),
           "optimizer": P * state_b / shard, "activations": saved,
           "workspace": float(eff.workspace)}
    mem["total"] = sum(mem.values())
    warnings = tuple(fwd.meta.get("warnings", ())) + ((wait_note,) if wait_note else ())
    if streamed:  # the chip holds the largest op's weights and their gradient
        held = resident_weights(fwd, hw)[0]
        mem = streamed_training(mem, held, held / p.weight_bytes * grad_b)
        assert hw.weight_store is not None  # weight streaming needs a store (Hardware checks)
        warnings += (STREAMED_OPTIMIZER_NOTE.format(store=hw.weight_store.name),)
    cap = hw.memory_capacity_bytes
    feasible = mem["total"] <= cap and math.isfinite(step)
    fb = fmt_bytes
    reason = "" if feasible else (
        f"needs {fb(mem['total'])} per device, {hw.name} has {fb(cap)} (weights "
        f"{fb(mem['weights'])}, gradients {fb(mem['gradients'])}, optimizer "
        f"{fb(mem['optimizer'])}, activations {fb(mem['activations'])})")
    if streamed and feasible and store_reason(mem["weight_store"], hw):
        feasible, reason = False, store_reason(mem["weight_store"], hw)
    bd = {"forward": n_mb * t_f, "backward": n_mb * t_b, "recompute": n_mb * t_rc,
          "optimizer": t_opt,
          "tp_comm": 0.0, "dp_comm": dp_exp, "pp_comm": 0.0, "ep_comm": 0.0, "bubble": 0.0}
    if loader is not None:
        bd["input_wait"] = wait
    devices = dp
    tokens = fwd.tokens_per_sample
    peak = hw.peak(p.compute)
    nodes_used = math.ceil(devices / max(c.devices // max(c.nodes, 1), 1))
    from ...analysis.power import device_power_w, power_activity

    other = nodes_used * c.node_overhead_w  # power model: analysis/power.py, activity of MFU
    mfu = mf_step / (step * devices * peak)
    power = devices * (device_power_w(hw, mfu, "mlsysim") if preset == "mlsysim" else
                       device_power_w(hw, power_activity(mfu))) + other
    return TrainingResult(
        model=m.name, cluster=c.name, device=hw.name, devices=devices, precision=p.label,
        preset=preset, global_batch=global_batch, seq_len=tokens, micro_batch=b,
        microbatches=n_mb, tp=1, pp=1, dp=dp, ep=1, etp=1, interleave=1, recompute=recompute,
        zero=zero, sequence_parallel=False, step_time=step,
        tokens_per_s=global_batch * tokens / step,
        mfu=mf_step / (step * devices * peak), hfu=hf_step / (step * devices * peak),
        model_flops_per_step=mf_step, hardware_flops_per_step=hf_step, breakdown=bd,
        memory_per_device=mem, memory_capacity=cap, feasible=feasible, reason=reason,
        power_w=power, other_power_w=other, _hw=hw,
        warnings=warnings, optimizer=optimizer, t_fill=smooth_fill(eff),
        **_layout_fields(fwd, conv_layout, layout, hw))


def _layout_fields(fwd: Any, asked: str | None, layout: str, hw: Any) -> dict[str, Any]:
    """The result's ``conv_layout`` (None for a graph without convolutions) and
    ``conv_layout_assumed``: the default taken (``asked`` None) where the layout changes the
    price, i.e. tensor-core convolutions on an NVIDIA device (fp32 convolutions run as they
    are; other devices price "nhwc" only)."""
    return {"conv_layout": layout if "conv" in fwd.classes else None,
            "conv_layout_assumed": asked is None and layout_priced_on(hw)
            and _tensor_core_convs(fwd)}


def _tensor_core_convs(g: Any) -> bool:
    """Whether ``g`` has convolutions whose layout changes their price: any in a tensor-core
    precision (an fp32 graph's CUDA-core convolutions run in NCHW as they are)."""
    return "conv" in g.classes and g.precision.compute != "fp32"


def _dp_time(g_bytes: float, w_bytes: float, dp: int, zero: int, links: Any,
             overlap: bool, t_f: float, t_b: float, n_mb: int) -> float:
    """Exposed data-parallel communication of one step (Rajbhandari et al. 2020, "ZeRO",
    §5 and §7): stage 0 all-reduces the gradients; stages 1-2 reduce-scatter them and
    all-gather the updated weights (the same volume); stage 3 also all-gathers the weights
    twice per micro-batch (forward and backward) and reduce-scatters each micro-batch's
    gradients, prefetched under its compute. With ``overlap`` the per-step part hides under
    the last micro-batch's backward (and its forward from stage 1 on, as the decoder model
    does), at least the last bucket exposed."""
    if dp == 1:
        return 0.0
    ar = float(coll.group_all_reduce(g_bytes, dp, 1, links, SCALAR))
    rs = float(coll.group_reduce_scatter(g_bytes, dp, 1, links, SCALAR))
    ag = float(coll.group_all_gather(w_bytes, dp, 1, links, SCALAR))
    t_dp = ar if zero == 0 else ag if zero == 3 else rs + ag
    if overlap:
        window = t_b + (t_f if zero >= 1 else 0.0)
        exposed = max(t_dp - window, t_dp * min(1.0, DP_BUCKET_BYTES / max(g_bytes, 1.0)))
    else:
        exposed = t_dp
    if zero == 3:
        exposed += n_mb * max(2 * ag + rs - (t_f + t_b) * overlap, 0.0)
    return exposed
