"""One output style across the CLI: --format on every command, tables that fit 100 characters
and say what they leave out, one unit per column, percentages, decimal bytes, the default
16-bit precision, unknown names, and the two JSON/text slips of issue 15."""

import csv
import io
import json
import re

import pytest

import roofline as rl
from roofline.cli import build_parser, main
from roofline.units import column_unit, fmt_num


def run(capsys, *argv):
    rc = main(list(argv))
    out = capsys.readouterr()
    return rc, out.out, out.err


def _subcommands():
    p = build_parser()
    sub = next(a for a in p._actions if a.__class__.__name__ == "_SubParsersAction")
    return sub.choices


def test_every_command_takes_format_and_json_alias():
    for name, p in _subcommands().items():
        if name == "report":  # writes HTML by nature (-o FILE)
            continue
        opts = {s: a for a in p._actions for s in a.option_strings}
        assert "--format" in opts, name
        assert set(opts["--format"].choices) >= {"text", "json", "markdown", "csv", "html"}
        assert opts["--json"].const == "json" and opts["--json"].dest == "format", name


def test_solve_formats(capsys):
    r = rl.solve("resnet50", "A100", batch=2, precision="fp16")
    rc, out, _ = run(capsys, "solve", "resnet50", "A100", "--batch", "2", "--format", "csv")
    rows = list(csv.DictReader(io.StringIO(out)))
    assert rc == 0 and len(rows) == 1
    assert float(rows[0]["latency"]) == pytest.approx(r.latency, rel=1e-12)
    assert float(rows[0]["memory_breakdown.weights"]) == r.memory_breakdown["weights"]
    rc, out, _ = run(capsys, "solve", "resnet50", "A100", "--batch", "2", "--format",
                     "markdown", "--ops", "3")
    assert "| bottleneck | overhead-bound |" in out
    body = [ln for ln in out.splitlines() if ln.startswith("| ") and "µs" not in ln]
    assert sum(1 for ln in out.splitlines() if re.match(r"\| layer|\| conv|\| fc", ln)) == 3
    assert body
    rc, out, _ = run(capsys, "solve", "resnet50", "A100", "--format", "html")
    assert out.startswith("<!DOCTYPE html>") and "Per-operator table" in out
    rc, j, _ = run(capsys, "solve", "resnet50", "A100", "--json")
    assert json.loads(j)["precision"] == "fp16"


def test_sweep_markdown_csv_every_row(capsys):
    rc, out, _ = run(capsys, "sweep", "resnet50", "A100", "H100", "--batch", "1..64",
                     "--format", "markdown")
    lines = [ln for ln in out.splitlines() if ln.startswith("| ResNet-50")]
    assert rc == 0 and len(lines) == 14  # 2 devices x 7 batches, none hidden
    assert "mfu [%]" in out and "latency [" in out
    rc, out, _ = run(capsys, "sweep", "resnet50", "A100", "--batch", "1..8", "--csv")
    assert len(list(csv.DictReader(io.StringIO(out)))) == 4


def test_shortened_tables_say_what_they_hide(capsys):
    rc, out, _ = run(capsys, "sweep", "resnet50", "A100", "H100", "L4", "--batch", "1,2,3,4,5,6,"
                     "7,8,9,10,11,12,13,14,15,16,17,18,19,20,21,22,23,24,25")
    n = 3 * 25
    shown = sum(1 for ln in out.splitlines() if ln.startswith("NVIDIA "))
    m = re.search(r"… (\d+) of (\d+) rows not shown — --wide shows all …", out)
    assert m and int(m.group(2)) == n and int(m.group(1)) == n - shown
    assert "\n...\n" not in out and "  ...  " not in out  # no bare ellipsis row
    rc, out, _ = run(capsys, "sweep", "resnet50", "A100", "H100", "L4", "--wide", "--batch",
                     "1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16,17,18,19,20,21,22,23,24,25")
    assert sum(1 for ln in out.splitlines() if ln.startswith("NVIDIA ")) == n
    assert "arithmetic_intensity" in out and "not shown" not in out


@pytest.mark.parametrize("argv", [
    ("solve", "llama-3.1-8b", "A100", "--phase", "decode", "--context", "512", "--ops", "5"),
    ("sweep", "resnet50", "A100", "H100", "--precision", "fp16", "fp8", "--batch", "1..16"),
    ("serve", "llama-3.1-8b", "H100", "--ops"),
    ("train", "llama-3.1-8b", "dgx-h100", "--global-batch", "64", "--seq-len", "2048",
     "--search", "--top", "5"),
    ("zoo", "hardware"),
])
def test_tables_fit_100_columns(capsys, argv):
    rc, out, _ = run(capsys, *argv)
    assert rc == 0
    lines = out.splitlines()
    # every table line (header, rule, rows) and every note fits; the summary block of a
    # result is prose and may run longer
    start = next(i for i, ln in enumerate(lines) if ln.startswith("-") or "  --" in ln) - 1
    wide = [ln for ln in lines[start:] if len(ln) > 100]
    assert not wide, wide[:2]


