"""The command line: thin shells over the library, human output and --json/--csv data."""

import csv
import io
import json

import pytest

import roofline as rl
from roofline.cli import main
from roofline.cli.solve import parse_batches
from roofline.errors import SpecError


def run(capsys, *argv):
    rc = main(list(argv))
    out, err = capsys.readouterr()
    return rc, out, err


# -- batch parsing ---------------------------------------------------------------------------

def test_parse_batches_ranges_lists_and_singles():
    assert parse_batches("1..256") == [1, 2, 4, 8, 16, 32, 64, 128, 256]
    assert parse_batches("3..48") == [3, 6, 12, 24, 48]  # doubling from the first
    assert parse_batches("1,2,4") == [1, 2, 4]
    assert parse_batches("8") == [8]
    assert parse_batches("1..4,12,4") == [1, 2, 4, 12]  # duplicates dropped, order kept


@pytest.mark.parametrize("text, says", [("0", ">= 1"), ("0..4", ">= 1"), ("8..1", "backwards"),
                                        ("a", "not an integer"), (",", "names no batch")])
def test_parse_batches_rejects_bad_input(text, says):
    with pytest.raises(SpecError, match=says):
        parse_batches(text)


# -- zoo -------------------------------------------------------------------------------------

def test_zoo_lists_both_zoos(capsys):
    rc, out, _ = run(capsys, "zoo")
    assert rc == 0
    assert "a100-sxm4-80gb" in out and "NVIDIA A100 SXM4 80GB" in out
    assert "resnet50" in out and "25.6 M" in out  # 25,557,032 parameters
    assert f"hardware ({len(rl.list_hardware())})" in out
    assert f"models ({len(rl.list_models())})" in out


def test_zoo_hardware_json_has_the_fields(capsys):
    rc, out, _ = run(capsys, "zoo", "hardware", "--json")
    rows = json.loads(out)
    assert rc == 0 and len(rows) == len(rl.list_hardware())
    a100 = next(r for r in rows if r["key"] == "a100-sxm4-80gb")
    assert a100["memory_gb"] == pytest.approx(85.89934592)  # 80 GiB = 85,899,345,920 B / 1e9
    assert a100["memory_gb_per_s"] == pytest.approx(2039.0)
    assert a100["tdp_w"] == 400 and a100["kind"] == "gpu"
    assert "fp16" in a100["dtypes"] and "fp8" not in a100["dtypes"]


def test_zoo_models_json(capsys):
    _rc, out, _ = run(capsys, "zoo", "models", "--json")
    rows = {r["key"]: r for r in json.loads(out)}
    assert rows["resnet50"]["params"] == 25_557_032
    assert rows["resnet50"]["family"] == "cnn"
    assert set(rows) == set(rl.list_models())


# -- solve -----------------------------------------------------------------------------------

def test_solve_prints_the_result(capsys):
    rc, out, _ = run(capsys, "solve", "resnet50", "A100", "--batch", "1", "--precision", "fp16")
    r = rl.solve("resnet50", "A100", batch=1, precision="fp16")
    assert rc == 0
    assert out.strip() == str(r)


def test_solve_json_matches_the_library(capsys):
    rc, out, _ = run(capsys, "solve", "resnet50", "a100", "-b", "2", "--preset", "mlsysim",
                     "--json")
    d = json.loads(out)
    r = rl.solve("resnet50", "A100", batch=2, precision="fp16", preset="mlsysim")
    assert rc == 0
    for k in ("latency", "latency_bound", "t_compute", "t_memory", "t_overhead", "throughput",
              "flops", "bytes", "arithmetic_intensity", "ridge_point", "mfu",
              "memory_footprint", "energy"):
        assert d[k] == pytest.approx(getattr(r, k)), k
    assert d["bottleneck"] == "compute" and d["feasible"] is True and d["batch"] == 2
    assert "ops" not in d


def test_solve_ops_table_and_json_rows(capsys):
    rc, out, _ = run(capsys, "solve", "llama-3.1-8b", "A100", "--phase", "decode", "--ops", "3")
    assert rc == 0
    assert "top 3 of" in out and "lm_head" in out  # the largest single matmul in decode
    rc, out, _ = run(capsys, "solve", "llama-3.1-8b", "A100", "--phase", "decode", "--ops", "3",
                     "--json")
    d = json.loads(out)
    assert next(o["name"] for o in d["ops"]) == "lm_head"
    assert len(d["ops"]) == 3
    assert set(d["ops"][0]) >= {"name", "kind", "flops", "bytes", "intensity", "bound", "time"}
    times = [o["time"] for o in d["ops"]]
    assert times == sorted(times, reverse=True)


def test_solve_json_is_strict_json_without_nan(capsys):
    # a part without a TDP gives NaN energy; JSON has no NaN, so it must come out as null
    rc, out, _ = run(capsys, "solve", "resnet50", "tpu-v5e", "--precision", "bf16", "--json",
                     "--ops")
    assert rc == 0
    d = json.loads(out, parse_constant=lambda c: pytest.fail(f"non-strict JSON constant {c}"))
    assert d["energy"] is None


