"""PyTorch import: traced graphs against the zoo, FlopCounterMode, batch/seq/precision, errors."""

from __future__ import annotations

import subprocess
import sys

import pytest

torch = pytest.importorskip("torch")

from fixtures.torch_models import GPT2, ResNet50, TinyNet  # noqa: E402

import roofline as rl  # noqa: E402
from roofline.errors import ImportGraphError, SpecError  # noqa: E402
from roofline.graphs.importers.torch_import import from_torch  # noqa: E402

nn = torch.nn
F = torch.nn.functional


def _rel(a: float, b: float) -> float:
    return abs(a - b) / b


@pytest.fixture(scope="module")
def resnet() -> rl.graphs.model.Model:
    with torch.device("meta"):
        net = ResNet50()
    return rl.model(net, example_inputs=(torch.empty(1, 3, 224, 224, device="meta"),))


@pytest.fixture(scope="module")
def gpt2() -> rl.graphs.model.Model:
    with torch.device("meta"):
        net = GPT2()
    return rl.model(net, example_inputs=(torch.zeros(1, 128, dtype=torch.long),), seq_dim=1)


def test_import_roofline_does_not_import_torch_or_onnx() -> None:
    code = ("import sys, roofline; bad = [m for m in ('torch', 'onnx', 'onnxscript') "
            "if m in sys.modules]; print(bad); sys.exit(1 if bad else 0)")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert r.returncode == 0, r.stdout + r.stderr


def test_resnet50_trace_matches_zoo(resnet) -> None:
    zoo = rl.model("resnet50")
    assert resnet.params == 25_557_032 == zoo.params  # torchvision's count
    for b in (1, 32):
        ours, ref = resnet.graph(precision="fp16").cost(b), zoo.graph(precision="fp16").cost(b)
        assert _rel(ours.flops, ref.flops) < 0.01
        assert _rel(ours.bytes, ref.bytes) < 0.05
    # epilogue fusion (solve(fuse=True)) sees the same fusible ops as in the zoo graph
    ours = resnet.graph(precision="fp16", fuse=True).cost(32)
    ref = zoo.graph(precision="fp16", fuse=True).cost(32)
    assert _rel(ours.bytes, ref.bytes) < 0.05 and _rel(ours.flops, ref.flops) < 0.01
    g = resnet.graph(precision="fp16")
    assert "layer3.2.conv1" in g.names and "layer1.0.add" in g.names
    assert resnet.unsupported_ops == ()


def test_gpt2_trace_matches_zoo(gpt2) -> None:
    zoo = rl.model("gpt2")
    assert gpt2.params == zoo.params  # tied LM head counted once
    for T in (128, 64):  # 64: a re-trace at another sequence length
        for b in (1, 8):
            ours = gpt2.graph(precision="bf16", seq_len=T).cost(b)
            ref = zoo.graph(precision="bf16", phase="forward", seq_len=T).cost(b)
            assert _rel(ours.flops, ref.flops) < 0.01
            # the trace also prices the position-embedding gather and the arange the zoo folds
            # into the position add: +0.11 % at B=1, T=128
            assert _rel(ours.bytes, ref.bytes) < 0.05
    g = gpt2.graph(precision="bf16")
    i = g.names.index("h.0.attn.attention")
    # causal attention, 12 heads of 64 at T=S=128: 4·N·H·T(T+1)/2 = 4·12·64·8256 = 25,362,432
    assert g.op_cost(i, 1).flops == 4 * 12 * 64 * 8256
    assert g.tokens_per_sample == 128


