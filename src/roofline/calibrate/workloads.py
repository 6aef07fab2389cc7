"""The validation suite: real PyTorch workloads, each paired with the graph we predict it from.

Single ops are built with ``GraphBuilder`` from the same formulas the library uses everywhere;
whole models come from the zoo graphs (``resnet18``/``resnet50``, ``gpt2``) and are run as
small hand-written PyTorch modules that launch the same kernels in the same order (random
weights; eval-mode batch norm; eager mode). Nothing here is fitted: the shapes differ from the
ones ``measure`` fits its model on.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ..errors import SpecError
from ..graphs.graph import Graph, GraphBuilder
from ..specs.dtypes import precision as make_precision

__all__ = ["Item", "op_items", "model_items", "suite"]


@dataclass(frozen=True, slots=True, kw_only=True)
class Item:
    """One validation case: how to run it and how to predict it."""

    name: str
    group: str  #: "op" or "model"
    batch: int
    #: builds the tensors/modules and returns the zero-argument callable to time
    make: Callable[[Any], Callable[[], object]]
    #: the graph to price (ops); None for models (priced with solve)
    graph: Callable[[], Graph] | None = None
    solve_args: dict[str, Any] | None = None  #: rl.solve keyword arguments (models)
    dtype: str = "fp32"


def _one(kind: str, name: str, dtype: str = "fp32", **shape: Any) -> Callable[[], Graph]:
    def build() -> Graph:
        b = GraphBuilder(name, "forward", make_precision(dtype))
        b.add(kind, name, **shape)
        return b.build()
    return build


def _linear(m: int, n: int, k: int, dtype: str = "fp32") -> Item:
    def make(torch: Any) -> Callable[[], object]:
        dt = {"fp32": torch.float32, "bf16": torch.bfloat16}[dtype]
        x, w = torch.randn(m, k, dtype=dt), torch.randn(n, k, dtype=dt)
        return lambda: torch.nn.functional.linear(x, w)
    return Item(name=f"linear {dtype} M={m} N={n} K={k}", group="op", batch=1, make=make,
                graph=_one("linear", "linear", dtype, tokens=m, d_in=k, d_out=n), dtype=dtype)


def _conv(b: int, c: int, hw: int, co: int, k: int, s: int) -> Item:
    def make(torch: Any) -> Callable[[], object]:
        x, w = torch.randn(b, c, hw, hw), torch.randn(co, c, k, k)
        return lambda: torch.nn.functional.conv2d(x, w, stride=s, padding=k // 2)
    return Item(name=f"conv b{b} {c}x{hw}x{hw} -> {co} k{k} s{s}", group="op", batch=b,
                make=make, graph=_one("conv2d", "conv", c_in=c, h=hw, w=hw, c_out=co,
                                      kernel=k, stride=s, padding=k // 2))


def _ew(op: str, n: int) -> Item:
    def make(torch: Any) -> Callable[[], object]:
        F = torch.nn.functional
        x, y = torch.randn(n), torch.randn(n)
        fns: dict[str, Callable[[], object]] = {
            "relu": lambda: torch.relu(x), "add": lambda: x + y,
            "gelu_tanh": lambda: F.gelu(x, approximate="tanh"), "silu": lambda: F.silu(x),
            "mul": lambda: x * y}
        return fns[op]
    return Item(name=f"{op} {n * 4 / 2**20:g} MiB", group="op", batch=1, make=make,
                graph=_one("elementwise", op, elements=n, op=op))


def _layernorm(rows: int, d: int) -> Item:
    def make(torch: Any) -> Callable[[], object]:
        x, w, b = torch.randn(rows, d), torch.ones(d), torch.zeros(d)
        return lambda: torch.nn.functional.layer_norm(x, (d,), w, b)
    return Item(name=f"layernorm {rows}x{d}", group="op", batch=1, make=make,
                graph=_one("norm", "layernorm", elements=rows * d, features=d,
                           variant="layernorm"))


def _batchnorm(b: int, c: int, hw: int) -> Item:
    def make(torch: Any) -> Callable[[], object]:
        x = torch.randn(b, c, hw, hw)
        w, bb, rm, rv = torch.ones(c), torch.zeros(c), torch.zeros(c), torch.ones(c)
        return lambda: torch.nn.functional.batch_norm(x, rm, rv, w, bb, False)
    return Item(name=f"batchnorm b{b} {c}x{hw}x{hw}", group="op", batch=b, make=make,
                graph=_one("norm", "batchnorm", elements=c * hw * hw, features=c,
                           variant="batchnorm"))


def _softmax(rows: int, d: int) -> Item:
    def make(torch: Any) -> Callable[[], object]:
        x = torch.randn(rows, d)
        return lambda: torch.softmax(x, -1)
    return Item(name=f"softmax {rows}x{d}", group="op", batch=1, make=make,
                graph=_one("softmax", "softmax", elements=rows * d))


def _maxpool(b: int, c: int, hw: int) -> Item:
    def make(torch: Any) -> Callable[[], object]:
        x = torch.randn(b, c, hw, hw)
        return lambda: torch.nn.functional.max_pool2d(x, 3, 2, 1)
    return Item(name=f"maxpool b{b} {c}x{hw}x{hw}", group="op", batch=b, make=make,
                graph=_one("pool2d", "maxpool", channels=c, h=hw, w=hw, kernel=3, stride=2,
                           padding=1, mode="max"))


def _sdpa(b: int, heads: int, t: int, s: int, hd: int) -> Item:
    causal = t == s

    def make(torch: Any) -> Callable[[], object]:
        q = torch.randn(b, heads, t, hd)
        k, v = torch.randn(b, heads, s, hd), torch.randn(b, heads, s, hd)
        return lambda: torch.nn.functional.scaled_dot_product_attention(q, k, v,
                                                                        is_causal=causal)
    return Item(name=f"sdpa b{b} h{heads} T={t} S={s} d{hd}", group="op", batch=b, make=make,
                graph=_one("attention", "sdpa", n_heads=heads, n_kv_heads=heads, head_dim=hd,
                           q_len=t, kv_len=s, causal=True))


def op_items(quick: bool = False) -> list[Item]:
    """≥ 30 single ops: GEMMs square to matrix-vector, ResNet convs at batch 1 and 8,
    elementwise and norm/softmax in and out of cache, pooling, attention."""
    if quick:
        return [_linear(256, 256, 256), _linear(16, 512, 512), _conv(1, 32, 28, 32, 3, 1),
                _ew("relu", 2**16), _ew("add", 2**16), _softmax(64, 512),
                _layernorm(64, 512)]
    return [
        # GEMMs: square, MLP shapes at decreasing M, skinny, K-large, matrix-vector
        _linear(1536, 1536, 1536), _linear(512, 3072, 768), _linear(128, 768, 3072),
        _linear(32, 2304, 768), _linear(8, 768, 768), _linear(4096, 64, 1024),
        _linear(64, 64, 8192), _linear(256, 4096, 256), _linear(1, 50257, 768),
        _linear(1, 8192, 4096), _linear(1024, 1024, 1024, "bf16"),
        _linear(128, 3072, 768, "bf16"),
        # ResNet convolutions at batch 1 and 8
        _conv(1, 3, 224, 64, 7, 2), _conv(8, 3, 224, 64, 7, 2), _conv(1, 64, 56, 64, 3, 1),
        _conv(8, 64, 56, 64, 3, 1), _conv(1, 256, 56, 128, 1, 1), _conv(8, 128, 28, 128, 3, 1),
        _conv(1, 256, 14, 256, 3, 1), _conv(8, 256, 14, 256, 3, 1), _conv(1, 512, 7, 512, 3, 1),
        _conv(8, 512, 7, 512, 3, 1), _conv(1, 512, 28, 1024, 1, 2),
        # elementwise in L2, in LLC, in DRAM (fresh outputs >= 32 MiB)
        _ew("relu", 2**17), _ew("relu", 2**22), _ew("relu", 2**25), _ew("add", 2**16),
        _ew("add", 2**21), _ew("add", 2**24), _ew("gelu_tanh", 2**20), _ew("gelu_tanh", 2**23),
        _ew("mul", 2**19),
        # norms and softmax in and out of cache
        _layernorm(512, 768), _layernorm(8192, 768), _batchnorm(8, 64, 56),
        _batchnorm(1, 256, 14), _softmax(12 * 128, 128), _softmax(12 * 1024, 1024),
        _maxpool(1, 64, 112),
        # attention: prefill (causal) and decode (one query over a cache)
        _sdpa(1, 12, 512, 512, 64), _sdpa(8, 12, 1, 1024, 64),
    ]


# -- whole models -------------------------------------------------------------------------------

def _resnet_module(torch: Any, depth: int) -> Any:
    """ResNet-18/50 v1.5 in torchvision's layout (random weights, eval mode)."""
    nn = torch.nn
    bottleneck = depth == 50
    counts = {18: (2, 2, 2, 2), 50: (3, 4, 6, 3)}[depth]
    exp = 4 if bottleneck else 1

    class Block(nn.Module):  # type: ignore[name-defined,misc]
        def __init__(self, c_in: int, width: int, stride: int) -> None:
            super().__init__()
            out = width * exp
            if bottleneck:
                self.convs = nn.ModuleList([nn.Conv2d(c_in, width, 1, bias=False),
                                            nn.Conv2d(width, width, 3, stride, 1, bias=False),
                                            nn.Conv2d(width, out, 1, bias=False)])
            else:
                self.convs = nn.ModuleList([nn.Conv2d(c_in, width, 3, stride, 1, bias=False),
                                            nn.Conv2d(width, width, 3, 1, 1, bias=False)])
            self.bns = nn.ModuleList([nn.BatchNorm2d(c.out_channels) for c in self.convs])
            self.down = None
            if stride != 1 or c_in != out:
                self.down = nn.Sequential(nn.Conv2d(c_in, out, 1, stride, bias=False),
                                          nn.BatchNorm2d(out))
            self.relu = nn.ReLU(inplace=True)

        def forward(self, x: Any) -> Any:
            y = x
            for i, (conv, bn) in enumerate(zip(self.convs, self.bns)):
                y = bn(conv(y))
                if i < len(self.convs) - 1:
                    y = self.relu(y)
            idn = self.down(x) if self.down is not None else x
            return self.relu(y + idn)

    layers: list[Any] = [nn.Conv2d(3, 64, 7, 2, 3, bias=False), nn.BatchNorm2d(64),
                         nn.ReLU(inplace=True), nn.MaxPool2d(3, 2, 1)]
    c = 64
    for li, (width, n) in enumerate(zip((64, 128, 256, 512), counts)):
        for bi in range(n):
            layers.append(Block(c, width, 2 if (bi == 0 and li > 0) else 1))
            c = width * exp
    layers += [nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(c, 1000)]
    return nn.Sequential(*layers).eval()


