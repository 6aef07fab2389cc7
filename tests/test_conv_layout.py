"""train(conv_layout="nchw"): each convolution's input and output transposed to and from the
tensor cores' NHWC layout (scenarios/training/generic._nchw_transposes), by hand."""

from __future__ import annotations

import numpy as np
import pytest

import roofline as rl
from roofline.errors import SpecError
from roofline.graphs.backward import backward_graph
from roofline.graphs.graph import Q
from roofline.graphs.resolve import model as resolve_model
from roofline.scenarios.training.generic import _nchw_transposes
from roofline.specs.dtypes import precision

KW = dict(global_batch=256, micro_batch=256, dp=1, optimizer="momentum")


def _fwd(prec: str = "fp16"):
    return resolve_model("resnet50").graph(precision=precision(prec), phase="forward", batch=1)


def test_two_copies_per_convolution_by_hand() -> None:
    g = _fwd()
    t = _nchw_transposes(g)
    n_conv = sum(c == "conv" for c in g.classes)
    assert n_conv == 53  # ResNet-50 v1.5: 1 stem + 16 blocks x 3 + 4 projection shortcuts
    assert len(t) == len(g) + 2 * n_conv
    i = t.names.index(g.names[[k for k, c in enumerate(g.classes) if c == "conv"][0]])
    before, conv, after = (t.c1[:, j] for j in (i - 1, i, i + 1))
    assert t.kinds[i - 1] == t.kinds[i + 1] == "copy"
    # the stem: [3, 224, 224] -> [64, 112, 112] at 2 bytes: 3 * 224 * 224 * 2 = 301,056 B read
    # and written by the copy before it, 64 * 112 * 112 * 2 = 1,605,632 B by the one after it
    assert before[Q["act_bytes_read"]] == before[Q["act_bytes_written"]] == 301_056
    assert after[Q["act_bytes_read"]] == after[Q["act_bytes_written"]] == 1_605_632
    assert before[Q["flops"]] == after[Q["flops"]] == 0.0
    # the convolutions themselves and every other op are unchanged; no FLOP is added
    own = [j for j, n in enumerate(t.names) if n in set(g.names)]
    np.testing.assert_array_equal(t.c1[:, own], g.c1)
    np.testing.assert_array_equal(t.gemm[:, own], g.gemm)
    assert t.c1[Q["flops"]].sum() == g.c1[Q["flops"]].sum()
    # forward and backward: each copy's inverse movement doubles the added bytes
    conv_ix = [k for k, c in enumerate(g.classes) if c == "conv"]
    moved = 2 * float(g.c1[Q["act_bytes_read"], conv_ix].sum()
                      + g.c1[Q["act_bytes_written"], conv_ix].sum())  # read + write each
    tg, tt = backward_graph(g), backward_graph(t)
    def total(x):
        return float(x.graph.c1[Q["act_bytes_read"]].sum()
                     + x.graph.c1[Q["act_bytes_written"]].sum())
    assert total(tt) - total(tg) == pytest.approx(2 * moved, rel=1e-12)
    assert tt.saved_c1 == pytest.approx(tg.saved_c1)  # a copy saves nothing for the backward


def test_fp32_cuda_core_convolutions_need_no_copies() -> None:
    g = _fwd("fp32")
    assert _nchw_transposes(g) is g
    assert len(_nchw_transposes(_fwd("tf32"))) == len(g) + 2 * 53  # TF32 runs on tensor cores


def test_nchw_is_slower_by_about_what_channels_last_is_published_to_save() -> None:
    """MosaicML Composer's "Channels Last" method card: NHWC "accelerates ResNet-50 on ImageNet
    by about 30% on NVIDIA V100 and A100" (a figure not used to build the copies)."""
    nhwc = rl.train("resnet50", "dgx-a100", precision="fp16", **KW)
    nchw = rl.train("resnet50", "dgx-a100", precision="fp16", conv_layout="nchw", **KW)
    assert rl.train("resnet50", "dgx-a100", precision="fp16", conv_layout="nhwc",
                    **KW).step_time == nhwc.step_time  # the default
    assert 1.2 < nchw.step_time / nhwc.step_time < 1.4
    assert nchw.model_flops_per_step == nhwc.model_flops_per_step


def test_refused_where_it_does_not_apply() -> None:
    with pytest.raises(SpecError, match="conv_layout='nchw'.*no convolutions"):
        rl.train("llama-2-7b", "dgx-a100", global_batch=8, seq_len=2048, conv_layout="nchw")
    with pytest.raises(ValueError, match="conv_layout"):
        rl.train("resnet50", "dgx-a100", conv_layout="NCHW", **KW)


