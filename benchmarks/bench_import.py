"""Import speed: PyTorch modules traced on fake tensors, and ONNX files.

Targets (issue 3): importing a ResNet-50 module <= 2 s, a GPT-2 small <= 3 s on the 2-core dev
machine; (issue 16) a Llama-3.1-70B-shaped transformers module on the meta device <= 10 s
(80 identical decoder layers: the first traced, the others replayed; also timed with
``trace_repeats=False`` for comparison, no target). Timed from the call to ``rl.model(...)``
until the Model is returned (three traces:
batch b, 2b, 3b, and the affine fit), with ``import torch`` and building the module excluded
(the user already has both). The first import in a process pays torch's one-time dispatch
warm-up, so both the first (cold) and the median of 3 later imports are reported.

Run: python3 benchmarks/bench_import.py
"""

from __future__ import annotations

import io
import logging
import statistics
import sys
import tempfile
import time
import warnings
from contextlib import redirect_stdout
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parents[1] / "tests"))

import torch  # noqa: E402
from fixtures.torch_models import GPT2, ResNet50  # noqa: E402

import roofline as rl  # noqa: E402


def timed(fn) -> tuple[float, float]:
    t = time.perf_counter()
    fn()
    cold = time.perf_counter() - t
    warm = []
    for _ in range(3):
        t = time.perf_counter()
        fn()
        warm.append(time.perf_counter() - t)
    return cold, statistics.median(warm)


def _llama70b() -> list[tuple[str, float, tuple[float, float]]]:
    try:
        import transformers
    except ImportError:
        return []
    cfg = transformers.LlamaConfig(hidden_size=8192, intermediate_size=28672,
                                   num_hidden_layers=80, num_attention_heads=64,
                                   num_key_value_heads=8, vocab_size=128256,
                                   max_position_embeddings=131072)
    with torch.device("meta"):
        llama = transformers.AutoModelForCausalLM.from_config(cfg).eval()
    ids = torch.zeros(1, 128, dtype=torch.long)
    once = timed(lambda: rl.model(llama, example_inputs=(ids,), seq_dim=1))
    t = time.perf_counter()
    rl.model(llama, example_inputs=(ids,), seq_dim=1, trace_repeats=False)
    every = time.perf_counter() - t
    return [("Llama-3.1-70B-shaped HF module (T=128, meta, 80 layers)", 10.0, once),
            ("  the same, trace_repeats=False (every layer traced)", float("inf"),
             (every, every))]


def main() -> None:
    with torch.device("meta"):
        rn, gpt = ResNet50(), GPT2()
    img = torch.empty(1, 3, 224, 224, device="meta")
    ids = torch.zeros(1, 128, dtype=torch.long)
    rows = [("ResNet-50 module (224², meta)", 2.0,
             timed(lambda: rl.model(rn, example_inputs=(img,)))),
            ("GPT-2 small module (T=128, meta)", 3.0,
             timed(lambda: rl.model(gpt, example_inputs=(ids,), seq_dim=1)))]
    rows += _llama70b()
    from fixtures.onnx_export import export

    logging.disable(logging.WARNING)
    with tempfile.TemporaryDirectory() as d, warnings.catch_warnings(), \
            redirect_stdout(io.StringIO()):
        warnings.simplefilter("ignore")
        p_rn = export(rn.eval(), img, Path(d) / "rn.onnx")
        p_gpt = export(gpt.eval(), ids.to("meta"), Path(d) / "gpt.onnx", opset=23)
        onnx_rows = [("ResNet-50 ONNX file", 2.0, timed(lambda: rl.model(str(p_rn)))),
                     ("GPT-2 small ONNX file", 3.0, timed(lambda: rl.model(str(p_gpt))))]
    print("| import | target | first call | median of 3 | within target |")
    print("|---|---|---|---|---|")
    for name, target, (cold, warm) in rows + onnx_rows:
        tgt = f"≤ {target:.0f} s" if target != float("inf") else "—"
        ok = "—" if target == float("inf") else "yes" if max(cold, warm) <= target else "NO"
        print(f"| {name} | {tgt} | {cold:.2f} s | {warm:.2f} s | {ok} |")


if __name__ == "__main__":
    main()
