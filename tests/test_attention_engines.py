"""attention_kernel="auto" per serving engine (data/presets/attention.toml [engine.<name>];
engine/attention.py resolve_kernel / kernel_note): vLLM V0, llama.cpp and PyTorch eager run
FlashAttention-2-class kernels on Hopper, vLLM 0.7+ FlashAttention-3; other engines and
architectures take the architecture's default. serve states the kernel in its notes."""

from __future__ import annotations

import pytest

import roofline as rl
from roofline.engine import attention as ea
from roofline.errors import SpecError
from roofline.scenarios.serving.plan import _factor_table
from roofline.specs.resolve import hardware

KW = dict(prompt_len=8192, output_len=8)


def _ttft(engine: str, kernel: str = "auto", hw: str = "H100") -> float:
    return rl.serve("llama-3.1-8b", hw, engine=engine, attention_kernel=kernel, **KW).ttft


def test_every_engine_entry_is_a_serving_profile_and_a_priced_kernel() -> None:
    t = ea._tables()
    engines = _factor_table()
    assert t["engines"], "the table lists engine kernels"
    for (name, arch), (kernel, note) in t["engines"].items():
        assert name in engines, name
        assert kernel == "gemm" or (kernel, arch) in t["kernels"], (name, kernel)
        assert note, name


@pytest.mark.parametrize(("engine", "kernel"), [
    ("vllm-v0", "fa2"), ("vllm-v0-multistep", "fa2"), ("llamacpp", "fa2"), ("eager", "fa2"),
    ("vllm", "fa3"), ("vllm-v1", "fa3"), ("trtllm", "fa3")])
def test_auto_resolves_by_engine_on_hopper(engine: str, kernel: str) -> None:
    h100 = hardware("H100")
    assert ea.resolve_kernel(h100, "auto", engine) == kernel
    # the same TTFT as naming the kernel, and unlike the other Hopper kernel
    other = "fa3" if kernel == "fa2" else "fa2"
    auto = _ttft(engine)
    assert auto == _ttft(engine, kernel)
    assert auto != _ttft(engine, other)
    notes = rl.serve("llama-3.1-8b", "H100", engine=engine, **KW).notes
    att = [n for n in notes if n.startswith("attention priced as")]
    assert len(att) == 1 and att[0].startswith(f"attention priced as {kernel} ")
    # trtllm has no engine entry: the note gives the architecture's default as the reason
    assert ("the hopper default" in att[0]) == (engine == "trtllm")


def test_fa2_class_engines_are_slower_at_long_prompts() -> None:
    # FA2 0.376 of the peak against FA3 0.637 (forward): a long prompt's prefill is slower
    assert _ttft("vllm-v0") > _ttft("vllm-v0", "fa3")
    assert _ttft("llamacpp") > _ttft("llamacpp", "fa3")


def test_explicit_kernel_and_other_parts_are_untouched() -> None:
    a100 = hardware("A100")
    for e in ("vllm-v0", "llamacpp", "trtllm"):
        assert ea.resolve_kernel(a100, "auto", e) == "gemm"  # no Ampere table
        assert ea.kernel_note(a100, "auto", e) is None
        assert ea.resolve_kernel(hardware("H100"), "cudnn", e) == "cudnn"
    notes = rl.serve("llama-3.1-8b", "A100", engine="vllm-v0", **KW).notes
    assert not any(n.startswith("attention priced as") for n in notes)
    # explicit kernels carry no "auto" note; the pure roofline none either
    for kw in ({"attention_kernel": "fa3"}, {"preset": "bound"}):
        notes = rl.serve("llama-3.1-8b", "H100", engine="vllm-v0", **KW, **kw).notes
        assert not any(n.startswith("attention priced as") for n in notes), kw


def test_a_bad_engine_entry_is_refused() -> None:
    src = {"s": "a source"}
    kernels = {("fa2", "hopper"): {"fwd": 0.4, "bwd": 0.3}}
    doc = {"arch": {"hopper": {}}, "engine": {"x": {"hopper": {"kernel": "fa3", "source": "s"}}}}
    with pytest.raises(SpecError, match=r"no \[kernel.fa3.hopper\] table; allowed: gemm, fa2"):
        ea._engine_table(doc, src, kernels, "t")
    doc["engine"]["x"] = {"ampere": {"kernel": "fa2", "source": "s"}}
    with pytest.raises(SpecError, match="'ampere' is not an \\[arch\\]"):
        ea._engine_table(doc, src, kernels, "t")
    doc["engine"]["x"] = {"hopper": {"kernel": "fa2", "source": "nowhere"}}
    with pytest.raises(SpecError, match="needs a kernel and a source"):
        ea._engine_table(doc, src, kernels, "t")
    doc["engine"]["x"] = {"hopper": {"kernel": "fa2", "source": "s", "note": "n"}}
    assert ea._engine_table(doc, src, kernels, "t") == {("x", "hopper"): ("fa2", "n")}
