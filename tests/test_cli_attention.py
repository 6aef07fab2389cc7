"""`--attention-kernel` on solve, serve and train (engine/attention.py)."""
import json

import pytest

import roofline as rl
from roofline.cli import main


def test_attention_kernel_on_the_command_line(capsys):
    def latency(*extra):
        assert main(["solve", "llama-3.1-8b", "h100", "--phase", "prefill", "--seq-len", "2048",
                     "--format", "json", *extra]) == 0
        return json.loads(capsys.readouterr().out)["latency"]

    api = rl.solve("llama-3.1-8b", "h100", phase="prefill", seq_len=2048,
                   attention_kernel="fa2").latency
    assert latency("--attention-kernel", "fa2") == pytest.approx(api, rel=1e-12)
    assert latency("--attention-kernel", "fa2") != latency()  # auto is FA3 on Hopper
    with pytest.raises(SystemExit):
        main(["solve", "llama-3.1-8b", "h100", "--attention-kernel", "flash9"])
    capsys.readouterr()
    assert main(["train", "llama-3.1-8b", "dgx-h100", "--global-batch", "64", "--seq-len",
                 "4096", "--attention-kernel", "fa2", "--search"]) != 0
    assert "best_parallelism prices the architecture's kernel" in capsys.readouterr().err
