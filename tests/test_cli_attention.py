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
    # --search prices the kernel asked for (it was refused while best_parallelism knew "auto"
    # only): the best row is the API's best_parallelism(attention_kernel="fa2") first row
    assert main(["train", "llama-3.1-8b", "dgx-h100", "--global-batch", "64", "--seq-len",
                 "4096", "--attention-kernel", "fa2", "--search", "--format", "json"]) == 0
    best = json.loads(capsys.readouterr().out)["rows"][0]
    api = rl.best_parallelism("llama-3.1-8b", "dgx-h100", global_batch=64, seq_len=4096,
                              attention_kernel="fa2", top=1).to_dicts()[0]
    assert best["step_time"] == pytest.approx(api["step_time"], rel=1e-9)
