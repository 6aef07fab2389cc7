"""Distributed training: step time, memory per device, MFU/HFU, and the best parallel split.

``train(model, cluster, global_batch=, seq_len=, micro_batch=, tp=, pp=, dp=, ...)`` prices one
optimizer step of a decoder LM trained with Megatron-style 3D/4D parallelism:

* **Per-op roofline.** One transformer layer on one tensor-parallel rank is a graph of forward
  and backward ops (graphs/training.py) priced op by op by the engine (``max`` of compute and
  memory time per op, the preset's efficiency model; never a flat efficiency).
* **Pipeline (1F1B, interleaved).** With ``m`` micro-batches per data-parallel replica and
  ``t_mb`` the time of one micro-batch's forward+backward through one device's layers, the
  pipeline takes ``(m + (p−1)/v)·t_mb``: the bubble is ``(p−1)/(v·m)`` of the ideal time
  (Narayanan et al. 2021 §2.2). Point-to-point sends of ``b·s·h/t`` bytes per chunk boundary
  (scatter/gather optimisation) are on the critical path.
* **Tensor parallelism (Megatron, with sequence parallelism).** Per layer and micro-batch, two
  all-reduces of ``b·s·h`` in forward and two in backward (with SP: the same bytes as
  all-gather + reduce-scatter); forward ones are exposed, backward ones overlap the
  weight-gradient GEMMs of the column-parallel linears (QKV, MLP up/gate). Full recompute repeats
  the forward ones.
* **Data parallelism and ZeRO.** ZeRO-0: all-reduce of the fp32 gradients; ZeRO-1/2:
  reduce-scatter of gradients + all-gather of the updated bf16 parameters; ZeRO-3 (FSDP):
  two parameter all-gathers and a gradient reduce-scatter per micro-batch, overlapped with its
  compute. Gradient
  reduction is bucketed and overlapped with the last micro-batch's backward (``dp_overlap``);
  what does not fit under it, and at least the last bucket, stays exposed.
* **Expert parallelism (MoE).** A dispatch and a combine per MoE layer in forward and two in
  backward, exposed; a token goes once to each rank (and across nodes once to each node) holding
  one of its experts, as DeepEP dispatches (``ops.collectives.group_dispatch``); the ranks per
  token follow ``moe_routing``; ``ep_overlap``: Megatron-Core's combined 1F1B hides them behind
  the adjacent micro-batch's compute. Routed-expert weights split over ep, ZeRO over dp/ep.
  ``etp`` (MoE parallel folding, folding.py): the experts split etp ways instead of tp, the ep
  ranks spaced etp apart, etp·ep dividing tp·cp·dp, ZeRO over tp·cp·dp / (etp·ep).
* **Optimizer.** Mixed-precision Adam(W) over the local shard: one op of the registered
  formula ``optimizer_step`` (34 bytes per parameter: read the fp32 grad twice — norm for
  clipping, then update —, read and write fp32 master, m, v, write the bf16 copy; 16–17 FLOPs),
  priced by the time model as every other op (``optimizer``), launch included.

MFU and HFU follow PaLM (Chowdhery et al. 2022, App. B) as Korthikanti et al. 2022 §6.3 does:
**model FLOPs** are those of one forward and one backward pass (3× the forward matmul FLOPs,
attention counted as the full T×S score matrix, logits included), whatever the implementation;
**hardware FLOPs** add what recomputation re-executes (selective: the attention score and
context matmuls; full: the whole layer's forward matmuls). MFU = model FLOPs per second / (devices
× peak); HFU likewise with hardware FLOPs.

Memory per device (first pipeline stage, the fullest): bf16 weights, fp32 gradient buffers and
Adam states as Megatron's distributed-optimizer table counts them (bf16 params with fp32 grads:
2 + 4 + 12 bytes per parameter; fp16: 2 + 2 + 16), divided by ``dp`` for what ZeRO shards
(1: optimizer, 2: + gradients, 3: + weights); activations per Korthikanti et al. 2022 Table 2 for
each recompute mode and sequence parallelism, for the ``min(m, p)`` micro-batches the first
1F1B stage keeps in flight (× ``1 + (p−1)/(p·v)`` when interleaved).

Modules: ``step`` (``train``: the vectorised step model, validation of a split), ``memory``
(bytes per device), ``search`` (``best_parallelism``), ``context`` (the split-independent part,
cached group times; collectives are ``ops.collectives``), ``optimizer`` (the optimizer step as
a one-op graph of the time model), ``generic`` (any other graph), ``factors`` (the fitted
training factors), ``result`` (``TrainingResult``).
"""

from __future__ import annotations

from .context import model_flops_per_sample
from .factors import _OVERRIDE, TrainingFactors, training_factors
from .result import TrainingResult
from .search import best_parallelism
from .step import ADAM_BYTES_PER_PARAM, ADAM_FLOPS_PER_PARAM, DP_BUCKET_BYTES, RECOMPUTE, train

__all__ = ["train", "best_parallelism", "TrainingResult", "RECOMPUTE", "training_factors",
           "model_flops_per_sample", "TrainingFactors", "ADAM_BYTES_PER_PARAM",
           "ADAM_FLOPS_PER_PARAM", "DP_BUCKET_BYTES", "_OVERRIDE"]
