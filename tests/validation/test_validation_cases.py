"""The one loader of validation data (roofline.validation.load_cases / parse_cases): every
packaged domain loads, and a case without its source, its table/page, a known unit or a
complete scenario is refused with a message naming the case and the key."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from roofline.errors import SourceError, SpecError, UnknownNameError
from roofline.validation import DOMAINS, load_cases, parse_cases

GOOD: dict[str, Any] = {
    "sources": {"paper": "A. Author, 'A paper', Table 2"},
    "defaults": {"cluster": "dgx-a100", "precision": "fp16", "zero": 0,
                 "fused_attention": False, "dropout": True, "dp_overlap": False,
                 "recompute": "full", "sequence_parallel": False, "vocab": 51200,
                 "seq_len": 2048},
    "case": [{"id": "run", "source": "paper", "where": "Table 2, row 1", "metric": "step_time",
              "measured": 1.5, "unit": "s", "heads": 8, "hidden": 1024, "layers": 4, "tp": 1,
              "pp": 1, "gpus": 8, "global_batch": 8, "recompute": "selective"}],
}


def _doc(**case_changes: Any) -> dict[str, Any]:
    d = copy.deepcopy(GOOD)
    for k, v in case_changes.items():
        if v is None:
            d["case"][0].pop(k)
        else:
            d["case"][0][k] = v
    return d


def test_every_packaged_domain_loads_with_sources() -> None:
    sizes = {d: len(load_cases(d).cases) for d in DOMAINS}
    assert sizes == {"inference": 35, "serving": 77, "serving_mix": 51, "training": 19,
                     "training_graphs": 14, "training_runs": 35, "llamacpp": 31, "llamacpp_pp": 21,
                     "collectives": 62, "edge": 4, "client": 48, "attention": 176,
                     "gemm": 456, "gemm_judged": 18, "cdna_gemm": 500, "vendors": 66,
                     "tpu_training": 7, "rocm_serving": 11, "cdna_tuned": 456, "vendor_training": 5}
    for d in DOMAINS:
        vs = load_cases(d)
        assert set(vs.by_source()) == {c.source for c in vs.cases} <= set(vs.sources)
        assert all(c.where and c.value_si > 0 for c in vs.cases)


def test_defaults_apply_and_a_case_value_wins() -> None:
    c = parse_cases(_doc(), "training").cases[0]
    assert c["cluster"] == "dgx-a100" and c["recompute"] == "selective"
    assert "micro_batch" not in c and c.get("micro_batch") is None
    with pytest.raises(TypeError):
        c.scenario["tp"] = 2  # type: ignore[index]  # read-only


def test_units_convert_to_si() -> None:
    c = parse_cases(_doc(metric="tflops_per_gpu", unit="TFLOP/s/GPU", measured=137),
                    "training").cases[0]
    assert c.value_si == 137e12  # 137 TFLOP/s = 1.37e14 FLOP/s


@pytest.mark.parametrize("change,err,words", [
    ({"source": None}, SourceError, "has no source"),
    ({"source": ""}, SourceError, "has no source"),
    ({"source": "papre"}, UnknownNameError, "'papre'"),
    ({"where": None}, SourceError, "no 'where'"),
    ({"unit": "ms"}, SpecError, "unit 'ms'"),
    ({"metric": "tokens"}, UnknownNameError, "metric"),
    ({"heads": None}, SpecError, "missing heads"),
    ({"tp": True}, SpecError, "tp = True"),
    ({"hidden": "1024"}, SpecError, "hidden = '1024'"),
    ({"measured": -1.0}, SpecError, "positive"),
    ({"measured": float("nan")}, SpecError, "positive"),
    ({"layer": 4}, SpecError, "unknown key 'layer'"),
    ({"known_outlier": True}, SpecError, "needs its reason"),
])
def test_a_bad_case_is_refused_naming_case_and_key(change: dict[str, Any], err: type,
                                                   words: str) -> None:
    with pytest.raises(err) as e:
        parse_cases(_doc(**change), "training", origin="t.toml")
    assert words in str(e.value)
    assert "run" in str(e.value) or "t.toml" in str(e.value)


def test_file_level_errors() -> None:
    d = _doc()
    d["case"].append(copy.deepcopy(d["case"][0]))
    with pytest.raises(SpecError, match="appears twice"):
        parse_cases(d, "training")
    with pytest.raises(SourceError, match="no \\[sources\\]"):
        parse_cases({**_doc(), "sources": {}}, "training")
    with pytest.raises(SourceError, match="describe its document"):
        parse_cases({**_doc(), "sources": {"paper": " "}}, "training")
    with pytest.raises(SpecError, match="unknown key 'gpu'"):
        parse_cases({**_doc(), "defaults": {"gpu": 1}}, "training")
    with pytest.raises(SpecError, match="no \\[\\[case\\]\\]"):
        parse_cases({**_doc(), "case": []}, "training")
    with pytest.raises(UnknownNameError, match="validation domain"):
        load_cases("servng")