def test_cli_conv_layout_is_the_api(capsys: pytest.CaptureFixture[str]) -> None:
    """``roofline train --conv-layout`` passes train(conv_layout=): the same step time as the
    library's for each layout, the default is nhwc, a wrong layout and --search are refused."""
    import json

    from roofline.cli import main

    args = ["train", "resnet50", "dgx-a100", "--global-batch", "256", "--micro-batch", "256",
            "--dp", "1", "--precision", "fp16", "--optimizer", "momentum", "--format", "json"]
    for layout in ("nchw", "nhwc", None):
        assert main(args + ([] if layout is None else ["--conv-layout", layout])) == 0
        got = json.loads(capsys.readouterr().out)["step_time"]
        api = rl.train("resnet50", "dgx-a100", precision="fp16",
                       conv_layout=layout or "nhwc", **KW).step_time
        assert got == pytest.approx(api, rel=1e-12), layout
    nchw = rl.train("resnet50", "dgx-a100", precision="fp16", conv_layout="nchw", **KW)
    assert nchw.step_time > rl.train("resnet50", "dgx-a100", precision="fp16", **KW).step_time
    with pytest.raises(SystemExit):
        main(args + ["--conv-layout", "NCHW"])  # argparse's choices
    capsys.readouterr()
    with pytest.raises(SystemExit, match="--conv-layout"):
        main(["train", "llama-2-7b", "dgx-a100", "--global-batch", "8", "--seq-len", "2048",
              "--search", "--conv-layout", "nchw"])


@pytest.mark.parametrize("cluster", ["tpu-v5p-pod", "amd-mi325x-8"])
def test_nchw_refused_where_the_cudnn_transposes_are_not_sourced(cluster: str) -> None:
    """The copies are cuDNN's (NVIDIA's tensor-core kernels work in NHWC); a TPU's compiler
    picks its own layouts and no source here says what MIOpen does with NCHW, so "nchw" is
    refused there rather than priced as on an NVIDIA GPU; "nhwc" still prices."""
    with pytest.raises(SpecError, match="conv_layout='nchw'.*NVIDIA"):
        rl.train("resnet50", cluster, precision="bf16", conv_layout="nchw", **KW)
    assert rl.train("resnet50", cluster, precision="bf16", **KW).step_time > 0


def test_the_result_shows_its_layout_and_whether_it_was_assumed() -> None:
    """str(r) and to_dict() carry the layout priced; the default (no conv_layout given) is
    nhwc, stated as assumed (PyTorch's own default memory format is NCHW); an asked-for layout
    is not; a model without convolutions (BERT, a decoder) has none."""
    kw = dict(precision="fp16", **KW)
    default = rl.train("resnet50", "dgx-a100", **kw)
    asked = rl.train("resnet50", "dgx-a100", conv_layout="nhwc", **kw)
    nchw = rl.train("resnet50", "dgx-a100", conv_layout="nchw", **kw)
    assert default.step_time == asked.step_time
    assert (default.conv_layout, default.conv_layout_assumed) == ("nhwc", True)
    assert "layout=nhwc (assumed: channels last; PyTorch's default is nchw)" in str(default)
    assert "layout=nhwc" in str(asked) and "assumed" not in str(asked)
    assert "layout=nchw" in str(nchw) and "assumed" not in str(nchw)
    assert {k: nchw.to_dict()[k] for k in ("conv_layout", "conv_layout_assumed")} == \
        {"conv_layout": "nchw", "conv_layout_assumed": False}
    assert default.to_dict()["conv_layout_assumed"] is True
    bert = rl.train("bert-large-uncased", "dgx-a100", precision="fp16", global_batch=256,
                    micro_batch=32, dp=8, seq_len=128)
    llama = rl.train("llama-2-7b", "dgx-a100", global_batch=8, seq_len=2048)
    for r in (bert, llama):
        assert (r.conv_layout, r.conv_layout_assumed) == (None, False)
        assert "layout=" not in str(r)
    # where the default does not change the price, it is shown but not flagged as assumed:
    # fp32 CUDA-core convolutions (NCHW as they are) and a TPU (only nhwc is priced)
    for r in (rl.train("resnet50", "dgx-a100", precision="fp32", **KW),
              rl.train("resnet50", "tpu-v5p-pod", precision="bf16", **KW)):
        assert (r.conv_layout, r.conv_layout_assumed) == ("nhwc", False)
        assert "layout=nhwc" in str(r) and "assumed" not in str(r)
