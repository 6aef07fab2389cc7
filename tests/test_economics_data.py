"""The sourced economics data: price coverage of the zoo, no-price records, grids."""

from __future__ import annotations

import pytest

import roofline as rl
from roofline.analysis import data as econ_data
from roofline.errors import SourceError, SpecError


def _doc(part: dict) -> dict:
    return {"sources": {"s": "a page"}, "parts": {"x": part}}


def _quote(provider: str, usd: float = 2.0) -> dict:
    return {"provider": provider, "date": "2026-01",
            "price": {"value": usd, "unit": "USD/h", "source": "s"}}


def test_every_zoo_part_has_a_price_record_or_says_why_not():
    records = econ_data._prices()
    for key in rl.list_hardware():
        assert key in records, (
            f"{key} has no record in data/economics/prices.toml: add [parts.{key}] with its "
            "on_demand quotes (two clouds or single_provider = why) and purchase, or no_rental / "
            "no_purchase saying why there is none")
        pp = econ_data.part_prices(key)
        assert pp.quotes or pp.no_rental, key
        assert pp.purchase_usd is not None or pp.no_purchase, key
        if pp.quotes:
            # two public clouds, or the reason there is only one (TPUs: Google only)
            assert len(pp.providers) >= 2 or pp.single_provider, key


def test_datacentre_gpus_are_quoted_by_at_least_two_clouds():
    for hw in ("H100", "h100-pcie", "H200", "B200", "MI300X", "a100-sxm4-80gb",
               "a100-sxm4-40gb", "a100-pcie-80gb", "L40S", "L4", "T4"):
        pp = rl.price_quotes(hw)
        assert len(pp.providers) >= 2, (hw, pp.providers)
        assert all(q.provenance.source for q in pp.quotes)


def test_a_single_cloud_quote_without_a_reason_is_refused():
    with pytest.raises(SourceError, match="single_provider"):
        econ_data.parse_prices(_doc({"on_demand": [_quote("P")], "no_purchase": "n"}), "t")
    ok = econ_data.parse_prices(_doc({"on_demand": [_quote("P")], "no_purchase": "n",
                                      "single_provider": "P only"}), "t")
    assert ok["x"].providers == ("P",)


def test_a_part_without_quotes_or_purchase_must_say_why():
    with pytest.raises(SourceError, match="no_rental"):
        econ_data.parse_prices(_doc({"no_purchase": "n"}), "t")
    with pytest.raises(SourceError, match="no_purchase"):
        econ_data.parse_prices(_doc({"no_rental": "edge part"}), "t")
    with pytest.raises(SpecError, match="one or the other"):
        econ_data.parse_prices(_doc({"on_demand": [_quote("P"), _quote("Q")],
                                     "no_rental": "x", "no_purchase": "n"}), "t")
    with pytest.raises(SpecError, match="sentence"):
        econ_data.parse_prices(_doc({"no_rental": "", "no_purchase": "n"}), "t")


def test_no_price_results_carry_the_data_files_reason():
    s = rl.serve("llama-3.2-1b", "jetson-orin-nano-8gb", batch=1, prompt_len=128,
                 output_len=16)
    assert s.cost_per_million_output_tokens is None
    assert "bought, not rented" in s.economics.price_source
    # the Jetson has a list price: rl.tco's capex uses it (249 $ per dev kit)
    t = rl.tco("jetson-orin-nano-8gb", devices=4, utilisation=0.5)
    assert t.capex_usd == pytest.approx(4 * 249)


def test_published_purchase_prices_come_through():
    assert rl.price_quotes("rtx-4090").purchase_usd == pytest.approx(1599)
    assert rl.price_quotes("rtx-5090").purchase_usd == pytest.approx(1999)
    # Gaudi 3: Intel's Computex 2024 kit list price 125,000 $ for 8 accelerators
    assert rl.price_quotes("gaudi3").purchase_usd == pytest.approx(125_000 / 8)
    assert rl.price_quotes("raspberry-pi-5").purchase_usd == pytest.approx(80)
    assert rl.price_quotes("dgx-spark").purchase_usd == pytest.approx(3999)  # launch price


def test_tpu_prices_per_chip():
    # Google Cloud list prices: v4 6,594.56 $/h for 2,048 chips; v6e-1 2.70 $/h; v5e 1.2, v5p 4.2
    assert rl.price_quotes("tpu-v4").usd_per_hour == pytest.approx(6594.56 / 2048, rel=1e-3)
    assert rl.price_quotes("tpu-v6e").usd_per_hour == pytest.approx(2.70)
    assert rl.price_quotes("tpu-v5e").usd_per_hour == pytest.approx(1.2)
    assert rl.price_quotes("tpu-v5p").providers == ("Google Cloud",)


def test_us_cloud_regions_use_their_own_grid_zone():
    # Electricity Maps 2023 zone averages (grids.toml): PJM 401, BPA 123, ERCOT 394 g/kWh
    assert rl.region("us-east-1").g_per_kwh == pytest.approx(401)
    assert rl.region("oregon").g_per_kwh == pytest.approx(123)
    assert rl.region("ercot").g_per_kwh == pytest.approx(394)
    assert rl.region("us-central1").g_per_kwh == pytest.approx(503)
    us = [r for r in econ_data.regions().values() if r.key.startswith("us-")]
    assert len(us) >= 6 and not any(r.assumed for r in us)
    assert all("Electricity Maps" in r.provenance["intensity"].source for r in us)
    # a serve in Oregon emits 123/401 of the same run in Virginia (same power model, same PUE)
    a = rl.serve("llama-3.1-8b", "H100", batch=8, region="us-east")
    b = rl.serve("llama-3.1-8b", "H100", batch=8, region="us-west")
    ratio = b.carbon_per_million_output_tokens / a.carbon_per_million_output_tokens
    assert ratio == pytest.approx(123 / 401)
