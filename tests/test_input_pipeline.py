"""train(data_loader=(loader, workers)): the host input pipeline as a ceiling on the step
(scenarios/training/input_pipeline.py, data/presets/input_pipeline.toml), by hand."""

from __future__ import annotations

import pytest

import roofline as rl
from roofline.errors import SpecError
from roofline.scenarios.training.input_pipeline import input_ceiling, loader_table

KW = dict(global_batch=2048, micro_batch=256, dp=8, precision="fp16", optimizer="momentum")


def test_loader_table_reads_the_sourced_rows_by_hand() -> None:
    t = loader_table()
    # pytorch-cls dataload_test.md, epoch-2 means of 200-image batches with 8 workers on 8 CPUs
    assert t["dali-cpu"][0] == pytest.approx(8 * 0.1550 / 200, rel=1e-3)  # 6.20 ms
    assert t["pytorch"][0] == pytest.approx(8 * 0.3141 / 200, rel=1e-3)  # 12.56 ms
    assert "DALI" in t["dali-cpu"][1]


def test_off_by_default_and_the_same_step_when_the_host_keeps_up() -> None:
    base = rl.train("resnet50", "dgx-a100", **KW)
    assert "input_wait" not in base.breakdown
    # 64 workers of 1,000 samples/s each feed 64,000 samples/s: far above the device
    fed = rl.train("resnet50", "dgx-a100", data_loader=(1000.0, 64), **KW)
    assert fed.step_time == base.step_time
    assert fed.breakdown["input_wait"] == 0.0 and not fed.warnings


def test_ceiling_by_hand() -> None:
    base = rl.train("resnet50", "dgx-a100", **KW)
    r = rl.train("resnet50", "dgx-a100", data_loader=("dali-cpu", 16), **KW)
    host = 256 * 0.00620 / 16  # 256 images per device, 6.20 ms of one worker each, 16 workers
    assert host > base.step_time  # the A100s alone would run faster than 16 workers feed them
    assert r.step_time == pytest.approx(host, rel=1e-9)
    assert r.breakdown["input_wait"] == pytest.approx(host - base.step_time, rel=1e-9)
    assert sum(r.breakdown.values()) == pytest.approx(r.step_time, rel=1e-9)
    assert r.samples_per_s == pytest.approx(8 * 16 / 0.00620, rel=1e-9)  # 20,645 img/s
    assert r.mfu == pytest.approx(base.mfu * base.step_time / host, rel=1e-9)
    assert any("host input pipeline" in w and "2,581 samples/s" in w for w in r.warnings)
    # a number is the user's measured samples/s of one worker: 100/s x 10 workers = 1,000/s
    u = rl.train("resnet50", "dgx-a100", data_loader=(100.0, 10), **KW)
    assert u.step_time == pytest.approx(256 / 1000.0, rel=1e-9)


def test_input_ceiling_function_by_hand() -> None:
    wait, note = input_ceiling((0.01, 4, "x"), 100, 0.2)  # host 100 x 0.01 / 4 = 0.25 s
    assert wait == pytest.approx(0.05) and "400 samples/s" in note and "500" in note
    assert input_ceiling((0.01, 4, "x"), 100, 0.3) == (0.0, "")


@pytest.mark.parametrize("bad", [("x", 16), ("dali-cpu", 0), ("dali-cpu", True), 16,
                                 "dali-cpu", (0.0, 4), (float("nan"), 4), ("dali-cpu", 16, 1),
                                 ("dali-cpu", 2.5)])
def test_bad_loaders_are_refused_by_name(bad: object) -> None:
    with pytest.raises(SpecError, match="data_loader"):
        rl.train("resnet50", "dgx-a100", data_loader=bad, **KW)


def test_decoders_refuse_it() -> None:
    with pytest.raises(SpecError, match="data_loader"):
        rl.train("llama-2-7b", "dgx-a100", global_batch=8, seq_len=2048,
                 data_loader=("dali-cpu", 4))


def test_cli_data_loader_is_the_api(capsys: pytest.CaptureFixture[str]) -> None:
    import json

    from roofline.cli import main

    args = ["train", "resnet50", "dgx-a100", "--global-batch", "2048", "--micro-batch", "256",
            "--dp", "8", "--precision", "fp16", "--optimizer", "momentum", "--format", "json"]
    assert main(args + ["--data-loader", "dali-cpu:16"]) == 0
    got = json.loads(capsys.readouterr().out)
    api = rl.train("resnet50", "dgx-a100", data_loader=("dali-cpu", 16), **KW)
    assert got["step_time"] == pytest.approx(api.step_time, rel=1e-12)
    assert got["breakdown"]["input_wait"] > 0
    assert main(args + ["--data-loader", "100:10"]) == 0  # a measured rate of one worker
    assert json.loads(capsys.readouterr().out)["step_time"] == pytest.approx(0.256, rel=1e-9)
    with pytest.raises(SystemExit):
        main(args + ["--data-loader", "dali-cpu"])  # no worker count
