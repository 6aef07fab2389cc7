"""Issue 16 item 5, models: the seed zoo's CNNs, each checked against its published figure or an
independent hand count of its reference definition (the arithmetic beside the number)."""

from __future__ import annotations

import pytest

import roofline as rl
from roofline.graphs import tiny
from roofline.specs.dtypes import precision


def _conv_macs(g):
    """Half the FLOPs of the conv and linear ops: their multiply-adds, plus half an add per
    output of an op with a bias."""
    return sum(g.c1[0, i] for i, c in enumerate(g.classes) if c in ("conv", "matmul")) / 2


def test_mobilenet_v1_matches_tf_slim_table():
    m = rl.model("mobilenet-v1")
    assert m.params == pytest.approx(m.published["params"].value, rel=0.005)  # 4,233,001
    g = m.graph(precision="fp16")
    assert _conv_macs(g) == pytest.approx(m.published["macs"].value, rel=0.005)  # 568.7 M


def test_mobilenet_v1_025_matches_tf_slim_table_at_224_and_128():
    m = rl.model("mobilenet-v1-0.25")
    assert m.params == pytest.approx(0.47e6, rel=0.011)  # 470,329; the table rounds to 0.01 M
    assert _conv_macs(m.graph(precision="fp16")) == pytest.approx(41e6, rel=0.013)
    g128 = tiny.mobilenet_v1(precision("fp16"), width=0.25, image=128)
    assert _conv_macs(g128) == pytest.approx(14e6, rel=0.04)  # the table's 14 M (13.57 M)
    # the hand count of the 0.25 network's weights (channels 8, 16, 32, 32, 64, 64, 128 x6,
    # 256, 256): conv0 3*3*3*8 = 216; depthwise 9*c_in + pointwise c_in*c_out per block:
    # 200 + 656 + 1312 + 2336 + 4672 + 8768 + 5*17536 + 33920 + 67840 = 207,384;
    # logits 256*1001 + 1001 = 257,257; batch norm gamma+beta 2 * 2,736 channels = 5,472
    assert m.params == 216 + 207_384 + 257_257 + 5_472


def test_ds_cnn_hand_count():
    m = rl.model("ds-cnn")
    # conv 10*4*1*64 + 64 = 2,624; 4 blocks of depthwise 9*64 + 64 and pointwise 64*64 + 64:
    # 4 * (640 + 4,160) = 19,200; dense 64*12 + 12 = 780; 9 batch norms x 64 x (gamma, beta)
    # = 1,152  -> 23,756
    assert m.params == 2_624 + 19_200 + 780 + 1_152
    g = m.graph(precision="int8")
    # 49x10 -> 25x5 ('same', stride 2); MACs: 25*5*64*40 = 320,000 + 4 * (25*5*64*9 +
    # 25*5*64*64) = 2,336,000 + dense 768 = 2,656,768; FLOPs = 2 x MACs + one add per biased
    # output: (8,000 conv + 4 * 16,000) + 12 = 72,012
    conv = sum(g.c1[0, i] for i, c in enumerate(g.classes) if c in ("conv", "matmul"))
    assert conv == 2 * 2_656_768 + 72_012
    # the int8 weights are below the published 53 KB file (which adds int32 biases, per-channel
    # quantisation parameters and the flatbuffer) and not absurdly far below it
    assert 0.4 < m.params / m.published["model_bytes"].value < 1.0


def test_resnet8_hand_count():
    m = rl.model("resnet8")
    # convs with biases: 448 + 2*2,320 + (4,640 + 9,248 + 544) + (18,496 + 36,928 + 2,112)
    # = 77,056; dense 64*10 + 10 = 650; 7 batch norms over 16+16+16+32+32+64+64 = 240
    # channels x 2 = 480  -> 78,186
    assert m.params == 77_056 + 650 + 480
    g = m.graph(precision="int8")
    # MACs: 32*32*16*27 + 2*32*32*16*144 + 16*16*32*(144 + 288 + 16) + 8*8*64*(288 + 576 + 32)
    # + 640 = 442,368 + 4,718,592 + 3,670,016 + 3,670,016 + 640 = 12,501,632
    assert _conv_macs(g) == pytest.approx(12_501_632, rel=0.005)  # + bias adds / 2
    assert 0.4 < m.params / m.published["model_bytes"].value < 1.0


