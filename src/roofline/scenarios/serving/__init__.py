"""LLM serving: prefill, every decode step, and the request rate a deployment sustains.

``serve(model, hardware, batch=, prompt_len=, output_len=)`` prices a *static batch*: the B
prompts are prefilled together (TTFT), then ``output_len − 1`` decode steps run at contexts
S = P+1 … P+n−1 (the first output token comes from the prefill). The decode steps are summed
in closed form (see ``serving/plan.py``), so a 32k-token generation costs the same as one step.

Conventions
- ``tpot`` is the mean decode-step time over the generation; ``e2e_latency = ttft + (n−1)·tpot``;
  ``tokens_per_s = B·n / e2e_latency`` counts output tokens of the whole deployment
  (``tokens_per_s_per_device`` divides by tp·pp devices).
- Continuous batching at concurrency C = batch (``steady_*`` fields): requests are at
  uniformly spread positions of their generation, so the mean step costs the mean over the
  contexts; every step also absorbs C/n new prefills (one request each, batch 1), which stall
  decoding: ``steady_tpot = tpot + (C/n)·ttft(batch 1)``.
- Tensor parallelism: Megatron split (``plan.shard_config``) and 2 all-reduces per
  layer (+1 for the vocabulary-parallel embedding) of B·T·D activations over the hardware's
  ``scale_up_link`` (bytes/s per direction per device), each priced by ``allreduce_time``: one
  latency per collective call (not per ring step) and the faster of a one-shot and a two-shot
  custom all-reduce, or NCCL, per the engine profile.
- Pipeline parallelism: ⌈L/pp⌉ layers per device; a step crosses the pp stages in turn, each
  running a micro-batch of ⌈B/pp⌉ while the others work on the rest:
  step = pp · t_stage(⌈B/pp⌉) + (pp−1) · send(B/pp·T·D).
- ``preset="mlsysim"`` reproduces mlsysim 0.1.1's ServingModel (TTFT, ITL, KV) and its
  Engine.solve decode step as ``.decode`` (docs/mlsysim-conventions.md §4).

Modules: ``phases`` (``serve``: prefill, decode steps, memory), ``plan`` (per-device graphs,
engine factors, closed-form sums), ``comm`` (TP all-reduce, PP sends), ``capacity``
(``serving_capacity``), ``sweep`` (``serve_sweep``), ``result`` (``ServeResult``),
``mlsysim`` (the mlsysim-convention path).
"""

from __future__ import annotations

from .capacity import Capacity, serving_capacity
from .comm import allreduce_time
from .phases import serve
from .result import QUEUE_MODEL, ServeResult, expected_tokens_per_step
from .sweep import serve_sweep

__all__ = [
    "QUEUE_MODEL",
    "Capacity",
    "allreduce_time",
    "ServeResult",
    "expected_tokens_per_step",
    "serve",
    "serve_sweep",
    "serving_capacity",
]
