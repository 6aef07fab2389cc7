"""Diffusion denoisers, one network evaluation (one denoising step) per sample: DiT (Peebles &
Xie 2023) and Stable Diffusion 1.5's UNet (Rombach et al. 2022; diffusers
``UNet2DConditionModel``).

A sampler step with classifier-free guidance evaluates the network twice (conditional and
unconditional): price it at twice the batch. The VAE and the text encoder are separate
networks, not part of these graphs.
"""

from __future__ import annotations

from ..specs.dtypes import Precision
from .graph import Graph, GraphBuilder

__all__ = ["dit", "sd_unet"]


def _linear(b: GraphBuilder, name: str, tokens: int, d_in: int, d_out: int,
            bias: bool = True) -> None:
    b.add("linear", name, params=d_in * d_out + (d_out if bias else 0), tokens=tokens,
          d_in=d_in, d_out=d_out, bias=bias)


def _self_attention(b: GraphBuilder, p: str, T: int, D: int, heads: int, *, qkv_bias: bool,
                    fused_qkv: bool) -> None:
    """Multi-head self-attention over T tokens of width D: projections, fused non-causal
    attention, output projection (with bias)."""
    if fused_qkv:
        _linear(b, f"{p}.qkv", T, D, 3 * D, bias=qkv_bias)
    else:
        for nm in ("to_q", "to_k", "to_v"):
            _linear(b, f"{p}.{nm}", T, D, D, bias=qkv_bias)
    b.add("attention", f"{p}.attention", n_heads=heads, n_kv_heads=heads, head_dim=D // heads,
          q_len=T, kv_len=T, causal=False)
    _linear(b, f"{p}.proj" if fused_qkv else f"{p}.to_out.0", T, D, D)


# -- DiT (Peebles & Xie 2023; facebookresearch/DiT models.py) ----------------------------------

