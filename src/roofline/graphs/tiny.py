"""Small convolutional networks of the seed zoo: MobileNet-v1 (any width), and MLPerf Tiny's
keyword-spotting DS-CNN and CIFAR-10 ResNet-8.

Each builder walks its reference definition layer by layer (the names follow it) with the
``Net`` shape tracker of graphs/cnn.py; convolutions with a rectangular kernel and TensorFlow
"same" padding (DS-CNN's 10×4 input conv) go through the N-d ``conv`` formula with the
asymmetric padding TensorFlow uses.
"""

from __future__ import annotations

from ..specs.dtypes import Precision
from .cnn import Net, _net
from .graph import Graph, GraphBuilder

__all__ = ["mobilenet_v1", "ds_cnn", "resnet8", "tf_same_padding"]


def tf_same_padding(size: int, kernel: int, stride: int) -> tuple[int, int, int]:
    """(output, pad before, pad after) of TensorFlow's ``padding='same'`` along one axis:
    out = ceil(X / s), total = max((out - 1)·s + k - X, 0), the odd pixel after."""
    out = -(-size // stride)
    total = max((out - 1) * stride + kernel - size, 0)
    return out, total // 2, total - total // 2


def _conv_same(n: Net, name: str, c_out: int, k: tuple[int, int], s: tuple[int, int] = (1, 1),
               groups: int = 1, bias: bool = True) -> None:
    """A TF ``Conv2D``/``DepthwiseConv2D`` with 'same' padding and a (kh, kw) kernel."""
    (ho, ph0, ph1), (wo, pw0, pw1) = (tf_same_padding(n.h, k[0], s[0]),
                                      tf_same_padding(n.w, k[1], s[1]))
    params = c_out * (n.c // groups) * k[0] * k[1] + (c_out if bias else 0)
    n.b.add("conv", name, params=params, c_in=n.c, spatial=(n.h, n.w), c_out=c_out, kernel=k,
            stride=s, padding=(ph0, pw0), padding_end=(ph1, pw1), groups=groups, bias=bias)
    n.c, n.h, n.w = c_out, ho, wo


# -- MobileNet-v1 (Howard et al. 2017, Table 1; TF-slim mobilenet_v1.py) -----------------------

#: (depthwise stride, pointwise channels) of the 13 depthwise-separable blocks (Table 1)
_MNV1 = [(1, 64), (2, 128), (1, 128), (2, 256), (1, 256), (2, 512), (1, 512), (1, 512),
         (1, 512), (1, 512), (1, 512), (2, 1024), (1, 1024)]


def mobilenet_v1(precision: Precision, *, width: float = 1.0, image: int = 224,
                 classes: int = 1001, min_depth: int = 8) -> Graph:
    """MobileNet-v1 with width multiplier α (``width``): a 3×3 stride-2 conv, 13
    depthwise-separable blocks (3×3 depthwise + BN + ReLU6, 1×1 pointwise + BN + ReLU6),
    global average pool and a 1×1 logits conv with bias (TF-slim's 1001 ImageNet classes).
    Channels are max(int(c·α), min_depth), as TF-slim rounds them. Convolutions carry no
    bias (batch norm follows); batch norm counts γ and β as parameters."""
    def depth(c: int) -> int:
        return max(int(c * width), min_depth)

    n = _net(f"mobilenet_v1_{width:g}_{image}", precision, image)
    n.conv_bn_act("Conv2d_0", depth(32), 3, 2, act="relu6")
    for i, (s, c) in enumerate(_MNV1, start=1):
        n.conv_bn_act(f"Conv2d_{i}_depthwise", n.c, 3, s, groups=n.c, act="relu6")
        n.conv_bn_act(f"Conv2d_{i}_pointwise", depth(c), 1, act="relu6")
    n.gap("AvgPool_1a")
    n.conv("Conv2d_1c_1x1", classes, 1, bias=True)
    return n.b.build()


# -- MLPerf Tiny keyword spotting: DS-CNN (Zhang et al. 2017 "Hello Edge"; mlcommons/tiny) -----

def ds_cnn(precision: Precision, *, frames: int = 49, mfcc: int = 10, filters: int = 64,
           blocks: int = 4, classes: int = 12) -> Graph:
    """MLPerf Tiny's keyword-spotting DS-CNN on a 49×10 MFCC map: a 10×4 stride-2 conv,
    ``blocks`` depthwise-separable blocks (3×3 depthwise, 1×1 pointwise, each with batch norm
    and ReLU), a global average pool and a dense layer to 12 classes. Keras convolutions carry
    biases. Dropout is the identity at inference and is not an op."""
    b = GraphBuilder("ds_cnn", "forward", precision)
    n = Net(b, 1, frames, mfcc)
    _conv_same(n, "conv2d", filters, (10, 4), (2, 2))
    n.bn("batch_normalization")
    n.act("activation")
    for i in range(1, blocks + 1):
        _conv_same(n, f"depthwise_conv2d_{i}", n.c, (3, 3), groups=n.c)
        n.bn(f"batch_normalization_dw{i}")
        n.act(f"activation_dw{i}")
        _conv_same(n, f"conv2d_pw{i}", filters, (1, 1))
        n.bn(f"batch_normalization_pw{i}")
        n.act(f"activation_pw{i}")
    n.gap("average_pooling2d")  # AveragePooling2D((25, 5)) over the whole map
    n.linear("dense", classes)
    n.b.add("softmax", "softmax", elements=classes)
    return n.b.build()


# -- MLPerf Tiny image classification: ResNet-8 on CIFAR-10 (mlcommons/tiny resnet_v1_eembc) ---

def resnet8(precision: Precision, *, filters: int = 16, image: int = 32,
            classes: int = 10) -> Graph:
    """MLPerf Tiny's CIFAR-10 ResNet-8 (EEMBC ``resnet_v1_eembc``): a 3×3 conv, three residual
    stacks of two 3×3 convs (filters ×1, ×2, ×4; stride 2 and a 1×1 stride-2 shortcut conv in
    the second and third), average pool and a dense layer. Keras convolutions carry biases;
    the shortcut convs have no batch norm."""
    b = GraphBuilder("resnet8", "forward", precision)
    n = Net(b, 3, image, image)
    _conv_same(n, "conv2d", filters, (3, 3))
    n.bn("batch_normalization")
    n.act("activation")
    for st, mult in enumerate((1, 2, 4), start=1):
        c_in, h, w = n.c, n.h, n.w
        s = 1 if st == 1 else 2
        _conv_same(n, f"stack{st}.conv1", filters * mult, (3, 3), (s, s))
        n.bn(f"stack{st}.bn1")
        n.act(f"stack{st}.relu1")
        _conv_same(n, f"stack{st}.conv2", filters * mult, (3, 3))
        n.bn(f"stack{st}.bn2")
        if st > 1:
            main = (n.c, n.h, n.w)
            n.c, n.h, n.w = c_in, h, w
            _conv_same(n, f"stack{st}.shortcut", filters * mult, (1, 1), (2, 2))
            n.c, n.h, n.w = main
        n.add(f"stack{st}.add")
        n.act(f"stack{st}.relu2")
    n.gap("average_pooling2d")
    n.linear("dense", classes)
    n.b.add("softmax", "softmax", elements=classes)
    return n.b.build()
