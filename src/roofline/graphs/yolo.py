"""YOLOv8 detection networks, built from Ultralytics' ``yolov8.yaml`` (scale n by default).

Modules as Ultralytics defines them (``ultralytics/nn/modules``): ``Conv`` = conv (no bias) +
batch norm + SiLU; ``C2f`` = a 1×1 Conv to 2c channels split in two, n Bottlenecks (two 3×3
Convs, a residual add when shortcut) on the last half, all halves concatenated, a 1×1 Conv;
``SPPF`` = a 1×1 Conv to c/2, three chained 5×5 stride-1 max pools, concat, a 1×1 Conv;
``Detect`` = per level a box branch (two 3×3 Convs, a 1×1 conv with bias to 4·16 channels) and a
class branch (two 3×3 Convs, a 1×1 conv with bias to 80), then DFL (a softmax over 16 bins and
a fixed 1×1 conv of 16 weights). Upsampling (nearest ×2) and concatenation are copies; the
chunk is a view. Box decoding and NMS (post-processing) are not ops.
"""

from __future__ import annotations

import math

from ..specs.dtypes import Precision
from .cnn import Net, _net
from .graph import Graph

__all__ = ["yolov8"]

#: Ultralytics yolov8.yaml scales: (depth, width, max_channels)
SCALES = {"n": (0.33, 0.25, 1024), "s": (0.33, 0.50, 1024), "m": (0.67, 0.75, 768),
          "l": (1.00, 1.00, 512), "x": (1.00, 1.25, 512)}


def _ch(c: int, width: float, max_ch: int) -> int:
    """Ultralytics' make_divisible(min(c, max_channels) · width, 8)."""
    return int(math.ceil(min(c, max_ch) * width / 8) * 8)


def _reps(n: int, depth: float) -> int:
    return max(round(n * depth), 1) if n > 1 else n


class _Y:
    """A Net with named saved outputs (the YAML's layer indices) for the head's concats."""

    def __init__(self, n: Net) -> None:
        self.n = n
        self.saved: dict[int, tuple[int, int, int]] = {}

    def conv(self, name: str, c: int, k: int, s: int = 1) -> None:
        self.n.conv(f"{name}.conv", c, k, s)
        self.n.bn(f"{name}.bn")
        self.n.act(f"{name}.act", "silu")

    def c2f(self, name: str, c2: int, reps: int, shortcut: bool) -> None:
        n = self.n
        c = int(c2 * 0.5)
        self.conv(f"{name}.cv1", 2 * c, 1)
        n.c = c  # chunk(2): a view; the bottlenecks run on the last half
        for i in range(reps):
            self.conv(f"{name}.m.{i}.cv1", c, 3)
            self.conv(f"{name}.m.{i}.cv2", c, 3)
            if shortcut:
                n.add(f"{name}.m.{i}.add")
        n.c = (2 + reps) * c
        n.b.add("copy", f"{name}.cat", elements=n.elems)
        self.conv(f"{name}.cv2", c2, 1)

    def sppf(self, name: str, c2: int, k: int = 5) -> None:
        n = self.n
        c_ = n.c // 2
        self.conv(f"{name}.cv1", c_, 1)
        for i in range(3):
            n.maxpool(f"{name}.m.{i}", k, 1, k // 2)
        n.c = 4 * c_
        n.b.add("copy", f"{name}.cat", elements=n.elems)
        self.conv(f"{name}.cv2", c2, 1)

    def upsample(self, name: str) -> None:
        n = self.n
        n.h, n.w = 2 * n.h, 2 * n.w
        n.b.add("copy", name, elements=n.elems)

    def concat(self, name: str, other: int) -> None:
        n = self.n
        c, h, w = self.saved[other]
        assert (h, w) == (n.h, n.w), (name, (h, w), (n.h, n.w))
        n.c += c
        n.b.add("copy", name, elements=n.elems)

    def save(self, i: int) -> None:
        self.saved[i] = (self.n.c, self.n.h, self.n.w)

    def restore(self, i: int) -> None:
        self.n.c, self.n.h, self.n.w = self.saved[i]


def yolov8(precision: Precision, *, scale: str = "n", image: int = 640,
           classes: int = 80) -> Graph:
    """YOLOv8 (Ultralytics 8.0, ``yolov8{scale}.yaml``) at ``image``×``image``: backbone,
    FPN/PAN neck and the anchor-free decoupled Detect head on strides 8, 16 and 32."""
    d, wd, mc = SCALES[scale]
    ch = (lambda c: _ch(c, wd, mc))  # noqa: E731
    y = _Y(_net(f"yolov8{scale}", precision, image))
    # backbone
    y.conv("model.0", ch(64), 3, 2)
    y.conv("model.1", ch(128), 3, 2)
    y.c2f("model.2", ch(128), _reps(3, d), True)
    y.conv("model.3", ch(256), 3, 2)
    y.c2f("model.4", ch(256), _reps(6, d), True)
    y.save(4)
    y.conv("model.5", ch(512), 3, 2)
    y.c2f("model.6", ch(512), _reps(6, d), True)
    y.save(6)
    y.conv("model.7", ch(1024), 3, 2)
    y.c2f("model.8", ch(1024), _reps(3, d), True)
    y.sppf("model.9", ch(1024))
    y.save(9)
    # head
    y.upsample("model.10")
    y.concat("model.11", 6)
    y.c2f("model.12", ch(512), _reps(3, d), False)
    y.save(12)
    y.upsample("model.13")
    y.concat("model.14", 4)
    y.c2f("model.15", ch(256), _reps(3, d), False)
    y.save(15)
    y.conv("model.16", ch(256), 3, 2)
    y.concat("model.17", 12)
    y.c2f("model.18", ch(512), _reps(3, d), False)
    y.save(18)
    y.conv("model.19", ch(512), 3, 2)
    y.concat("model.20", 9)
    y.c2f("model.21", ch(1024), _reps(3, d), False)
    y.save(21)
    # Detect: reg_max 16; c2 = max(16, ch0 / 4, 4·16), c3 = max(ch0, min(classes, 100))
    levels = (15, 18, 21)
    ch0 = y.saved[15][0]
    c2, c3 = max(16, ch0 // 4, 64), max(ch0, min(classes, 100))
    n = y.n
    anchors = 0
    for li, lvl in enumerate(levels):
        for branch, width, out in (("cv2", c2, 64), ("cv3", c3, classes)):
            y.restore(lvl)
            y.conv(f"model.22.{branch}.{li}.0", width, 3)
            y.conv(f"model.22.{branch}.{li}.1", width, 3)
            n.conv(f"model.22.{branch}.{li}.2", out, 1, bias=True)
        anchors += n.h * n.w
    # DFL: softmax over 16 bins of each of the 4 box sides, a fixed 1×1 conv (16 weights)
    n.b.add("softmax", "model.22.dfl.softmax", elements=4 * 16 * anchors)
    n.c, n.h, n.w = 16, 4, anchors
    n.conv("model.22.dfl.conv", 1, 1)
    return n.b.build()