def dit(precision: Precision, *, depth: int = 28, hidden: int = 1152, heads: int = 16,
        patch: int = 2, image: int = 256, latent_channels: int = 4, classes: int = 1000,
        mlp_ratio: int = 4, learn_sigma: bool = True) -> Graph:
    """DiT (default: DiT-XL/2 at 256×256, a 32×32×4 latent): patchify conv, fixed sin-cos
    position embedding (a non-trained parameter, counted as DiT's code counts it), timestep MLP
    (256 frequencies -> D -> D) and class embedding (classes + 1 for the null label), ``depth``
    adaLN-Zero blocks, the final adaLN layer and linear to patch²·2·C (mean and variance)."""
    b = GraphBuilder(f"dit-{depth}x{hidden}-p{patch}", "forward", precision)
    b.meta["image_size"] = image
    lat = image // 8
    T, D = (lat // patch) ** 2, hidden
    out_c = latent_channels * (2 if learn_sigma else 1)
    b.add("conv2d", "x_embedder.proj", params=latent_channels * patch * patch * D + D,
          c_in=latent_channels, h=lat, w=lat, c_out=D, kernel=patch, stride=patch, padding=0,
          bias=True)
    b.add("elementwise", "pos_embed", params=T * D, elements=T * D, op="add", n_inputs=1)
    _linear(b, "t_embedder.mlp.0", 1, 256, D)
    b.add("elementwise", "t_embedder.mlp.1", elements=D, op="silu")
    _linear(b, "t_embedder.mlp.2", 1, D, D)
    b.add("embedding", "y_embedder.embedding_table", params=(classes + 1) * D, tokens=1, dim=D)
    b.add("elementwise", "c", elements=D, op="add")
    for i in range(depth):
        p = f"blocks.{i}"
        b.add("elementwise", f"{p}.adaLN_modulation.0", elements=D, op="silu")
        _linear(b, f"{p}.adaLN_modulation.1", 1, D, 6 * D)
        for half, sub in (("norm1", "attn"), ("norm2", "mlp")):
            b.add("norm", f"{p}.{half}", elements=T * D, features=D, variant="layernorm",
                  affine=False)
            # modulate: x·(1 + scale) + shift, the [D] vectors broadcast over tokens
            b.add("elementwise", f"{p}.{half}.modulate", elements=T * D, op="mul", n_inputs=1)
            b.add("elementwise", f"{p}.{half}.shift", elements=T * D, op="add", n_inputs=1)
            if sub == "attn":
                _self_attention(b, f"{p}.attn", T, D, heads, qkv_bias=True, fused_qkv=True)
            else:
                _linear(b, f"{p}.mlp.fc1", T, D, mlp_ratio * D)
                b.add("elementwise", f"{p}.mlp.act", elements=T * mlp_ratio * D,
                      op="gelu_tanh")
                _linear(b, f"{p}.mlp.fc2", T, mlp_ratio * D, D)
            b.add("elementwise", f"{p}.{sub}.gate", elements=T * D, op="mul", n_inputs=1)
            b.add("elementwise", f"{p}.{sub}.residual", elements=T * D, op="add")
    b.add("elementwise", "final_layer.adaLN_modulation.0", elements=D, op="silu")
    _linear(b, "final_layer.adaLN_modulation.1", 1, D, 2 * D)
    b.add("norm", "final_layer.norm_final", elements=T * D, features=D, variant="layernorm",
          affine=False)
    b.add("elementwise", "final_layer.modulate", elements=T * D, op="mul", n_inputs=1)
    _linear(b, "final_layer.linear", T, D, patch * patch * out_c)
    return b.build()


# -- Stable Diffusion 1.5 UNet (diffusers UNet2DConditionModel, the v1-5 config.json) ----------

class _U:
    """Shape tracker (C, H, W) over a GraphBuilder for the UNet's blocks."""

    def __init__(self, b: GraphBuilder, c: int, hw: int, temb: int, context: tuple[int, int],
                 head_dim_heads: int, groups: int) -> None:
        self.b, self.c, self.hw, self.temb = b, c, hw, temb
        self.ctx_len, self.ctx_dim = context
        self.heads, self.groups = head_dim_heads, groups

    @property
    def n(self) -> int:
        return self.c * self.hw * self.hw

    def conv(self, name: str, c_out: int, k: int, s: int = 1) -> None:
        self.b.add("conv2d", name, params=self.c * c_out * k * k + c_out, c_in=self.c,
                   h=self.hw, w=self.hw, c_out=c_out, kernel=k, stride=s, padding=k // 2,
                   bias=True)
        self.c, self.hw = c_out, (self.hw - 1) // s + 1 if s > 1 else self.hw

    def gn_silu(self, name: str, act: bool = True) -> None:
        self.b.add("norm", name, params=2 * self.c, elements=self.n, features=self.c,
                   variant="groupnorm")
        if act:
            self.b.add("elementwise", f"{name}.silu", elements=self.n, op="silu")

    def resnet(self, p: str, c_out: int) -> None:
        c_in = self.c
        self.gn_silu(f"{p}.norm1")
        self.conv(f"{p}.conv1", c_out, 3)
        _linear(self.b, f"{p}.time_emb_proj", 1, self.temb, c_out)
        self.b.add("elementwise", f"{p}.add_temb", elements=self.n, op="add", n_inputs=1)
        self.gn_silu(f"{p}.norm2")
        self.conv(f"{p}.conv2", c_out, 3)
        if c_in != c_out:
            self.b.add("conv2d", f"{p}.conv_shortcut", params=c_in * c_out + c_out, c_in=c_in,
                       h=self.hw, w=self.hw, c_out=c_out, kernel=1, bias=True)
        self.b.add("elementwise", f"{p}.residual", elements=self.n, op="add")

    def transformer(self, p: str) -> None:
        """Transformer2DModel: GroupNorm, 1×1 proj_in, one BasicTransformerBlock (self-attn,
        cross-attn to the text context, GEGLU feed-forward, LayerNorms before each), 1×1
        proj_out, residual."""
        b, C, T = self.b, self.c, self.hw * self.hw
        H = self.heads
        self.gn_silu(f"{p}.norm", act=False)
        b.add("conv2d", f"{p}.proj_in", params=C * C + C, c_in=C, h=self.hw, w=self.hw,
              c_out=C, kernel=1, bias=True)
        q = f"{p}.transformer_blocks.0"
        for ln in ("norm1", "attn1", "norm2", "attn2", "norm3", "ff"):
            if ln.startswith("norm"):
                b.add("norm", f"{q}.{ln}", params=2 * C, elements=T * C, features=C,
                      variant="layernorm")
            elif ln == "attn1":
                _self_attention(b, f"{q}.attn1", T, C, H, qkv_bias=False, fused_qkv=False)
            elif ln == "attn2":  # queries from the image, keys/values from the 77 text tokens
                S, E = self.ctx_len, self.ctx_dim
                _linear(b, f"{q}.attn2.to_q", T, C, C, bias=False)
                _linear(b, f"{q}.attn2.to_k", S, E, C, bias=False)
                _linear(b, f"{q}.attn2.to_v", S, E, C, bias=False)
                b.add("matmul", f"{q}.attn2.scores", groups=H, m=T, k=C // H, n=S)
                b.add("softmax", f"{q}.attn2.softmax", elements=H * T * S)
                b.add("matmul", f"{q}.attn2.context", groups=H, m=T, k=S, n=C // H)
                _linear(b, f"{q}.attn2.to_out.0", T, C, C)
            else:  # GEGLU: proj to 2·4C, gelu(a)·b, linear 4C -> C
                _linear(b, f"{q}.ff.net.0.proj", T, C, 8 * C)
                b.add("elementwise", f"{q}.ff.net.0.geglu", elements=T * 4 * C, op="geglu")
                _linear(b, f"{q}.ff.net.2", T, 4 * C, C)
            if not ln.startswith("norm"):
                b.add("elementwise", f"{q}.{ln}.residual", elements=T * C, op="add")
        b.add("conv2d", f"{p}.proj_out", params=C * C + C, c_in=C, h=self.hw, w=self.hw,
              c_out=C, kernel=1, bias=True)
        b.add("elementwise", f"{p}.residual", elements=self.n, op="add")

    def concat(self, name: str, c_skip: int) -> None:
        self.c += c_skip
        self.b.add("copy", name, elements=self.n)


def sd_unet(precision: Precision, *, image: int = 512, channels: tuple[int, ...] = (
        320, 640, 1280, 1280), layers: int = 2, context_len: int = 77,
        context_dim: int = 768, heads: int = 8, groups: int = 32) -> Graph:
    """Stable Diffusion 1.5's denoising UNet at ``image``×``image`` (a /8 latent, 4 channels):
    conv_in, four down blocks (the first three with a transformer after each resnet and a
    stride-2 conv), the mid block (resnet, transformer, resnet), four up blocks of
    ``layers + 1`` resnets on the concatenated skips (transformers in the last three,
    nearest ×2 upsample + conv in the first three), GroupNorm, SiLU, conv_out."""
    b = GraphBuilder("sd15-unet", "forward", precision)
    b.meta["image_size"] = image
    temb = 4 * channels[0]
    _linear(b, "time_embedding.linear_1", 1, channels[0], temb)
    b.add("elementwise", "time_embedding.act", elements=temb, op="silu")
    _linear(b, "time_embedding.linear_2", 1, temb, temb)
    u = _U(b, 4, image // 8, temb, (context_len, context_dim), heads, groups)
    u.conv("conv_in", channels[0], 3)
    skips = [u.c]
    n_blocks = len(channels)
    for i, c in enumerate(channels):
        attn = i < n_blocks - 1
        for j in range(layers):
            u.resnet(f"down_blocks.{i}.resnets.{j}", c)
            if attn:
                u.transformer(f"down_blocks.{i}.attentions.{j}")
            skips.append(u.c)
        if i < n_blocks - 1:
            u.conv(f"down_blocks.{i}.downsamplers.0.conv", c, 3, 2)
            skips.append(u.c)
    u.resnet("mid_block.resnets.0", channels[-1])
    u.transformer("mid_block.attentions.0")
    u.resnet("mid_block.resnets.1", channels[-1])
    for i, c in enumerate(reversed(channels)):
        attn = i > 0
        for j in range(layers + 1):
            u.concat(f"up_blocks.{i}.cat.{j}", skips.pop())
            u.resnet(f"up_blocks.{i}.resnets.{j}", c)
            if attn:
                u.transformer(f"up_blocks.{i}.attentions.{j}")
        if i < n_blocks - 1:
            u.hw *= 2
            b.add("copy", f"up_blocks.{i}.upsamplers.0.interpolate", elements=u.n)
            u.conv(f"up_blocks.{i}.upsamplers.0.conv", c, 3)
    assert not skips, skips
    u.gn_silu("conv_norm_out")
    u.conv("conv_out", 4, 3)
    return b.build()