def _gpt2_module(torch: Any, cfg: Any, cache_len: int) -> Any:
    """A GPT-2-style decoder stack (the zoo's gpt2 config) with a preallocated KV cache that
    launches the zoo graph's ops, op for op and nothing else that moves data: per layer
    input_norm, qkv_proj, kv_cache_write (K and V in one copy into a [2, B, heads, S, hd]
    cache), attention (fused SDPA reading the cache), o_proj, residual, post_attn_norm,
    up_proj, act (tanh-GELU), down_proj, residual. Head split/merge are strided views (SDPA
    takes strided inputs and returns a tensor whose head-merged view is contiguous), so no
    layout copy runs that the graph does not count."""
    nn = torch.nn
    F = nn.functional
    D, N, L, Fw, V = cfg.d_model, cfg.n_heads, cfg.n_layers, cfg.d_ff, cfg.vocab
    H = D // N

    class Block(nn.Module):  # type: ignore[name-defined,misc]
        def __init__(self) -> None:
            super().__init__()
            self.ln1, self.ln2 = nn.LayerNorm(D), nn.LayerNorm(D)
            self.qkv, self.proj = nn.Linear(D, 3 * D), nn.Linear(D, D)
            self.up, self.down = nn.Linear(D, Fw), nn.Linear(Fw, D)

        def forward(self, x: Any, kv: Any, pos: int) -> Any:
            B, T, _ = x.shape
            qkv = self.qkv(self.ln1(x)).view(B, T, 3, N, H)
            kv[:, :, :, pos:pos + T] = qkv[:, :, 1:].permute(2, 0, 3, 1, 4)  # one copy
            S = pos + T
            a = F.scaled_dot_product_attention(qkv[:, :, 0].transpose(1, 2), kv[0, :, :, :S],
                                               kv[1, :, :, :S], is_causal=(T > 1))
            x = x + self.proj(a.transpose(1, 2).view(B, T, D))
            return x + self.down(F.gelu(self.up(self.ln2(x)), approximate="tanh"))

    class GPT(nn.Module):  # type: ignore[name-defined,misc]
        def __init__(self) -> None:
            super().__init__()
            self.wte, self.wpe = nn.Embedding(V, D), nn.Embedding(cfg.max_positions, D)
            self.blocks = nn.ModuleList([Block() for _ in range(L)])
            self.ln_f = nn.LayerNorm(D)
            self.cache_len = cache_len

        def caches(self, B: int) -> list[Any]:
            return [torch.randn(2, B, N, self.cache_len, H) for _ in range(L)]

        def forward(self, idx: Any, caches: Any, pos: int) -> Any:
            T = idx.shape[1]
            x = self.wte(idx) + self.wpe.weight[pos:pos + T]
            for blk, kv in zip(self.blocks, caches):
                x = blk(x, kv, pos)
            return F.linear(self.ln_f(x[:, -1]), self.wte.weight)

    return GPT().eval()


