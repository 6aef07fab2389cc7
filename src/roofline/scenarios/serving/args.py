"""Argument rules shared by ``serve``, ``serving_capacity`` and ``serve_sweep``
(see roofline._args)."""

from __future__ import annotations

from ... import _args as A
from . import plan as sp

TOKENS = A.count(1, A.MAX_TOKENS)  #: prompt, output and context lengths
DEGREE = A.count(1, A.MAX_DEVICES)  #: tensor / pipeline parallel degrees
ENGINE = A.either(A.text, A.instance_of(sp.ServingFactors, what="ServingFactors"),
                  what="a serving-engine name ('trtllm', 'vllm', ...) or ServingFactors")
KV_WINDOW = A.choice(*sp.KV_WINDOWS)
OPT_DTYPE = A.optional(A.dtype)
BATCHES = A.seq(A.count(), scalar=True, what="positive integers", ints=(1, A.MAX_COUNT))
CONTEXTS = A.seq(TOKENS, scalar=True, what="positive integers", ints=(1, A.MAX_TOKENS))
