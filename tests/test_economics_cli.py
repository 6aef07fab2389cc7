"""CLI: --price-per-hour / --region / --pue on solve, serve, train; the tco subcommand."""

from __future__ import annotations

import json

import pytest

from roofline.cli import main


def test_serve_prints_cost_energy_carbon_lines(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["serve", "llama-3.1-8b", "H100", "--batch", "8", "--price-per-hour", "2",
                 "--region", "france"]) == 0
    out = capsys.readouterr().out
    assert "$2/device-h × 1" in out and "kWh per 1M output tokens" in out and "France" in out


def test_solve_json_has_economics(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["solve", "resnet50", "A100", "--region", "quebec", "--pue", "1.3",
                 "--format", "json"]) == 0
    d = json.loads(capsys.readouterr().out)
    e = d["economics"]
    assert d["region"] == "quebec" and e["pue"] == 1.3
    # carbon per sample = energy per sample (J) × 20 g/kWh
    assert e["carbon_per_unit"] == pytest.approx(e["energy_per_unit"] * 20e-3 / 3.6e6)
    assert e["cost_per_unit"] is not None  # A100 SXM 80GB has a public quote


def test_bad_options_are_one_line_errors(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["serve", "llama-3.1-8b", "H100", "--price-per-hour", "-3"]) == 2
    assert "price_per_hour must be >= 0" in capsys.readouterr().err
    assert main(["solve", "resnet50", "A100", "--region", "narnia"]) == 2
    assert "Known regions" in capsys.readouterr().err


def test_tco_and_regions(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["tco", "H100", "--devices", "8", "--years", "1", "--utilisation", "0.5",
                 "--region", "us-east", "--format", "json"]) == 0
    d = json.loads(capsys.readouterr().out)
    assert d["capex_usd"] == pytest.approx(8 * 30000)
    # H100: measured idle 142.5 W + (700 − 142.5) × 0.5, 8 devices, a year, PUE 1.15, 8.92 ¢/kWh
    kwh = 8 * (142.5 + 557.5 * 0.5) * 365 * 24 * 1.15 / 1000
    assert d["energy_usd"] == pytest.approx(kwh * 0.0892)
    assert main(["tco", "--regions"]) == 0
    out = capsys.readouterr().out
    assert out.splitlines()[1].startswith("quebec")
    assert main(["tco", "H100", "--devices", "256", "--reliability", "720", "--place"]) == 0
    out = capsys.readouterr().out
    assert "job MTBF" in out and "regions by carbon" in out


def test_train_tokens_reports_cost_carbon_failures(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["train", "llama-3.1-8b", "dgx-h100", "--nodes", "2", "--global-batch", "64",
                 "--seq-len", "4096", "--tp", "2", "--tokens", "1e11", "--region", "germany",
                 "--format", "json"]) == 0
    d = json.loads(capsys.readouterr().out)
    assert d["cost_to_train_usd"] > 0 and d["carbon_to_train_kg"] > 0
    assert 0 < d["reliability"]["goodput"] < 1
