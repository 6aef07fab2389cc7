"""Data types and precision recipes.

A dtype name keys both a storage size (bytes per element) and a hardware peak
(``Hardware.peak_flops_per_s[dtype]``). ``tf32`` is a compute mode: its storage is fp32.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from .. import _args
from ..errors import SpecError, closest

__all__ = ["DTYPE_BYTES", "DTYPES", "Precision", "precision", "PRECISION_ARG", "gguf_formats"]

#: bytes per stored element
DTYPE_BYTES: dict[str, float] = {
    "fp64": 8.0, "fp32": 4.0, "tf32": 4.0, "bf16": 2.0, "fp16": 2.0,
    "fp8": 1.0, "int8": 1.0, "int4": 0.5, "fp4": 0.5,
}
DTYPES = tuple(DTYPE_BYTES)

_ALIASES = {
    "float64": "fp64", "double": "fp64", "float32": "fp32", "float": "fp32",
    "bfloat16": "bf16", "float16": "fp16", "half": "fp16", "e4m3": "fp8", "e5m2": "fp8",
    "float8": "fp8", "fp8_e4m3": "fp8", "fp8_e5m2": "fp8", "nvfp4": "fp4", "mxfp4": "fp4",
}


def _dtype(value: str, field: str) -> str:
    if not isinstance(value, str):
        raise SpecError(f"{field} must be a dtype name string, got {value!r}")
    name = _ALIASES.get(value.lower(), value.lower())
    if name not in DTYPE_BYTES:
        raise SpecError(
            f"{field}={value!r} is not a known dtype.{closest(value, DTYPES)} "
            f"Allowed: {', '.join(DTYPES)}"
        )
    return name


@dataclass(frozen=True, slots=True, kw_only=True)
class Precision:
    """Which dtype each tensor class is stored in and which peak the math runs at."""

    compute: str  #: dtype whose hardware peak prices matmul-class ops
    weights: str  #: dtype of stored weights
    activations: str  #: dtype of activations moved between ops
    kv: str  #: dtype of the KV cache (LLMs)
    #: extra bytes per weight for quantisation scales (e.g. int4 with a 2-byte scale per 128
    #: weights: 2/128 = 0.0156 B per weight); 0 for unquantised weights
    weight_overhead_bytes: float = 0.0
    #: a named weight format whose bytes ``weights`` + ``weight_overhead_bytes`` give (a GGUF
    #: type such as "q4_k_m", data/formats/gguf.toml); "" for a plain dtype
    weight_format: str = ""

    def __post_init__(self) -> None:
        for f in ("compute", "weights", "activations", "kv"):
            object.__setattr__(self, f, _dtype(getattr(self, f), f"precision.{f}"))
        if self.weight_overhead_bytes < 0:
            raise SpecError("precision.weight_overhead_bytes must be >= 0")

    @property
    def weight_bytes(self) -> float:
        """Bytes per stored weight, scales included."""
        return DTYPE_BYTES[self.weights] + self.weight_overhead_bytes

    @property
    def act_bytes(self) -> float:
        return DTYPE_BYTES[self.activations]

    @property
    def kv_bytes(self) -> float:
        return DTYPE_BYTES[self.kv]

    @property
    def matmul_out_bytes(self) -> float:
        """Bytes per element a matmul-class op (linear, matmul) writes. An fp8 GEMM reads
        1-byte operands and writes a 16-bit result: cuBLASLt's fp8 matmuls take a bf16 / fp16
        C / D (superbenchmark's cublaslt_gemm writes fp16 D; the XLA / ROCm XLA fp8 tables
        are f8 x f8 -> bf16; vLLM's, Transformer Engine's and torch._scaled_mm's usual
        ``out_dtype`` is the 16-bit activation dtype), so with 1-byte fp8 activations the
        output counts 2 bytes. Every other precision writes its activation dtype (int8's
        TensorRT kernels may requantize in the epilogue: left at 1 byte)."""
        if self.compute == "fp8" and DTYPE_BYTES[self.activations] < 2.0:
            return 2.0
        return DTYPE_BYTES[self.activations]

    @property
    def link_bytes(self) -> float:
        """Bytes per element of an activation sent between devices: a tensor-parallel
        all-reduce or reduce-scatter (a row-parallel matmul's output), a pipeline stage's
        hidden states, context-parallel K/V, expert-parallel dispatch and combine. The one
        rule every scenario prices its links with. What crosses a link is the residual
        stream or a matmul's output, which stay 16-bit when the matmuls run on 1-byte
        operands (fp8, W8A8 int8), so narrower activations count 2 bytes; wider ones
        (fp32) their own width. Read in the engines' code: TensorRT-LLM's ``FP8RowLinear``
        dequantizes to the model dtype and all-reduces the result (tensorrt_llm/quantization/
        layers.py at 027cd518, ``multiply_reduce``); vLLM's ``Fp8LinearMethod`` writes
        ``torch.get_default_dtype()`` and takes only bf16 / fp16 activations (vllm/
        model_executor/layers/quantization/fp8.py at 1436674b), and ``RowParallelLinear``
        all-reduces that output; Transformer Engine v1.8 (3ec998e9) writes a row-parallel
        fp8 GEMM's output in ``activation_dtype`` and all-reduces / reduce-scatters it
        (pytorch/module/linear.py); Megatron-Core receives pipeline tensors in
        ``config.pipeline_dtype`` (core/pipeline_parallel/p2p_communication.py at
        2fd6e2b7); Megatron-Core's DeepEP path dispatches the layer's 16-bit hidden states
        (core/transformer/moe/fused_a2a.py at 19c61ebd; an fp8 dispatch, as DeepSeek-V3's own
        training runs it, arXiv:2412.19437 §3.3, is not priced). One exception is priced where
        it happens, not here: with sequence parallelism Transformer Engine casts a
        column-parallel GEMM's input to fp8 before its all-gather (``act_bytes``, training's
        tensor-parallel term)."""
        return max(DTYPE_BYTES[self.activations], 2.0)

    @property
    def label(self) -> str:
        w = self.weight_format or self.weights
        parts = {self.compute, w, self.activations, self.kv}
        if len(parts) == 1:
            return self.compute
        return f"{self.compute}(w={w},a={self.activations},kv={self.kv})"


def PRECISION_ARG(name: str, v: object) -> object:  # noqa: N802 (a rule, named as a constant)
    """The argument rule of a ``precision=`` parameter (see roofline._args): a dtype name or a
    Precision."""
    if isinstance(v, str | Precision):
        return v
    raise _args.ArgumentError(f"{name} must be a dtype name ({', '.join(DTYPES)}) or a "
                              f"Precision, got {_args.show(v)} ({type(v).__name__})")


_SIMPLE: dict[str, Precision] = {}  # "fp16" -> Precision, filled on first use


def known_precision(spec: object) -> Precision | None:
    """``precision(spec)`` where that needs no work: ``spec`` itself for a Precision, the cached
    Precision of a plain dtype name already built; else None (call ``precision``). For hot
    callers whose own argument rules already checked ``spec`` (solve: ~1 µs of nested rules)."""
    if isinstance(spec, Precision):
        return spec
    return _SIMPLE.get(spec) if isinstance(spec, str) else None
_GGUF: dict[str, float] = {}  # "q4_k_m" -> bits per weight, read on first use


def gguf_formats() -> dict[str, float]:
    """GGUF weight formats and their bits per weight, scales included (data/formats/gguf.toml:
    ggml's block sizes; llama.cpp's published whole-model figures for the k-quant mixes)."""
    if not _GGUF:
        from .._data import DATA, read_toml

        doc = read_toml(DATA / "formats" / "gguf.toml")
        sources = doc.get("sources", {})
        for name, tbl in doc.get("format", {}).items():
            q = tbl.get("bits", {})
            if q.get("unit") != "bit" or q.get("source") not in sources:
                raise SpecError(f"data/formats/gguf.toml [format.{name}]: bits needs unit 'bit' "
                                f"and a source from [sources]")
            bits = float(q["value"])
            if not 1.0 <= bits <= 16.0:
                raise SpecError(f"data/formats/gguf.toml [format.{name}]: bits={bits} outside "
                                "[1, 16]")
            _GGUF[name] = bits
    return _GGUF


def _gguf(name: str) -> tuple[str, float, str] | None:
    """(storage dtype, extra bytes per weight, format name) of a GGUF type name, else None."""
    key = name.lower().replace("-", "_")
    if not key.startswith("q") or key not in gguf_formats():
        return None
    bits = gguf_formats()[key]
    store = "int8" if bits >= 8 else "int4"
    return store, bits / 8.0 - DTYPE_BYTES[store], key


#: weight dtypes that carry per-group scales (``group_size``)
QUANTISED_WEIGHTS = ("int8", "int4", "fp8", "fp4")


@_args.checked(spec=PRECISION_ARG, weights=_args.optional(_args.dtype),
               kv=_args.optional(_args.dtype), activations=_args.optional(_args.dtype),
               group_size=_args.optional(_args.count()))
def precision(
    spec: str | Precision = "fp16",
    *,
    weights: str | None = None,
    kv: str | None = None,
    activations: str | None = None,
    group_size: int | None = None,
) -> Precision:
    """Build a Precision from a name (``"fp16"``, ``"bf16"``, ``"tf32"``, ``"int8"``...).

    ``"tf32"`` computes at the tf32 peak with fp32 storage. ``"int8"`` is W8A8: int8 tensor
    cores need both operands in int8, so weights and activations are int8 (as TensorRT's INT8
    engines and SmoothQuant run), the KV cache stays fp16. 4-bit names apply to weights and
    compute, activations and KV stay fp16 unless given (``weights="int4"`` alone is weight-only
    quantisation: compute and activations fp16).
    ``group_size`` adds one fp16 scale per group of quantised weights (int8, int4, fp8, fp4
    weights; with wider weights it is refused: they have no scales).
    GGUF types (``"q4_0"``, ``"q4_k_m"``, ``"q5_k_m"``, ``"q6_k"``, ``"q8_0"`` …, see
    ``gguf_formats()``) are accepted as ``spec`` or ``weights``: weights at the type's real bits
    per weight (Q4_0 4.5, Q4_K_M 4.84, Q6_K 6.5625, Q8_0 8.5), fp16 compute, activations, KV.
    """
    if weights is None and kv is None and activations is None and group_size is None:
        hit = _SIMPLE.get(spec) if isinstance(spec, str) else None
        if hit is not None:  # the common case first: a plain dtype name
            return hit
    g = _gguf(spec) if isinstance(spec, str) else None
    if g is not None:  # a GGUF type: its weights, fp16 everything else
        spec = Precision(compute="fp16", weights=g[0], activations="fp16", kv="fp16",
                         weight_overhead_bytes=g[1], weight_format=g[2])
    if isinstance(spec, Precision):
        p = spec
    elif spec in _SIMPLE and weights is None and kv is None and activations is None \
            and group_size is None:
        return _SIMPLE[spec]
    else:
        name = _dtype(spec, "precision")
        store = "fp32" if name == "tf32" else name
        act = store if store in ("fp64", "fp32", "bf16", "fp16", "fp8", "int8") else "fp16"
        p = Precision(compute=name, weights=store, activations=act,
                      kv="fp16" if act == "int8" else act)
        if weights is None and kv is None and activations is None and group_size is None:
            _SIMPLE[spec] = p
    changes: dict[str, object] = {}
    gw = _gguf(weights) if isinstance(weights, str) else None
    gguf = weights if gw is not None else (p.weight_format if weights is None else "")
    if gguf and group_size is not None:  # (as spec too: its scales were replaced by 2/group)
        raise SpecError(f"group_size: the GGUF type {gguf!r} has its own block scales")
    if gw is not None:
        changes.update(weights=gw[0], weight_overhead_bytes=gw[1], weight_format=gw[2])
    elif weights is not None:
        changes["weights"] = _dtype(weights, "weights")
        changes["weight_format"] = ""
    if kv is not None:
        changes["kv"] = _dtype(kv, "kv_precision")
    if activations is not None:
        changes["activations"] = _dtype(activations, "activations")
    if group_size is not None:
        if not isinstance(group_size, int) or group_size < 1:
            raise SpecError(f"group_size must be a positive integer, got {group_size!r}")
        w = changes.get("weights", p.weights)
        if w not in QUANTISED_WEIGHTS:  # a scale per group exists only for quantised weights
            raise SpecError(f"group_size={group_size} needs quantised weights "
                            f"({', '.join(QUANTISED_WEIGHTS)}); the weights are {w}: give "
                            "weight_precision= (weights= in rl.precision, --weight-precision on "
                            "the command line), or leave group_size (--group-size) out")
        changes["weight_overhead_bytes"] = 2.0 / group_size
    return replace(p, **changes) if changes else p  # type: ignore[arg-type]
