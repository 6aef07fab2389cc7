"""Model zoo: CNN graphs from layer definitions, tested against published figures."""

import pytest

import roofline as rl
from roofline.errors import SpecError, UnknownNameError

CNNS = ["resnet18", "resnet34", "resnet50", "resnet101", "resnet152", "vgg16", "mobilenet_v2",
        "efficientnet_b0", "alexnet"]


@pytest.mark.parametrize("key", CNNS)
def test_cnn_params_exact_and_macs_within_1pct(key):
    m = rl.model(key)
    # parameter counts equal torchvision's num_params exactly (cited in the data file)
    assert m.params == m.published["params"].value
    g = m.graph(precision="fp16")
    macs = sum(g.c1[0, i] for i, c in enumerate(g.classes) if c in ("conv", "matmul")) / 2
    # torchvision's "GFLOPS" column counts multiply-adds, rounded to 2 decimals
    assert macs == pytest.approx(m.published["macs"].value, rel=0.012)


def test_resnet50_flops_are_twice_the_macs_plus_elementwise():
    g = rl.model("resnet50").graph(precision="fp16")
    c = g.cost(batch=1)
    assert 8.17e9 < c.flops < 8.30e9  # 2 × 4.089 GMACs + BN/ReLU/add/pool work
    assert g.weight_footprint_bytes == 25_557_032 * 2


def test_graph_costs_are_affine_in_batch():
    g = rl.model("resnet50").graph(precision="fp16")
    c1, c2, c8 = (g.cost(b) for b in (1, 2, 8))
    assert c8.flops == pytest.approx(8 * c1.flops)
    # weights are read once per call: bytes(8) = W + 8·act, bytes(2) = W + 2·act
    act = c2.bytes - c1.bytes
    assert c8.bytes == pytest.approx(c1.bytes + 7 * act)
    assert c1.weight_bytes_read == pytest.approx(c8.weight_bytes_read)


def test_precision_changes_bytes_not_flops():
    m = rl.model("resnet18")
    a, b = (m.graph(precision=p).cost(1) for p in ("fp32", "fp16"))
    assert a.flops == b.flops and a.bytes == pytest.approx(2 * b.bytes)


def test_transformer_zoo_loads_and_has_sources():
    for key in rl.list_models():
        m = rl.model(key)
        assert m.source, key


def test_resolution_and_errors(tmp_path):
    assert rl.model("ResNet-50") is rl.model("resnet50")
    with pytest.raises(UnknownNameError, match="resnet50"):
        rl.model("resnet5O")
    with pytest.raises(SpecError, match="pickled"):
        rl.model("weights.pt")
    with pytest.raises(SpecError, match="model must be"):
        rl.model(42)


def test_hf_config_json(tmp_path):
    import json

    cfg = {"model_type": "llama", "hidden_size": 256, "intermediate_size": 512,
           "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2,
           "vocab_size": 1000, "max_position_embeddings": 512}
    p = tmp_path / "config.json"
    p.write_text(json.dumps(cfg))
    m = rl.model(str(p))
    # embed 1000·256 + per layer (q 256·256, k/v 2·256·128, o 256·256, mlp 3·256·512,
    # 2 norms 2·256) + final norm 256 + lm_head 256·1000
    per_layer = 256 * 256 + 2 * 256 * 128 + 256 * 256 + 3 * 256 * 512 + 2 * 256
    assert m.params == 1000 * 256 + 2 * per_layer + 256 + 256 * 1000
    del cfg["hidden_size"]
    p.write_text(json.dumps(cfg))
    with pytest.raises(SpecError, match="hidden_size"):
        rl.model(str(p))


def test_fusion_keeps_flops_and_cuts_traffic():
    m = rl.model("resnet50")
    eager, fused = m.graph(precision="fp16"), m.graph(precision="fp16", fuse=True)
    assert len(eager) == 174 and len(fused) == 56  # 53 convs + fc + max and avg pool
    ce, cf = eager.cost(8), fused.cost(8)
    assert cf.flops == pytest.approx(ce.flops)
    assert cf.bytes < 0.6 * ce.bytes
    assert fused.params_total == eager.params_total
    assert fused.names[0] == "conv1+bn1+relu"


def test_fusion_reads_the_residual_branch():
    from roofline.graphs.graph import Q

    g = rl.model("resnet18").graph(precision="fp16", fuse=True)
    i = g.names.index("layer1.0.conv2+bn2+add+relu3")
    # conv2 reads its 64×56×56 input and the residual (same size), writes one output
    assert g.c1[Q["act_bytes_read"], i] == 2 * 64 * 56 * 56 * 2
    assert g.c1[Q["act_bytes_written"], i] == 64 * 56 * 56 * 2


def test_int8_precision_is_w8a8():
    p = rl.precision("int8")
    assert (p.compute, p.weights, p.activations, p.kv) == ("int8", "int8", "int8", "fp16")
    w8a16 = rl.precision("int8", activations="fp16")
    g8 = rl.model("resnet18").graph(precision=p).cost(1)
    g16 = rl.model("resnet18").graph(precision=w8a16).cost(1)
    assert g8.flops == g16.flops and g8.act_bytes_read == pytest.approx(g16.act_bytes_read / 2)