def test_batch_is_a_parameter(resnet) -> None:
    with torch.device("meta"):
        net = ResNet50()
    direct = from_torch(net, torch.empty(4, 3, 64, 64, device="meta"))
    small = from_torch(net, torch.empty(1, 3, 64, 64, device="meta"))
    a, b = direct.graph(precision="fp16").cost(4), small.graph(precision="fp16").cost(4)
    assert a.flops == pytest.approx(b.flops, rel=1e-12)
    assert a.bytes == pytest.approx(b.bytes, rel=1e-12)
    r = rl.solve(resnet, "H100", batch=32, precision="bf16")
    assert r.feasible and "layer3.2.conv1" in r.ops.to_pandas()["name"].tolist()
    s = rl.sweep(resnet, "H100", batch=[1, 8, 64], precision="bf16")
    assert len(s.to_pandas()) == 3


def test_precision_rebuilds_bytes_not_flops(gpt2) -> None:
    f32, b16 = gpt2.graph(precision="fp32").cost(1), gpt2.graph(precision="bf16").cost(1)
    assert f32.flops == b16.flops
    assert f32.weight_bytes_read == pytest.approx(2 * b16.weight_bytes_read)
    # activations follow the precision except integer tensors: the int64 positions (arange,
    # 128 × 8 B = 1,024 B) keep their size
    assert f32.act_bytes_written - 1024 == 2 * (b16.act_bytes_written - 1024)


