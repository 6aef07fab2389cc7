"""The fitted and assumed factors the validation pages' prose quotes, read from the preset files
(data/presets/default.toml, training.toml) rather than copied by hand: inline markers
``<!--v:preset.KEY-->0.6125<!--/v-->`` that ``python -m roofline.validation.regenerate`` fills
on every page (``preset_figures``), so a refit rewrites every sentence that quotes it."""

from __future__ import annotations

from typing import Any

from .._data import DATA, read_toml
from ..errors import SpecError

__all__ = ["PRESET_FIGURES", "preset_figures"]

#: key -> (preset file, path of the factor in it, format)
PRESET_FIGURES: dict[str, tuple[str, tuple[str, ...], str]] = {
    # the [gpu] kind's 16-bit GEMM fraction and the fp8 multiplier on it (solve, serve, train)
    "preset.gpu.gemm_max": ("default", ("gpu", "gemm", "max"), "{:.2f}"),
    "preset.gpu.fp8": ("default", ("gpu", "gemm_dtype", "fp8"), "{:.4g}"),
    "preset.cdna3.gemm_max": ("default", ("gpu-cdna3", "gemm", "max"), "{:.2f}"),
    # the training fit's GEMM fractions ([gpu]: A100 Megatron; Hopper; CDNA 3 derived)
    "preset.train.gemm_max": ("training", ("gpu", "efficiency", "gemm", "max"), "{:.2f}"),
    "preset.train.hopper.gemm_max": ("training", ("gpu-hopper", "efficiency", "gemm", "max"),
                                     "{:.2f}"),
    "preset.train.hopper.dtype_scale": ("training", ("gpu-hopper", "dtype_scale"), "{:.3f}"),
    "preset.train.cdna3.gemm_max": ("training", ("gpu-cdna3", "efficiency", "gemm", "max"),
                                    "{:.3f}"),
}


def _value(doc: dict[str, Any], key: str, file: str, path: tuple[str, ...]) -> float:
    """The factor at ``path`` of preset ``file``; a path no longer there (a renamed or removed
    factor) is an error naming the page marker that quotes it, not a KeyError."""
    node: Any = doc
    try:
        for k in path:
            node = node[k]
        return float(node["value"] if isinstance(node, dict) else node)
    except (KeyError, TypeError, ValueError) as e:
        raise SpecError(f"page marker <!--v:{key}-->: data/presets/{file}.toml has no number at "
                        f"{'.'.join(path)} ({type(e).__name__}: {e}); update PRESET_FIGURES in "
                        f"roofline/validation/preset_figures.py and the pages that quote it") from e


def preset_figures() -> dict[str, str]:
    """Every ``PRESET_FIGURES`` key's value as its format writes it, and the products the prose
    quotes: the fraction of the fp8 peak an fp8 matmul reaches (a 16-bit fraction × the fp8
    multiplier) for the [gpu] kind (``preset.gpu.fp8_of_peak``, "0.49"), CDNA 3
    (``preset.cdna3.fp8_of_peak``, "0.343"), the [gpu] training fit (``preset.train.
    fp8_of_peak``, "0.42") and Hopper training (``preset.train.hopper.fp8_of_peak``: its 16-bit
    fraction × ``preset.train.hopper.fp8_ratio``, the multiplier × ``dtype_scale``, "0.882")."""
    docs = {name: read_toml(DATA / "presets" / f"{name}.toml") for name in ("default", "training")}
    vals = {k: _value(docs[f], k, f, path) for k, (f, path, _) in PRESET_FIGURES.items()}
    out = {k: fmt.format(vals[k]) for k, (_, _, fmt) in PRESET_FIGURES.items()}
    fp8 = vals["preset.gpu.fp8"]
    out["preset.gpu.fp8_of_peak"] = f"{vals['preset.gpu.gemm_max'] * fp8:.2f}"
    out["preset.train.fp8_of_peak"] = f"{vals['preset.train.gemm_max'] * fp8:.2f}"
    out["preset.cdna3.fp8_of_peak"] = f"{vals['preset.cdna3.gemm_max'] * fp8:.3f}"
    ratio = fp8 * vals["preset.train.hopper.dtype_scale"]
    out["preset.train.hopper.fp8_ratio"] = f"{ratio:.3f}"
    out["preset.train.hopper.fp8_of_peak"] = f"{vals['preset.train.hopper.gemm_max'] * ratio:.3f}"
    return out