def test_one_unit_per_column():
    r = rl.solve("llama-3.1-8b", "A100", phase="decode", context=512)
    text = r.ops.to_string(max_rows=None, width=None)
    head = text.splitlines()[1]
    assert "time [µs]" in head and "share [%]" in head and "flops [GFLOP]" in head
    assert not re.search(r"\de[+-]\d", text)  # no exponent anywhere
    # the share column is a percentage: the shown shares sum to 100 %
    t = r.ops
    col = head.index("share [%]")
    shown = [float(ln[col:col + 9].replace(",", "")) for ln in text.splitlines()[3:]]
    assert sum(shown) == pytest.approx(100.0, abs=0.01 * len(shown))
    assert abs(sum(t["share"]) - 1.0) < 1e-9
    assert column_unit(t["share"], "fraction") == (0.01, "%")
    # scales: 2.4 ms column -> ms; 123 GB -> GB
    assert column_unit([2.4e-3, 5e-6], "s") == (1e-3, "ms")
    assert column_unit([1.23e11], "B") == (1e9, "GB")
    # 1234.5 -> "1,234" (no decimals above 1,000), 0.0001234 -> positional, no exponent
    assert fmt_num(1234.5) == "1,234" and fmt_num(0.0001234) == "0.0001234"
    assert fmt_num(12.345) == "12.35" and fmt_num(float("nan")) == "-"


def test_mfu_is_percent_everywhere(capsys):
    s = rl.sweep("resnet50", "A100", batch=[8])
    text = str(s)
    assert "mfu [%]" in text
    assert f"{s['mfu'][0] * 100:.4g}" in text
    rc, out, _ = run(capsys, "solve", "resnet50", "A100")
    assert re.search(r"MFU \d+\.\d\d%", out)


def test_default_precision_is_the_parts_16_bit_dtype(capsys):
    rc, out, _ = run(capsys, "solve", "resnet50", "v5e")  # a TPU: bf16 only
    assert rc == 0 and ", bf16, forward" in out and "cannot run" not in out
    rc, out, _ = run(capsys, "solve", "resnet50", "A100")
    assert ", fp16, forward" in out  # unchanged where the part has fp16
    rc, out, _ = run(capsys, "sweep", "resnet50", "A100", "v5e", "--batch", "1")
    # the 16-bit dtype both parts have (A100: fp16 and bf16, v5e: bf16 only)
    assert rc == 0 and "sweep (bf16," in out
    rc, out, _ = run(capsys, "serve", "llama-3.1-8b", "H100")
    assert "bf16" in out.splitlines()[0]


def test_unknown_names_list_five_closest(capsys):
    rc, _, err = run(capsys, "solve", "resnt50", "A100")
    assert rc == 2
    names = re.findall(r"'([^']+)'", err.split("Did you mean", 1)[1])
    assert 1 <= len(names) <= 5 and names[0] == "resnet50"
    assert "vit-b-16" not in err and "llama" not in err  # not the whole zoo
    rc, _, err = run(capsys, "solve", "resnet50", "A1000")
    assert rc == 2 and "Did you mean" in err and err.count("'") <= 2 * 6


def test_serve_output_len_and_output_is_a_file(capsys, tmp_path):
    rc, out, _ = run(capsys, "serve", "llama-3.1-8b", "H100", "--output-len", "64")
    assert rc == 0 and "output 64" in out
    rc, _, err = run(capsys, "serve", "llama-3.1-8b", "H100", "--output", "64")
    assert rc == 2 and "--output-len 64" in err
    f = tmp_path / "s.json"
    rc, out, _ = run(capsys, "serve", "llama-3.1-8b", "H100", "--json", "-o", str(f))
    assert rc == 0 and out == "" and json.loads(f.read_text())["output_len"] == 128
    with pytest.raises(SystemExit):  # free text became a choice
        main(["serve", "llama-3.1-8b", "H100", "--preset", "bounds"])
    capsys.readouterr()


def test_serve_json_shares_are_shares(capsys):
    rc, out, _ = run(capsys, "serve", "llama-3.1-8b", "H100", "--batch", "8", "--json")
    d = json.loads(out)
    assert sum(d["shares"].values()) == pytest.approx(1.0, rel=1e-12)
    assert sum(d["phase_seconds"].values()) == pytest.approx(d["e2e_latency"], rel=1e-9)
    for k, v in d["shares"].items():
        assert v == pytest.approx(d["phase_seconds"][k] / d["e2e_latency"], rel=1e-9)


