"""Convolutional networks built layer by layer from their published definitions.

Each builder walks the architecture exactly as the reference implementation does (torchvision
layer names), tracking the per-sample shape ``(C, H, W)`` and emitting one op per kernel an
eager framework launches (conv, batch norm, activation, add, pool, linear). Batch norm is kept
as its own op (unfolded), as in eager PyTorch inference.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..ops import conv_out
from ..specs.dtypes import Precision
from .graph import Graph, GraphBuilder

__all__ = ["resnet", "vgg16", "mobilenet_v2", "efficientnet_b0", "Net"]


@dataclass
class Net:
    """A shape tracker over a GraphBuilder: each method emits ops and updates (C, H, W)."""

    b: GraphBuilder
    c: int
    h: int
    w: int
    #: id of the current tensor when the builder tags each op with the tensor its backward
    #: keeps (``GraphBuilder.add``'s ``saves``; graphs/backward.py counts each id once);
    #: None: no tags (each op's saved input counted on its own, an upper bound)
    t: int | None = None

    def _out(self) -> int | None:
        """A fresh id for the tensor the op just emitted writes (None when untracked)."""
        if self.t is None:
            return None
        self.t = self.b.new_tensor()
        return self.t

    @property
    def elems(self) -> int:
        return self.c * self.h * self.w

    def conv(self, name: str, c_out: int, k: int, s: int = 1, p: int | None = None,
             groups: int = 1, bias: bool = False, dilation: int = 1) -> None:
        p = (k - 1) // 2 * dilation if p is None else p
        params = c_out * (self.c // groups) * k * k + (c_out if bias else 0)
        self.b.add("conv2d", name, params=params, c_in=self.c, h=self.h, w=self.w, c_out=c_out,
                   kernel=k, stride=s, padding=p, dilation=dilation, groups=groups, bias=bias,
                   saves=self.t)  # its input, for the weight gradient
        self._out()
        self.c = c_out
        self.h = conv_out(self.h, k, s, p, dilation)
        self.w = conv_out(self.w, k, s, p, dilation)

    def bn(self, name: str) -> None:
        self.b.add("norm", name, params=2 * self.c, elements=self.elems, features=self.c,
                   variant="batchnorm", saves=self.t)  # its input
        self._out()

    def act(self, name: str, op: str = "relu") -> None:
        # in place (torchvision's ReLU(inplace=True)): autograd keeps the output, the
        # tensor the next op reads and keeps too (threshold_backward(grad, result))
        out = self._out()
        self.b.add("elementwise", name, elements=self.elems, op=op, saves=out)

    def add(self, name: str) -> None:
        # an add's gradient is dY for both addends: it keeps nothing (derivatives.yaml)
        self.b.add("elementwise", name, elements=self.elems, op="add",
                   saves=None if self.t is None else -1)
        self._out()

    def mul(self, name: str, n_inputs: int = 2) -> None:
        self.b.add("elementwise", name, elements=self.elems, op="mul", n_inputs=n_inputs)
        self._out()  # untagged: its saved inputs counted on their own

    def maxpool(self, name: str, k: int, s: int, p: int) -> None:
        self.b.add("pool2d", name, channels=self.c, h=self.h, w=self.w, kernel=k, stride=s,
                   padding=p, mode="max", saves=self.t)  # its input (indices: not
        self._out()  # counted, as graphs/backward.py says)
        self.h = conv_out(self.h, k, s, p, 1)
        self.w = conv_out(self.w, k, s, p, 1)

    def gap(self, name: str) -> None:
        self.b.add("global_pool", name, channels=self.c, spatial=self.h * self.w,
                   saves=self.t)
        self._out()
        self.h = self.w = 1

    def linear(self, name: str, d_out: int, bias: bool = True) -> None:
        d_in = self.elems
        self.b.add("linear", name, params=d_in * d_out + (d_out if bias else 0), tokens=1,
                   d_in=d_in, d_out=d_out, bias=bias, saves=self.t)
        self._out()
        self.c, self.h, self.w = d_out, 1, 1

    def conv_bn_act(self, name: str, c_out: int, k: int, s: int = 1, groups: int = 1,
                    act: str | None = "relu", conv_name: str = "0", bn_name: str = "1") -> None:
        self.conv(f"{name}.{conv_name}", c_out, k, s, groups=groups)
        self.bn(f"{name}.{bn_name}")
        if act:
            self.act(f"{name}.{int(bn_name) + 1}", act)


def _net(name: str, precision: Precision, image: int, phase: str = "forward") -> Net:
    b = GraphBuilder(name, phase, precision)
    b.meta["image_size"] = image
    return Net(b, 3, image, image)


# -- ResNet (He et al. 2016; torchvision resnet.py layout) ----------------------------------------

_RESNET = {18: ("basic", (2, 2, 2, 2)), 34: ("basic", (3, 4, 6, 3)),
           50: ("bottleneck", (3, 4, 6, 3)), 101: ("bottleneck", (3, 4, 23, 3)),
           152: ("bottleneck", (3, 8, 36, 3))}


def _ch(c: float) -> int:
    """A channel count rounded to a multiple of 8 (tensor-core friendly), at least 8."""
    return max(8, int(round(c / 8.0)) * 8)


def resnet(depth: int, precision: Precision, *, image: int = 224, classes: int = 1000,
           width: float = 1.0, depth_mult: float = 1.0, act: str = "relu") -> Graph:
    """ResNet-18/34/50/101/152 v1.5 (stride in the 3×3 conv, as torchvision).

    Size knobs (the levers' width and depth): ``width`` multiplies every stage's channels
    (rounded to a multiple of 8), ``depth_mult`` every stage's block count (rounded, >= 1);
    ``act`` replaces ReLU (an ``ops.ELEMENTWISE_FLOPS`` name). The defaults are torchvision's.
    """
    block, counts0 = _RESNET[depth]
    counts = tuple(max(1, int(round(c * depth_mult))) for c in counts0)
    n = _net(f"resnet{depth}", precision, image)
    n.t = n.b.new_tensor()  # tag each op with the tensor it keeps (the image first)
    n.conv("conv1", _ch(64 * width), 7, 2, 3)
    n.bn("bn1")
    n.act("relu", act)
    n.maxpool("maxpool", 3, 2, 1)
    expansion = 4 if block == "bottleneck" else 1
    for li, (width0, count) in enumerate(zip((64, 128, 256, 512), counts), start=1):
        width_c = _ch(width0 * width)
        for bi in range(count):
            p = f"layer{li}.{bi}"
            stride = 2 if (bi == 0 and li > 1) else 1
            c_in, h, w, t_in = n.c, n.h, n.w, n.t
            out = width_c * expansion
            if block == "bottleneck":
                n.conv(f"{p}.conv1", width_c, 1)
                n.bn(f"{p}.bn1")
                n.act(f"{p}.relu1", act)
                n.conv(f"{p}.conv2", width_c, 3, stride)
                n.bn(f"{p}.bn2")
                n.act(f"{p}.relu2", act)
                n.conv(f"{p}.conv3", out, 1)
                n.bn(f"{p}.bn3")
            else:
                n.conv(f"{p}.conv1", width_c, 3, stride)
                n.bn(f"{p}.bn1")
                n.act(f"{p}.relu1", act)
                n.conv(f"{p}.conv2", width_c, 3)
                n.bn(f"{p}.bn2")
            if stride != 1 or c_in != out:
                main = (n.c, n.h, n.w, n.t)
                n.c, n.h, n.w, n.t = c_in, h, w, t_in  # the block input, as conv1's
                n.conv(f"{p}.downsample.0", out, 1, stride, 0)
                n.bn(f"{p}.downsample.1")
                n.c, n.h, n.w, n.t = main
            n.add(f"{p}.add")
            n.act(f"{p}.relu3", act)
    n.gap("avgpool")
    n.linear("fc", classes)
    return n.b.build()


# -- VGG-16 (Simonyan & Zisserman 2015, configuration D; torchvision vgg16) --------------------

def vgg16(precision: Precision, *, image: int = 224, classes: int = 1000) -> Graph:
    """VGG-16 without batch norm: 13 3×3 convs + 3 FC layers (138.4 M parameters)."""
    cfg: list[int | str] = [64, 64, "M", 128, 128, "M", 256, 256, 256, "M", 512, 512, 512, "M",
           512, 512, 512, "M"]
    n = _net("vgg16", precision, image)
    i = 0
    for v in cfg:
        if v == "M":
            n.maxpool(f"features.{i}", 2, 2, 0)
            i += 1
        else:
            n.conv(f"features.{i}", int(v), 3, 1, 1, bias=True)
            n.act(f"features.{i + 1}")
            i += 2
    # torchvision's AdaptiveAvgPool2d((7, 7)) is the identity at 224²
    n.linear("classifier.0", 4096)
    n.act("classifier.1")
    n.linear("classifier.3", 4096)
    n.act("classifier.4")
    n.linear("classifier.6", classes)
    return n.b.build()


def alexnet(precision: Precision, *, image: int = 224, classes: int = 1000) -> Graph:
    """AlexNet as torchvision builds it (Krizhevsky 2014's one-GPU variant: 64/192/384/256/256
    filters): 5 convs with ReLU and 3 max-pools, then 3 FC layers (61.1 M parameters)."""
    n = _net("alexnet", precision, image)
    n.conv("features.0", 64, 11, 4, 2, bias=True)
    n.act("features.1")
    n.maxpool("features.2", 3, 2, 0)
    n.conv("features.3", 192, 5, 1, 2, bias=True)
    n.act("features.4")
    n.maxpool("features.5", 3, 2, 0)
    for i, c in ((6, 384), (8, 256), (10, 256)):
        n.conv(f"features.{i}", c, 3, 1, 1, bias=True)
        n.act(f"features.{i + 1}")
    n.maxpool("features.12", 3, 2, 0)
    # torchvision's AdaptiveAvgPool2d((6, 6)) is the identity at 224² (224 → 55 → 27 → 13 → 6)
    n.linear("classifier.1", 4096)
    n.act("classifier.2")
    n.linear("classifier.4", 4096)
    n.act("classifier.5")
    n.linear("classifier.6", classes)
    return n.b.build()


# -- MobileNetV2 (Sandler et al. 2018; torchvision mobilenet_v2) ------------------------------

def mobilenet_v2(precision: Precision, *, image: int = 224, classes: int = 1000) -> Graph:
    """MobileNetV2 1.0: inverted residuals with depthwise 3×3 convs and ReLU6 (3.50 M params)."""
    setting = [(1, 16, 1, 1), (6, 24, 2, 2), (6, 32, 3, 2), (6, 64, 4, 2), (6, 96, 3, 1),
               (6, 160, 3, 2), (6, 320, 1, 1)]
    n = _net("mobilenet_v2", precision, image)
    n.conv_bn_act("features.0", 32, 3, 2, act="relu6")
    idx = 1
    for t, c, reps, s in setting:
        for r in range(reps):
            p = f"features.{idx}.conv"
            stride = s if r == 0 else 1
            c_in = n.c
            hidden = c_in * t
            j = 0
            if t != 1:
                n.conv_bn_act(f"{p}.{j}", hidden, 1, act="relu6")
                j += 1
            n.conv_bn_act(f"{p}.{j}", hidden, 3, stride, groups=hidden, act="relu6")
            n.conv(f"{p}.{j + 1}", c, 1)
            n.bn(f"{p}.{j + 2}")
            if stride == 1 and c_in == c:
                n.add(f"features.{idx}.add")
            idx += 1
    n.conv_bn_act(f"features.{idx}", 1280, 1, act="relu6")
    n.gap("avgpool")
    n.linear("classifier.1", classes)
    return n.b.build()


# -- EfficientNet-B0 (Tan & Le 2019; torchvision efficientnet_b0) ------------------------------

def efficientnet_b0(precision: Precision, *, image: int = 224, classes: int = 1000) -> Graph:
    """EfficientNet-B0: MBConv blocks with squeeze-and-excitation and SiLU (5.29 M params)."""
    # (expand ratio, kernel, stride, in, out, layers)
    setting = [(1, 3, 1, 32, 16, 1), (6, 3, 2, 16, 24, 2), (6, 5, 2, 24, 40, 2),
               (6, 3, 2, 40, 80, 3), (6, 5, 1, 80, 112, 3), (6, 5, 2, 112, 192, 4),
               (6, 3, 1, 192, 320, 1)]
    n = _net("efficientnet_b0", precision, image)
    n.conv_bn_act("features.0", 32, 3, 2, act="silu")
    for si, (t, k, s, _c_in, c_out, layers) in enumerate(setting, start=1):
        for li in range(layers):
            p = f"features.{si}.{li}.block"
            stride = s if li == 0 else 1
            c_in = n.c
            hidden = c_in * t
            j = 0
            if t != 1:
                n.conv_bn_act(f"{p}.{j}", hidden, 1, act="silu")
                j += 1
            n.conv_bn_act(f"{p}.{j}", hidden, k, stride, groups=hidden, act="silu")
            j += 1
            # squeeze-and-excitation: pool -> 1×1 conv (reduce to in/4) -> SiLU -> 1×1 -> sigmoid
            sq = max(1, c_in // 4)
            hw = (n.c, n.h, n.w)
            n.gap(f"{p}.{j}.avgpool")
            n.conv(f"{p}.{j}.fc1", sq, 1, bias=True)
            n.act(f"{p}.{j}.activation", "silu")
            n.conv(f"{p}.{j}.fc2", hidden, 1, bias=True)
            n.act(f"{p}.{j}.scale_activation", "sigmoid")
            n.c, n.h, n.w = hw
            # x · s with s broadcast over H×W: reads x and the [C] scale, writes x
            n.b.add("elementwise", f"{p}.{j}.scale", elements=n.elems, op="mul", n_inputs=1)
            j += 1
            n.conv(f"{p}.{j}.0", c_out, 1)
            n.bn(f"{p}.{j}.1")
            if stride == 1 and c_in == c_out:
                n.add(f"features.{si}.{li}.add")
    n.conv_bn_act("features.8", 1280, 1, act="silu")
    n.gap("avgpool")
    n.linear("classifier.1", classes)
    return n.b.build()


def image_tokens(image: int, patch: int) -> int:
    return (image // patch) ** 2


