"""DeepBench's "Resnet" convolutions on a V100, forward, backward-data and backward-filter: its
measured cuDNN times (data/validation/deepbench_convs.toml) against what ``train`` prices for
the same ops (the generic training graph's convolution and its two backward ops, the default
preset, on the zoo's V100 SXM2).

A look, not a fit: nothing here changes a prediction. It answers one question the ResNet-50
rows raise (docs/validation/training.md, "Session 31"): does cuDNN run the backward
convolutions below the forward's efficiency, where the backward rules price them at the
forward's FLOPs? ``rows()`` sums each direction's time over the 15 distinct shapes per
precision and batch; ``table_md()`` is the page's block.

DeepBench's "Resnet" list (its ``code/kernels/conv_problems.h``) is not the recipe's ResNet-50
v1.5 layer for layer: ``recipe_coverage()`` counts which of its shapes are convolutions of the
zoo's ``resnet50`` (the recipe's: stride on the 3×3) and what share of that network's
convolution FLOPs those shapes carry, counted with their multiplicity in the network. The
others are ResNet v1's stride-2 1×1 convolutions and a 1×1 at 112×112 that ResNet-50 does not
have; of the 3×3 convolutions only the one at 7×7 is measured.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .._data import DATA, read_toml

__all__ = ["convs", "recipe_coverage", "rows", "table_md", "CLUSTER"]

#: the zoo's V100 (the sheet's is a DGX-1's SXM2 V100; the 16 and 32 GB parts share clocks and
#: bandwidth)
CLUSTER = "v100-sxm2-32gb"
_DIRS = ("forward", "backward_data", "backward_filter")


def convs() -> list[dict[str, Any]]:
    """The measured convolutions, as in the data file."""
    d = read_toml(DATA / "validation" / "deepbench_convs.toml")
    return list(d["conv"])


def _ours(c: dict[str, Any]) -> tuple[float, float, float]:
    """(forward, backward-data, backward-filter) seconds ``train`` prices for one convolution
    at the measured batch: the op and its two backward ops of the training graph."""
    from ..engine.core import time_model
    from ..engine.presets import efficiency_for
    from ..engine.tiles import without_tiles
    from ..graphs.backward import backward_graph
    from ..graphs.graph import GraphBuilder
    from ..specs.dtypes import precision
    from ..specs.resolve import cluster

    hw = cluster(CLUSTER, None).device
    b = GraphBuilder("deepbench", "forward", precision(c["precision"]))
    k, ci = int(c["kernel"]), int(c["c"])
    b.add("conv2d", "conv", params=int(c["k"]) * ci * k * k, c_in=ci, h=int(c["h"]),
          w=int(c["w"]), c_out=int(c["k"]), kernel=k, stride=int(c["stride"]),
          padding=int(c["pad"]), dilation=1, groups=1, bias=False)
    tg = backward_graph(b.build())
    t = np.asarray(time_model(tg.graph, hw, without_tiles(efficiency_for(hw, "default")))
                   .evaluate(float(c["batch"])).time)
    return float(t[0]), float(t[1]), float(t[2])  # the op, then .bwd, then .bwd_dw


def rows() -> list[dict[str, Any]]:
    """Per (precision, batch): the shapes' summed times, published and ours, in seconds."""
    out: dict[tuple[str, int], dict[str, Any]] = {}
    for c in convs():
        key = (str(c["precision"]), int(c["batch"]))
        r = out.setdefault(key, {"precision": key[0], "batch": key[1], "shapes": 0,
                                 "published": np.zeros(3), "ours": np.zeros(3)})
        r["shapes"] += 1
        r["published"] += np.array([float(c[f"{d}_ms"]) for d in _DIRS]) * 1e-3
        r["ours"] += np.array(_ours(c))
    return [out[k] for k in sorted(out)]


def _shape_key(c: dict[str, Any]) -> tuple[int, int, int, int]:
    """(output pixels, output channels, reduction length, input elements) of one image."""
    k, s, pad = int(c["kernel"]), int(c["stride"]), int(c["pad"])
    p = (int(c["w"]) + 2 * pad - k) // s + 1
    q = (int(c["h"]) + 2 * pad - k) // s + 1
    return p * q, int(c["k"]), int(c["c"]) * k * k, int(c["w"]) * int(c["h"]) * int(c["c"])


def recipe_coverage() -> tuple[int, int, float]:
    """(DeepBench shapes that are convolutions of the zoo's resnet50, DeepBench's distinct
    shapes, the share of resnet50's convolution FLOPs those shapes carry in the network)."""
    from ..graphs.graph import Q
    from ..graphs.resolve import model
    from ..specs.dtypes import precision

    p = precision("fp16")
    g = model("resnet50").graph(precision=p, phase="forward", batch=1)
    net: dict[tuple[int, int, int, int], float] = {}
    for i, kind in enumerate(g.kinds):
        if kind in ("conv", "conv2d"):
            key = (int(g.gemm[0, i]), int(g.gemm[1, i]), int(g.gemm[2, i]),
                   int(round(float(g.c1[Q["act_bytes_read"], i]) / p.act_bytes)))
            net[key] = net.get(key, 0.0) + float(g.c1[Q["flops"], i])
    shapes = {_shape_key(c) for c in convs()}
    hit = shapes & set(net)
    return len(hit), len(shapes), sum(net[k] for k in hit) / sum(net.values())


def backward_ratio(t: np.ndarray) -> float:
    """Backward-data plus backward-filter over twice the forward."""
    return float((t[1] + t[2]) / (2 * t[0]))


def table_md(rs: list[dict[str, Any]] | None = None) -> str:
    """The generated block "deepbench" of docs/validation/training.md."""
    rs = rows() if rs is None else rs
    lines = ["| precision | batch | shapes | forward [ms]: DeepBench / ours "
             "| backward-data [ms] | backward-filter [ms] "
             "| (data + filter) / (2 × forward): DeepBench / ours |",
             "|---|---:|---:|---:|---:|---:|---:|"]
    for r in rs:
        p, o = r["published"] * 1e3, r["ours"] * 1e3
        cells = " | ".join(f"{p[i]:.3f} / {o[i]:.3f}" for i in range(3))
        lines.append(f"| {r['precision']} | {r['batch']} | {r['shapes']} | {cells} | "
                     f"{backward_ratio(r['published']):.2f} / {backward_ratio(r['ours']):.2f} |")
    hit, n, share = recipe_coverage()
    lines += ["", f"Of DeepBench's {n} shapes, {hit} are convolutions of the recipe's ResNet-50 "
              f"v1.5 (the zoo's `resnet50`); counted with their multiplicity in that network "
              f"they carry {100 * share:.0f} % of its convolution FLOPs."]
    return "\n".join(lines)