class _Mixed(nn.Module):
    """Conv, linear, bmm and SDPA without biases: every op FlopCounterMode counts."""

    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv2d(3, 8, 3, padding=1, bias=False)
        self.proj = nn.Linear(8 * 4 * 4, 64, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = F.adaptive_avg_pool2d(self.conv(x), 4).flatten(1)
        h = self.proj(y).view(-1, 4, 16)  # [B, 4 tokens, 16]
        s = torch.bmm(h, h.transpose(1, 2))  # [B, 4, 4]
        q = h.view(-1, 2, 4, 8)  # 2 heads of 8... as [B, N, T, H]
        a = F.scaled_dot_product_attention(q, q, q)
        return s.sum() + a.sum()


def test_flops_agree_with_flop_counter_mode() -> None:
    from torch.utils.flop_counter import FlopCounterMode

    net = _Mixed().eval()
    x = torch.randn(2, 3, 8, 8)
    with FlopCounterMode(display=False) as fc, torch.no_grad():
        net(x)
    counts = {str(k): v for k, v in fc.get_flop_counts()["Global"].items()}
    g = from_torch(net, x).graph(precision="fp32")
    by_kind: dict[str, float] = {}
    for i, k in enumerate(g.kinds):
        by_kind[k] = by_kind.get(k, 0.0) + g.op_cost(i, 2).flops
    assert by_kind["conv2d"] == counts["aten.convolution"]  # 2·2·8·8·8·3·9 = 55,296
    assert by_kind["conv2d"] == 2 * 2 * 8 * 8 * 8 * 3 * 9
    assert by_kind["linear"] == counts["aten.mm"]  # 2·2·128·64 = 32,768
    assert by_kind["matmul"] == counts["aten.bmm"]  # 2·2·4·16·4 = 1,024
    # FlopCounterMode counts no FLOPs for SDPA on CPU (no formula for the CPU kernel); we do:
    # 4·B·N·T·S·H = 4·2·2·4·4·8 = 2,048 (non-causal)
    assert "aten._scaled_dot_product_flash_attention_for_cpu" not in counts
    assert by_kind["attention"] == 4 * 2 * 2 * 4 * 4 * 8


def test_bias_flops_are_counted_on_top_of_flop_counter_mode() -> None:
    from torch.utils.flop_counter import FlopCounterMode

    net = nn.Linear(16, 8).eval()
    x = torch.randn(3, 16)
    with FlopCounterMode(display=False) as fc, torch.no_grad():
        net(x)
    ours = from_torch(net, x).graph(precision="fp32").cost(3).flops
    assert ours == fc.get_total_flops() + 3 * 8  # + one add per output for the bias


class _Odd(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.inner = nn.Linear(8, 8)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.inner(x)
        return torch.cumprod(y, dim=1) + torch.logcumsumexp(y, dim=1)


def test_unsupported_ops_are_listed_never_zero() -> None:
    m = from_torch(_Odd(), torch.randn(2, 8))
    ops = {u.op for u in m.unsupported_ops}
    assert any("cumprod" in o for o in ops) and any("logcumsumexp" in o for o in ops)
    u = next(u for u in m.unsupported_ops if "cumprod" in u.op)
    assert u.name == "<root>" and u.input_shapes[0] == (2, 8) and u.elements == 32
    text = str(m)
    assert "UNSUPPORTED: 2 ops" in text and "cumprod" in text


def test_views_are_free_and_kept_on_request() -> None:
    m = from_torch(TinyNet(), torch.randn(2, 3, 8, 8), keep_views=True)
    g = m.graph(precision="fp16")
    views = [i for i, k in enumerate(g.kinds) if k == "view"]
    assert views and all(g.op_cost(i, 4).bytes == 0 and g.op_cost(i, 4).flops == 0
                         for i in views)
    assert m.n_free_ops == len(views)


def test_real_weights_untouched_and_mode_restored() -> None:
    net = TinyNet()
    before = net.conv.weight.detach().clone()
    net.train()
    m = from_torch(net, torch.randn(1, 3, 8, 8))
    assert torch.equal(before, net.conv.weight) and net.training and net.bn.training
    assert m.params == 3 * 16 * 9 + 2 * 16 + 16 * 10 + 10


class _BatchBranch(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.a = nn.Linear(4, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.a(x)
        return y * 2 if x.shape[0] > 1 else y


def test_not_affine_in_batch_is_retraced() -> None:
    # the ops change between batch 1 and 2 (not between 2 and 4): found as dim 0, priced from
    # the traces at 2, 4, 6, and the summary says so
    found = from_torch(_BatchBranch(), torch.randn(1, 4))
    assert found.batch_dims == (0,) and found.traced_batch == 2
    assert "the ops at batch 1 differ" in str(found)
    m = from_torch(_BatchBranch(), torch.randn(1, 4), batch_dim=0)
    assert m.batch_dependent
    r = rl.solve(m, "H100", batch=4, precision="fp32")
    # linear 2·4·4·4 + 4·4 bias + mul 4·4 = 160 FLOPs
    assert r.flops == 2 * 4 * 4 * 4 + 16 + 16


class _Broken(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.body = nn.Sequential(nn.Linear(8, 16), nn.Linear(32, 4))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.body(x)


def test_bad_inputs() -> None:
    with pytest.raises(SpecError, match="got int"):
        rl.model(42)
    with pytest.raises(ImportGraphError, match="nn.Module"):
        rl.model(torch.zeros(2))
    with pytest.raises(ImportGraphError, match="example_inputs"):
        rl.model(TinyNet())
    with pytest.raises(ImportGraphError, match=r"module 'body\.1' \(Linear\)"):
        rl.model(_Broken(), example_inputs=(torch.randn(2, 8),))
    with pytest.raises(SpecError, match="pickled"):
        rl.model("weights.pt")
    with pytest.raises(SpecError, match="seq_dim"):
        from_torch(TinyNet(), torch.randn(1, 3, 8, 8), seq_dim=7)
    m = from_torch(TinyNet(), torch.randn(1, 3, 8, 8))
    with pytest.raises(SpecError, match="no sequence dimension"):
        m.graph(seq_len=16)


def test_docs_example_output() -> None:
    """docs/import.md: the worked example runs and prints what the page shows."""
    import pathlib
    import re

    page = (pathlib.Path(__file__).parents[1] / "docs" / "import.md").read_text()
    code = re.search(r"```python\n(.*?)```", page, re.S).group(1)
    shown = re.search(r"```text\n(.*?)```", page, re.S).group(1)
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                       cwd=pathlib.Path(__file__).parent)
    assert r.returncode == 0, r.stderr
    for line in shown.strip().splitlines():
        assert line.rstrip() in r.stdout, line