def test_solve_takes_a_config_json_path(capsys, tmp_path):
    cfg = {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 512,
           "intermediate_size": 1376, "num_attention_heads": 8, "num_key_value_heads": 4,
           "num_hidden_layers": 4, "vocab_size": 32000, "max_position_embeddings": 2048,
           "tie_word_embeddings": False}
    path = tmp_path / "tiny.json"
    path.write_text(json.dumps(cfg))
    rc, out, _ = run(capsys, "solve", str(path), "A100", "--phase", "decode", "--context",
                     "128", "--json")
    d = json.loads(out)
    r = rl.solve(str(path), "A100", phase="decode", context=128)
    assert rc == 0 and d["phase"] == "decode" and d["context"] == 128
    assert d["flops"] == pytest.approx(r.flops) and d["latency"] == pytest.approx(r.latency)


def test_solve_unknown_model_exits_2_naming_closest(capsys):
    rc, out, err = run(capsys, "solve", "resnet5", "A100")
    assert rc == 2 and out == ""
    assert "unknown model 'resnet5'" in err and "resnet50" in err
    assert "Traceback" not in err


def test_solve_unknown_hardware_exits_2(capsys):
    rc, _, err = run(capsys, "solve", "resnet50", "A1000")
    assert rc == 2 and "unknown hardware 'A1000'" in err and "Did you mean" in err


def test_solve_batch_zero_is_a_clear_error(capsys):
    rc, out, err = run(capsys, "solve", "resnet50", "A100", "--batch", "0")
    assert rc == 2 and out == ""
    assert err.strip() == "roofline: error: batch must be >= 1, got 0"


def test_solve_missing_dtype_is_an_infeasible_result_not_a_crash(capsys):
    rc, out, _ = run(capsys, "solve", "resnet50", "T4", "--precision", "bf16", "--json")
    d = json.loads(out)
    assert rc == 0 and d["feasible"] is False and "bf16" in d["reason"]


# -- sweep -----------------------------------------------------------------------------------

def test_sweep_table_and_crossover_line(capsys):
    rc, out, _ = run(capsys, "sweep", "resnet50", "A100", "H100", "--batch", "1..8",
                     "--preset", "mlsysim")
    assert rc == 0
    assert out.count("NVIDIA A100 SXM4 80GB") >= 4
    assert "compute-bound from batch — NVIDIA A100 SXM4 80GB: 2, NVIDIA H100 SXM5 80GB: 4" in out


def test_sweep_json(capsys):
    rc, out, _ = run(capsys, "sweep", "resnet50", "A100", "H100", "--batch", "1,2,4",
                     "--preset", "mlsysim", "--json")
    d = json.loads(out)
    assert rc == 0 and len(d["rows"]) == 6  # 2 hardware × 3 batches
    assert d["crossover"] == {"NVIDIA A100 SXM4 80GB": 2, "NVIDIA H100 SXM5 80GB": 4}
    s = rl.sweep("resnet50", ["A100", "H100"], batch=[1, 2, 4], preset="mlsysim")
    assert [r["throughput"] for r in d["rows"]] == pytest.approx(list(s["throughput"]))


def test_sweep_csv_parses(capsys):
    rc, out, _ = run(capsys, "sweep", "resnet50", "A100", "--batch", "1..4", "--precision",
                     "fp16", "bf16", "--csv")
    rows = list(csv.DictReader(io.StringIO(out)))
    assert rc == 0 and len(rows) == 6  # 2 precisions × 3 batches
    assert {r["precision"] for r in rows} == {"fp16", "bf16"}
    assert all(float(r["latency"]) > 0 for r in rows)


def test_sweep_bad_batch(capsys):
    rc, _, err = run(capsys, "sweep", "resnet50", "A100", "--batch", "0..4")
    assert rc == 2 and "batch must be >= 1" in err


# -- plot ------------------------------------------------------------------------------------

def test_plot_writes_png(capsys, tmp_path):
    pytest.importorskip("matplotlib")
    path = tmp_path / "chart.png"
    rc, out, _ = run(capsys, "plot", "resnet50", "A100", "--batch", "1", "-o", str(path))
    assert rc == 0 and path.stat().st_size > 10_000
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert "174 operator points" in out  # every ResNet-50 op has FLOPs and bytes


def test_plot_svg_batch_range_json(capsys, tmp_path):
    pytest.importorskip("matplotlib")
    path = tmp_path / "sweep.svg"
    rc, out, _ = run(capsys, "plot", "resnet50", "H100", "--batch", "1..16", "-o", str(path),
                     "--json")
    d = json.loads(out)
    assert rc == 0 and d["model_points"] == 5 and d["op_points"] == 0
    assert path.read_text()[:200].lstrip().startswith("<?xml")


def test_plot_rejects_unknown_suffix(capsys, tmp_path):
    rc, _, err = run(capsys, "plot", "resnet50", "A100", "-o", str(tmp_path / "c.gif"))
    assert rc == 2 and ".png" in err


