"""The seed tutorial reproduced (issue 2, item 5).

Expected values are the seed's published mlsysim 0.1.1 outputs (shared/seeds/004_*.txt:
"Hello, Roofline" study notes, sections 3.1-3.3 and the code appendix), asserted within 0.5 %
through the public API, then checked in the tutorial's printout and in its doc page.
"""

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

import roofline as rl
from roofline import tutorial

ROOT = Path(__file__).resolve().parents[1]
DOC = ROOT / "docs" / "tutorials" / "hello_roofline.md"
REL = 5e-3  # the tolerance: 0.5 %
BATCHES = [1, 2, 4, 8, 16, 32, 64, 128, 256]


def ms(name: str, hw: str = "A100", **kw):
    return rl.solve(name, hw, precision="fp16", preset="mlsysim", **kw)


# -- the seed's numbers through the public API -----------------------------------------------

def test_resnet50_a100_batch1():
    r = ms("resnet50", batch=1)
    assert r.bottleneck == "memory"
    assert r.latency == pytest.approx(0.5426e-3, rel=REL)
    assert r.throughput == pytest.approx(1843, rel=REL)
    assert r.arithmetic_intensity == pytest.approx(72.8, rel=REL)
    assert r.mfu == pytest.approx(0.0242, rel=REL)


def test_resnet50_a100_batch2_turns_compute_bound():
    r = ms("resnet50", batch=2)
    assert r.bottleneck == "compute"
    assert r.arithmetic_intensity == pytest.approx(133.5, rel=REL)
    assert r.throughput == pytest.approx(3524, rel=REL)


def test_resnet50_a100_batch256():
    r = ms("resnet50", batch=256)
    assert r.throughput == pytest.approx(35343, rel=REL)
    assert r.mfu == pytest.approx(0.464, rel=REL)


def test_resnet50_h100_batch1():
    r = ms("resnet50", "H100", batch=1)
    assert r.bottleneck == "memory"
    assert r.throughput == pytest.approx(1898, rel=REL)


def test_crossover_and_h100_over_a100_at_128():
    s = rl.sweep("resnet50", ["A100", "H100"], batch=BATCHES, precision="fp16",
                 preset="mlsysim")
    assert s.crossover() == {"NVIDIA A100 SXM4 80GB": 2, "NVIDIA H100 SXM5 80GB": 4}
    rows = {(r["hardware"], r["batch"]): r for r in s.to_dicts()}
    ratio = rows["NVIDIA H100 SXM5 80GB", 128]["throughput"] / \
        rows["NVIDIA A100 SXM4 80GB", 128]["throughput"]
    assert ratio == pytest.approx(2.47, rel=REL)


def test_llama_decode_a100():
    # the mlsysim preset prices its zoo aggregate (2 × params per token); context is ignored
    r = ms("llama-3.1-8b", batch=1, phase="decode", context=1)
    assert r.bottleneck == "memory"
    assert r.latency == pytest.approx(8.999e-3, rel=REL)
    assert r.t_memory == pytest.approx(8.664e-3, rel=REL)
    assert r.t_compute == pytest.approx(0.103e-3, rel=REL)
    assert r.throughput == pytest.approx(111.1, rel=REL)
    assert r.arithmetic_intensity == pytest.approx(0.909, rel=REL)
    r2 = ms("llama-3.1-8b", batch=1, phase="decode", context=4096)
    assert r2.latency == r.latency


# -- the printout ----------------------------------------------------------------------------

@pytest.fixture(scope="module")
def printout():
    import contextlib
    import io

    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        assert tutorial.main([]) == 0
    return buf.getvalue()


@pytest.mark.parametrize("line", [
    "latency     0.5426 ms",
    "throughput  1,843 img/s",
    "intensity   72.8 FLOP/B    MFU 2.42%",
    "throughput batch 1 -> 256: x19.2; compute-bound from batch 2",
    "crossover (rl.sweep(...).crossover()): A100 batch 2, H100 batch 4",
    "batch 1: H100 only x1.03 (1,898 vs 1,843 img/s, both memory-bound); batch 128: x2.47",
    "latency     8.9991 ms (t_memory 8.6641 ms, t_compute 0.1029 ms",
    "throughput  111.1 tok/s",
    "intensity   0.909 FLOP/B",
])
def test_printout_has_the_seed_numbers(printout, line):
    assert line in printout


def test_printout_sweep_table_rows(printout):
    # batch 2: compute-bound, AI 133.5, 3,524 img/s; batch 256: 35,343 img/s, MFU 46.44 %
    assert re.search(r"\n  2 +0\.5676 +3,524 +\+91% +compute +133\.5 +4\.63%", printout)
    assert re.search(r"\n  256 +7\.2432 +35,343 +\+7% +compute +770\.7 +46\.44%", printout)
    assert re.search(r"\n  1 +memory +memory +1,843 +1,898 +1\.03x", printout)


def test_printout_default_preset_part(printout):
    d = rl.solve("resnet50", "A100", batch=1, precision="fp16")
    assert str(d).splitlines()[1].strip() in printout  # "bottleneck overhead-bound" line
    assert f"ours:    '{d.bottleneck}'" in printout
    assert "lm_head" in printout and "KV cache" in printout


def test_example_script_runs():
    out = subprocess.run([sys.executable, str(ROOT / "examples" / "hello_roofline.py")],
                         capture_output=True, text=True, timeout=120, check=True).stdout
    assert "0.5426 ms" in out and "PART 3" in out


# -- the doc page ----------------------------------------------------------------------------

_BLOCK = re.compile(r"(<!-- tutorial-output -->\n```text\n)(.*?)(```)", re.DOTALL)


def test_doc_printout_matches_the_code(printout):
    text = DOC.read_text(encoding="utf-8")
    m = _BLOCK.search(text)
    assert m, "docs/tutorials/hello_roofline.md lost its <!-- tutorial-output --> block"
    if os.environ.get("ROOFLINE_UPDATE_DOCS"):
        DOC.write_text(text[:m.start(2)] + printout + text[m.end(2):], encoding="utf-8")
        return
    assert m.group(2) == printout, (
        "the tutorial's printout changed; review it and rerun with ROOFLINE_UPDATE_DOCS=1")


def _prose_numbers(text: str) -> list[str]:
    """Inline `code` spans in the prose that quote a number (not code like f(x) or a=b)."""
    prose = re.sub(r"```.*?```", "", text, flags=re.DOTALL)
    spans = [" ".join(s.split()) for s in re.findall(r"`([^`]+)`", prose)]
    return [s for s in spans if re.search(r"\d", s)
            and not re.match(r"^[\w.]+\(", s) and not re.search(r"\S=|=\S", s)]


def test_numbers_quoted_in_the_doc_are_printed(printout):
    flat = " ".join(printout.split())
    quoted = _prose_numbers(DOC.read_text(encoding="utf-8"))
    assert len(quoted) > 40  # the page explains with numbers
    missing = [q for q in quoted if q not in flat]
    assert not missing, f"numbers quoted in the doc but not printed: {missing}"