def _resnet_item(depth: int, batch: int) -> Item:
    def make(torch: Any) -> Callable[[], object]:
        net = _resnet_module(torch, depth)
        x = torch.randn(batch, 3, 224, 224)
        return lambda: net(x)
    return Item(name=f"resnet{depth} b{batch}", group="model", batch=batch, make=make,
                solve_args=dict(model=f"resnet{depth}", batch=batch, precision="fp32"))


def _gpt2_item(phase: str, batch: int, tokens: int) -> Item:
    """prefill: ``tokens`` new tokens into an empty cache; decode: one token with ``tokens``
    in the cache (the new one included)."""
    def make(torch: Any) -> Callable[[], object]:
        from ..graphs.resolve import model as zoo_model

        cfg = zoo_model("gpt2").config
        if cfg is None:
            raise SpecError("the zoo's gpt2 entry has no transformer config")
        net = _gpt2_module(torch, cfg, cache_len=tokens)
        caches = net.caches(batch)
        if phase == "prefill":
            idx = torch.randint(0, cfg.vocab, (batch, tokens))
            return lambda: net(idx, caches, 0)
        idx = torch.randint(0, cfg.vocab, (batch, 1))
        return lambda: net(idx, caches, tokens - 1)
    args: dict[str, Any] = dict(model="gpt2", batch=batch, precision="fp32", phase=phase)
    args.update(seq_len=tokens) if phase == "prefill" else args.update(context=tokens)
    return Item(name=f"gpt2 {phase} b{batch} {'T' if phase == 'prefill' else 'S'}={tokens}",
                group="model", batch=batch, make=make, solve_args=args)


def model_items(quick: bool = False) -> list[Item]:
    """ResNet-18/50 at batch 1 and 8; a GPT-2-small stack at prefill and decode."""
    if quick:
        return [_resnet_item(18, 1)]
    return [_resnet_item(18, 1), _resnet_item(18, 8), _resnet_item(50, 1), _resnet_item(50, 8),
            _gpt2_item("prefill", 1, 128), _gpt2_item("decode", 1, 128),
            _gpt2_item("decode", 8, 128)]


def suite(quick: bool = False, models: bool = True) -> list[Item]:
    return op_items(quick) + (model_items(quick) if models else [])