# -- tutorial --------------------------------------------------------------------------------

def test_tutorial_json(capsys):
    rc, out, _ = run(capsys, "tutorial", "--json")
    d = json.loads(out)
    assert rc == 0 and d["mlsysim"]["crossover"] == {"A100": 2, "H100": 4}
    assert d["mlsysim"]["a100"][0]["throughput"] == pytest.approx(1843, rel=5e-3)


def test_help_lists_the_commands(capsys):
    with pytest.raises(SystemExit) as e:
        main(["--help"])
    out = capsys.readouterr().out
    assert e.value.code == 0
    for cmd in ("zoo", "solve", "sweep", "plot", "tutorial"):
        assert cmd in out


# -- ONNX files with symbolic dimensions: --dim / --seq-dim ---------------------------------------

def _onnx_attention(tmp_path):
    """x [batch, seq, 16] -> softmax(x xᵀ) x: one non-causal attention head over `seq`."""
    onnx = pytest.importorskip("onnx")
    from onnx import TensorProto, helper

    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", "seq", 16])
    nodes = [helper.make_node("Transpose", ["x"], ["xt"], perm=[0, 2, 1]),
             helper.make_node("MatMul", ["x", "xt"], ["s"]),
             helper.make_node("Softmax", ["s"], ["p"], axis=-1),
             helper.make_node("MatMul", ["p", "x"], ["o"])]
    g = helper.make_graph(nodes, "attn", [x],
                          [helper.make_tensor_value_info("o", TensorProto.FLOAT, None)])
    path = tmp_path / "attn.onnx"
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), str(path))
    return str(path)


def test_onnx_symbolic_dims_from_the_command_line(capsys, tmp_path):
    path = _onnx_attention(tmp_path)
    # unvalued: the error names the dimension and the option that sets it
    rc, _, err = run(capsys, "solve", path, "H100")
    assert rc == 2 and "'seq'" in err and "--dim seq=VALUE" in err and "--seq-dim" in err
    # --dim seq=8: 4·B·T·T·H = 4·2·8·8·16 = 8,192 FLOPs at batch 2
    rc, out, _ = run(capsys, "solve", path, "H100", "-b", "2", "--dim", "seq=8", "--json",
                     "--preset", "bound")
    assert rc == 0 and json.loads(out)["flops"] == 4 * 2 * 8 * 8 * 16
    # --seq-dim seq --seq-len 32: 4·1·32·32·16 = 65,536
    rc, out, _ = run(capsys, "solve", path, "H100", "--seq-dim", "seq", "--seq-len", "32",
                     "--json", "--preset", "bound")
    assert rc == 0 and json.loads(out)["flops"] == 4 * 32 * 32 * 16
    # sweep and plot take the same options
    rc, out, _ = run(capsys, "sweep", path, "H100", "-b", "1,4", "--dim", "seq=8", "--json")
    assert rc == 0 and len(json.loads(out)["rows"]) == 2
    rc, out, _ = run(capsys, "plot", path, "H100", "--dim", "seq=8", "-o",
                     str(tmp_path / "attn.svg"), "--json")
    assert rc == 0 and json.loads(out)["bytes"] > 0


@pytest.mark.parametrize("argv, says", [
    (["--dim", "seq"], "NAME=VALUE"),
    (["--dim", "seq=x"], "not an integer"),
    (["--dim", "seq=0"], ">= 1"),
    (["--dim", "sequence=8"], "'sequence', not a symbolic input dimension"),
    (["--seq-dim", "seq"], "needs --seq-len"),
])
def test_onnx_dim_options_reject_bad_input(capsys, tmp_path, argv, says):
    path = _onnx_attention(tmp_path)
    rc, _, err = run(capsys, "solve", path, "H100", *argv)
    assert rc == 2 and says in err


def test_dim_options_need_an_onnx_file(capsys):
    rc, _, err = run(capsys, "solve", "resnet50", "H100", "--dim", "seq=8")
    assert rc == 2 and ".onnx" in err


def test_serve_kv_window_option(capsys):
    # Gemma-2-9B at 8192 tokens: half its layers hold 4096 (ring) or 8192 (full) tokens
    args = ("serve", "gemma-2-9b", "H100", "--batch", "8", "--prompt", "7936", "--output-len",
            "256",
            "--json")
    rc, out, _ = run(capsys, *args)
    ring = json.loads(out)
    rc2, out2, _ = run(capsys, *args, "--kv-window", "full")
    full = json.loads(out2)
    assert rc == rc2 == 0 and ring["kv_window"] == "ring" and full["kv_window"] == "full"
    # (21 x 4096 + 21 x 8192) / (42 x 8192) = 0.75
    assert ring["kv_cache_bytes"] == pytest.approx(0.75 * full["kv_cache_bytes"])
    with pytest.raises(SystemExit):
        main(["serve", "gemma-2-9b", "H100", "--kv-window", "half"])
