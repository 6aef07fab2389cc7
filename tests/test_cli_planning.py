"""roofline plan / roofline simulate on the command line."""

import json

from roofline.cli import main


def test_simulate_json(capsys):
    rc = main(["simulate", "llama-3.1-8b", "H100", "--rate", "2", "--prompt", "uniform:100,900",
               "--output-len", "64", "--requests", "300", "--ttft-p99", "1", "--json"])
    assert rc == 0
    d = json.loads(capsys.readouterr().out)
    assert d["requests"] == 300 and d["overloaded"] is False
    assert 0 < d["ttft"]["p50"] <= d["ttft"]["p99"]
    assert d["goodput_fraction"] == 1.0
    b = d["uncertainty"]["ttft_p99"]  # the serving-mix band (docs/validation/uncertainty.md)
    assert b["class"] == "serving-mix" and b["low"] < d["ttft"]["p99"] < b["high"]


def test_simulate_text_and_whole_prompts(capsys):
    rc = main(["simulate", "llama-3.1-8b", "H100", "--rate", "2", "--prompt",
               "lognormal:800,0.5,4000", "--output-len", "32", "--requests", "200", "--chunk",
               "none", "--kv-policy", "reserve"])
    assert rc == 0
    out = capsys.readouterr().out
    assert "TTFT" in out and "queue delay" in out


def test_plan_text(capsys):
    rc = main(["plan", "llama-3.1-8b", "H100", "--devices", "2", "--rate", "4", "--prompt",
               "512", "--output-len", "64", "--ttft-p99", "0.5", "--tpot-p99", "0.03",
               "--requests", "300", "--no-disagg", "--max-tp", "2"])
    out = capsys.readouterr().out
    assert rc == 0, out
    assert out.startswith("Serving plan: Llama 3.1 8B") and "best: aggregated" in out
    assert "80 %: p50" in out and "published cases" in out  # the best simulation's bands
    rc = main(["plan", "llama-3.1-8b", "H100", "--devices", "2", "--rate", "4", "--prompt",
               "512", "--output-len", "64", "--ttft-p99", "0.5", "--tpot-p99", "0.03",
               "--requests", "300", "--no-disagg", "--max-tp", "2", "--json"])
    best = json.loads(capsys.readouterr().out)["best"]["simulation"]
    assert rc == 0 and best["uncertainty"]["tpot_p50"]["class"] == "serving-mix"


def test_bad_input_is_one_line_naming_the_field(capsys):
    for argv, field in (
            (["simulate", "llama-3.1-8b", "H100", "--rate", "0"], "rate"),
            (["simulate", "llama-3.1-8b", "H100", "--rate", "1", "--prompt", "uniform:9,3"],
             "max"),
            (["simulate", "llama-3.1-8b", "H100", "--rate", "1", "--prompt", "gamma:3"],
             "--prompt"),
            (["simulate", "llama-3.1-8b", "H100", "--rate", "1", "--tp", "2", "--replicas", "2",
              "--devices", "2"], "devices"),
            (["plan", "llama-3.1-8b", "H100", "--devices", "2", "--rate", "1"], "SLO"),
            (["plan", "llama-3.1-8b", "H100", "--devices", "2", "--rate", "1",
              "--ttft-p99", "-1"], "ttft_p99")):
        assert main(argv) == 2, argv
        err = capsys.readouterr().err
        assert err.startswith("roofline: error:") and field in err, (argv, err)


def test_simulate_expert_parallel_and_weight_only(capsys):
    rc = main(["simulate", "mixtral-8x7b", "H100", "--rate", "2", "--prompt", "512",
               "--output-len", "32", "--requests", "100", "--ep", "4", "--precision", "fp8",
               "--kv-precision", "fp8", "--json"])
    assert rc == 0
    d = json.loads(capsys.readouterr().out)
    assert d["devices"] == 4 and "ep4" in d["layout"]
    rc = main(["simulate", "llama-3.1-8b", "H100", "--rate", "2", "--prompt", "512",
               "--output-len", "32", "--requests", "100", "--weight-precision", "int4",
               "--json"])
    assert rc == 0
    assert "wint4" in json.loads(capsys.readouterr().out)["layout"]


def test_engine_is_one_of_the_profiles(capsys):
    """plan / simulate --engine take serve's choices and refuse a typo first, listing them (it
    was refused only after the other checks, or named in an unrelated error)."""
    import pytest

    from roofline.scenarios.serving.plan import ENGINES

    for cmd in ("plan", "simulate"):
        with pytest.raises(SystemExit) as ex:
            # no SLO either: the engine is the first thing refused
            main([cmd, "llama-3.1-8b", "H100", "--rate", "1", "--engine", "trtlm"])
        assert ex.value.code == 2
        err = capsys.readouterr().err
        assert "argument --engine: invalid choice: 'trtlm'" in err, err
        assert all(e in err for e in ENGINES), err


def test_the_engine_choices_are_every_profile(capsys):
    """ENGINES (the CLI's --engine choices) lists every profile of serving.toml: llama.cpp's was
    missing, so `roofline serve --engine llamacpp` was refused though rl.serve takes it."""
    from roofline.scenarios.serving.plan import ENGINES, _factor_table

    assert sorted(ENGINES) == sorted(_factor_table())
    assert main(["serve", "llama-3.2-3b", "rtx4090", "--engine", "llamacpp", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["engine"] == "llamacpp"