def test_vww_int8_weights_below_the_published_file():
    m = rl.model("mlperf-tiny-vww")
    assert 0.4 < m.params / m.published["model_bytes"].value < 1.0  # 213,586 of 325 kB


def test_yolov8n_matches_ultralytics():
    m = rl.model("yolov8n")
    assert m.params == m.published["params"].value  # 3,157,200 (Ultralytics' model summary)
    g = m.graph(precision="fp16")
    assert 2 * _conv_macs(g) == pytest.approx(m.published["flops"].value, rel=0.015)  # 8.745 G
    assert g.meta["image_size"] == 640


@pytest.mark.parametrize("model", ["ds-cnn", "resnet8", "mlperf-tiny-vww"])
@pytest.mark.parametrize("hw", ["esp32-s3", "nrf52840"])
def test_mlperf_tiny_models_on_microcontrollers(model, hw):
    r = rl.solve(model, hw, batch=1, precision="int8")
    assert r.latency > 0
    if r.feasible:
        assert r.memory_footprint <= rl.hardware(hw).memory_capacity_bytes
    else:  # the honest reason: the bytes it needs against the SRAM it has
        assert "needs" in r.reason and "weights" in r.reason
    if model in ("ds-cnn", "resnet8"):
        assert r.feasible  # 24 k / 78 k int8 weights and their activations fit 256 KB
    # on the 64 MHz Cortex-M4 the same model is slower than on the 240 MHz dual LX7
    if hw == "nrf52840":
        assert r.latency > rl.solve(model, "esp32-s3", batch=1, precision="int8").latency


def _all_macs(g):
    """Multiply-adds of the matmul, conv and attention ops (FLOPs / 2, bias adds halved)."""
    return sum(g.c1[0, i] for i, c in enumerate(g.classes)
               if c in ("conv", "matmul", "attention")) / 2


def test_dit_xl_2_matches_the_paper():
    m = rl.model("dit-xl-2")
    # hand count of DiT-XL/2: patchify 4*2*2*1152 + 1152 = 19,584; pos_embed 256*1152 =
    # 294,912; timestep MLP (256*1152 + 1152) + (1152^2 + 1152) = 1,624,320; labels 1001*1152
    # = 1,153,152; 28 blocks x (qkv 3,984,768 + proj 1,328,256 + fc1 5,313,024 + fc2 5,309,568
    # + adaLN 7,969,536) = 669,344,256; final linear 36,896 + adaLN 2,656,512
    assert m.params == (19_584 + 294_912 + 1_624_320 + 1_153_152 + 669_344_256 + 36_896
                        + 2_656_512)  # 675,129,632
    assert m.params == pytest.approx(m.published["params"].value, rel=0.001)
    assert _all_macs(m.graph(precision="fp16")) == pytest.approx(
        m.published["macs"].value, rel=0.002)  # 118.66 G vs the paper's 118.6


def test_sd15_unet_matches_the_model_card():
    m = rl.model("sd15-unet")
    assert m.params == 859_520_964  # diffusers' count of the v1-5 UNet's parameters
    assert m.params == pytest.approx(m.published["params"].value, rel=0.001)  # "860M"
    g = m.graph(precision="fp16")
    # the self-attention at the 64x64 latent: 4,096 queries x 4,096 keys, 8 heads of 40
    i = g.names.index("down_blocks.0.attentions.0.transformer_blocks.0.attn1.attention")
    assert g.c1[0, i] == 4 * 8 * 4096 * 4096 * 40  # 4·N·T·S·H, not causal
    # one step is ~0.40 T multiply-adds at 512x512 (convs dominate)
    assert 3.9e11 < _all_macs(g) < 4.1e11


def test_classifier_free_guidance_is_twice_the_batch():
    one = rl.solve("dit-xl-2", "h100-sxm5", batch=8, precision="bf16", preset="bound")
    two = rl.solve("dit-xl-2", "h100-sxm5", batch=16, precision="bf16", preset="bound")
    assert two.flops == pytest.approx(2 * one.flops, rel=1e-3)