def test_train_that_does_not_run_prints_no_time(capsys):
    rc, out, _ = run(capsys, "train", "llama-3.1-70b", "dgx-a100", "--global-batch", "64",
                     "--seq-len", "4096", "--tokens", "1e12")
    assert rc == 1 and "does not run" in out
    assert "days" not in out and "device-hours" not in out and "MWh" not in out
    rc, out, _ = run(capsys, "train", "llama-3.1-70b", "dgx-a100", "--global-batch", "64",
                     "--seq-len", "4096", "--tokens", "1e12", "--json")
    assert "time_to_train_s" not in json.loads(out)


def test_one_byte_convention(capsys):
    rc, out, _ = run(capsys, "train", "llama-3.1-8b", "dgx-h100", "--global-batch", "64",
                     "--seq-len", "2048", "--tp", "8")
    assert "GiB" not in out and "of 85.9 GB" in out
    rc, out, _ = run(capsys, "zoo", "hardware")
    assert "GiB" not in out and "GB = 1e9 B" in out


def test_plot_takes_several_devices(capsys, tmp_path):
    pytest.importorskip("matplotlib")
    f = tmp_path / "c.png"
    rc, out, _ = run(capsys, "plot", "resnet50", "A100", "H100", "--batch", "1,8", "-o",
                     str(f), "--json")
    d = json.loads(out)
    assert rc == 0 and d["model_points"] == 4 and f.stat().st_size > 10_000


# -- every printout's lines fit 100 characters (issue 15) ---------------------------------------

_COMMANDS = [
    "solve resnet50 A100 --batch 8", "solve llama-3.1-8b H100 --batch 8 --ops",
    "sweep resnet50 A100 H100 --batch 1..64", "serve llama-3.1-70b H100 --tp 4 --batch 64 --ops",
    "serve llama-3.1-8b H100 --batch 8 --region austria", "serve llama-3.1-8b H100 --advise",
    "train llama-3.1-70b dgx-h100 --nodes 64 --global-batch 1024 --seq-len 8192 --tp 8 "
    "--tokens 1e12", "train llama-3.1-8b dgx-h100 --global-batch 64 --seq-len 4096 --search",
    "train llama-3.1-405b dgx-h100 --global-batch 64 --seq-len 4096",
    "requirements resnet50 --target-latency 0.001 --reference A100 --batch 8",
    "plan llama-3.1-8b H100 --devices 4 --rate 10 --requests 300 --tpot-p99 0.05 --ttft-p99 1",
    "simulate llama-3.1-8b H100 --rate 10 --requests 300 --tpot-p99 0.05",
    "tco H100 --devices 8 --years 3", "zoo", "advise resnet50 A100",
]


@pytest.mark.parametrize("cmd", _COMMANDS)
def test_every_text_line_fits_100_columns(capsys, cmd):
    import shlex

    from roofline.cli import main

    main(shlex.split(cmd))
    out = capsys.readouterr().out
    lines = out.splitlines()
    assert lines, cmd
    too_long = [ln for ln in lines if len(ln) > 100]
    assert not too_long, too_long[:3]


def test_python_printouts_fit_100_columns_and_wide_keeps_lines():
    from roofline._text import wrap_prose

    s = rl.serve("llama-3.1-70b", "H100", tp=4, batch=64)
    t = rl.train("llama-3.1-405b", "dgx-h100", global_batch=64, seq_len=4096)
    for obj in (rl.solve("llama-3.1-8b", "H100", batch=8), s, t):
        assert max(map(len, str(obj).splitlines())) <= 100, str(obj)
    # wrapping moves words, never drops one; a label's continuation starts under its value
    line = "  memory/device   " + ", ".join(f"part{i} {i}.5 GB" for i in range(12))
    w = wrap_prose(line)
    assert w.split() == line.split() and len(w.splitlines()) >= 2
    for cont in w.splitlines()[1:]:
        assert cont.startswith(" " * 18) and cont[18] != " " and len(cont) <= 100
    assert wrap_prose(line, None) == line


def test_wide_tables_are_not_wrapped(capsys):
    from roofline.cli import main

    main(["solve", "resnet50", "A100", "--ops", "--wide"])
    out = capsys.readouterr().out
    wide = [ln for ln in out.splitlines() if len(ln) > 100]
    # every column, as asked: the header, the rule and each of the 10 rows stay one line
    assert len(wide) == 12 and "top 10 of 174 operators" in out
