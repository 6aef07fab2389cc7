"""AMD CDNA matmuls across shapes (docs/validation/gemm.md, "AMD CDNA"): the CDNA 3 / CDNA 4
tile sets of data/presets/tiles.toml fitted on AMD's ROCm/xla tables and the large-shape rows
(MAMF bf16, Azure fp8), each source held out in turn.

Tolerance, stated: the bf16 tables within 22 % median in sample and 30 % held out, the MI355X
fp8 table within 12 % (in sample only: one source), the MI300X fp8 table within 35 %; the
large-shape rows within 12 % in sample; with waves every table's median error below a fifth of
the smooth model's; the page's tables are what the code computes today.
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest

from roofline.engine.presets import efficiency_for
from roofline.engine.tiles import tiles_for, without_tiles
from roofline.specs.hardware import hardware
from roofline.validation import cdna as v
from roofline.validation import gemm as g

DOC = Path(__file__).parents[2] / "docs" / "validation" / "gemm.md"


def test_page_shows_what_the_code_computes(doc_block) -> None:
    assert doc_block(DOC, "cdna-summary") == v.cdna_summary_table()
    assert doc_block(DOC, "cdna-anchor") == v.cdna_anchor_table()
    assert doc_block(DOC, "cdna-fit") == v.cdna_fit_table()


def test_the_tables_as_read() -> None:
    """125 distinct b = 1 dots per part and dtype; the corrected gfx942 table (106eb9b595):
    one 256³ entry (the kept 7.48 TFLOP/s, not the dropped 4.58) and native fp8 rows."""
    cs = v.cdna_table_cases()
    by: dict[str, list] = {}
    for c in cs:
        by.setdefault(c.source, []).append(c)
    assert {s: len(x) for s, x in by.items()} == {
        "xla_gfx942": 125, "xla_gfx942_fp8": 125, "xla_gfx950": 125, "xla_gfx950_fp8": 125}
    for x in by.values():
        assert len({(c["m"], c["n"], c["k"]) for c in x}) == 125 and {c["b"] for c in x} == {1}
    rate = {(c.source, c["m"], c["n"], c["k"]): c.value_si for c in cs}
    assert rate[("xla_gfx942", 256, 256, 256)] == 7478143971473
    assert rate[("xla_gfx942_fp8", 4096, 4096, 4096)] == pytest.approx(1745.72e12, rel=1e-5)


def test_cdna_parts_have_their_own_sets() -> None:
    for key, arch, cus in (("mi300x", "cdna3", 304), ("mi325x", "cdna3", 304),
                           ("mi355x", "cdna4", 256)):
        t = tiles_for(hardware(key))
        assert t is not None and t.arch == arch and t.slots == cus
        assert t.for_dtype("fp8") is not None and t.for_dtype("int8") is None
        eff = efficiency_for(hardware(key), "default")
        assert eff.tiles == t and without_tiles(eff).tiles is None  # serve / train: smooth
    assert tiles_for(hardware("mi250x")) is None


def test_4096_cubed_on_mi355x_by_hand() -> None:
    """4096³ bf16 on 256 CUs with hipBLASLt's tiles: 256 x 256 tiles -> 16 x 16 = 256 tiles,
    one full wave, each tile at 0.975 / (1 + 64/256 + 64/256 + 1024/4096) of the 2516.6 TFLOP/s
    peak; + 4 µs fill. No other candidate is faster: 256 x 128 (the cuBLAS list's best) needs
    two waves at 1 + 0.25 + 0.5 + 0.25 = 2.0 per half-size tile (2.0 against 1.75 per 256²
    of output), 512 x 128 one wave at 1.875, 256 x 224 two waves (288 tiles); split-K only
    adds tiles; a full last wave leaves stream-K nothing to spread."""
    hw = hardware("mi355x")
    t = tiles_for(hw)
    assert t is not None and (t.max, t.a, t.c, t.fill) == pytest.approx((0.975, 64, 1024, 4e-6))
    assert (256, 256) in t.shapes and t.slots == 256
    flops = 2 * 4096 ** 3
    rate = 2516.6e12 * hw.sustained("bf16") * 0.975 / (1 + 64 / 256 + 64 / 256 + 1024 / 4096)
    hand = flops / (flops / rate + 4e-6)
    c = next(x for x in v.cdna_table_cases() if x.id == "MI355X bf16 4096x4096x4096")
    assert g.predict_gemm(c) == pytest.approx(hand, rel=1e-9)
    assert abs(hand / c.value_si - 1) < 0.10  # 1240 TFLOP/s measured


def test_4096_cubed_on_mi300x_fills_one_wave_with_a_224_wide_tile() -> None:
    """The mechanism of hipBLASLt's odd tiles (source hipblaslt_tiles): a 4096 x 4096 output in
    256 x 224 tiles is 16 x ceil(4096 / 224) = 16 x 19 = 304 tiles, exactly one wave on the
    MI300X's 304 CUs, where the cuBLAS list's 256 x 128 needs 512 tiles (two waves, the second
    68 % full)."""
    t = tiles_for(hardware("mi300x"))
    assert t is not None and (256, 224) in t.shapes and t.slots == 304
    assert math.ceil(4096 / 256) * math.ceil(4096 / 224) == 304
    assert math.ceil(4096 / 256) * math.ceil(4096 / 128) == 512
    assert all(min(s) >= 64 for s in t.shapes) and len(t.shapes) == 39


def test_cdna4_tiles_are_labelled_assumed() -> None:
    """The MI355X takes gfx942's hipBLASLt tile list: gfx950's own list was not read, so the
    set's shapes cite an 'assumed' source, not the gfx942 files (source hipblaslt_tiles)."""
    import tomllib

    data = tomllib.loads((Path(v.__file__).parents[1] / "data" / "presets" / "tiles.toml")
                         .read_text(encoding="utf-8"))
    cdna3, cdna4 = data["arch"]["cdna3"], data["arch"]["cdna4"]
    assert cdna4["shapes"] == cdna3["shapes"] and cdna3["shapes_source"] == "hipblaslt_tiles"
    text = data["sources"][cdna4["shapes_source"]]
    assert text.startswith("assumed:") and "gfx950" in text and "hipblaslt_tiles" in text


def test_hipblaslt_tile_source_says_which_files_were_read() -> None:
    """The 39 tiles come from 11 of the 18 gfx942 BBS logic files at the cited commit (the
    other seven were not in the stored copy): the source says so, not 'every solution'."""
    import tomllib

    data = tomllib.loads((Path(v.__file__).parents[1] / "data" / "presets" / "tiles.toml")
                         .read_text(encoding="utf-8"))
    text = data["sources"]["hipblaslt_tiles"]
    assert "11 of the 18" in text and "Not read" in text and "every solution" not in text
    assert "1 in 366 of the 490" in text


def test_a_fit_at_the_grid_edge_is_reported() -> None:
    """Without Azure the MI300X fp8 fit runs to max 1.0 and c 2048, the top of CDNA_GRID: the
    fit table says so next to the factors (it would have gone further)."""
    assert v.CDNA_GRID["max"][-1] == 1.0 and v.CDNA_GRID["c"][-1] == 2048.0
    azure = next(p for p in v.cdna_holdout("cdna3", "fp8").per_source if p.source == "azure")
    assert (azure.fitted_without.values["max"], azure.fitted_without.values["c"]) == (1.0, 2048.0)
    assert "at the grid's upper edge: max 1, c 2048" in azure.fitted_without.note
    assert "- fit without azure: b tied to a; at the grid's upper edge: max 1, c 2048" \
        in v.cdna_fit_table()
    assert v._edge_note({"max": 0.65, "a": 32.0, "c": 256.0, "fill": 5e-6}) == ""


def test_vectorised_grid_is_the_engine() -> None:
    cs = v.cdna_set_cases("cdna3", "bf16")
    groups = [[c for c in cs if c.source == s] for s in dict.fromkeys(c.source for c in cs)]
    loss = v._grid_loss(groups)
    for vals in ({"max": 1.0, "a": 64.0, "c": 512.0, "fill": 5e-6},
                 {"max": 0.6, "a": 16.0, "c": 128.0, "fill": 8e-6},
                 {"max": 0.45, "a": 0.0, "c": 2048.0, "fill": 2e-6}):
        i = tuple(int(np.argmin(np.abs(np.array(v.CDNA_GRID[p]) - vals[p]))) for p in v.PARAMS)
        assert loss[i] == pytest.approx(v._loss(vals, groups), rel=1e-9)
    e = v.cdna_log_errors(None, cs[:3] + cs[-2:])
    for c, x in zip(cs[:3] + cs[-2:], e, strict=True):
        assert x == pytest.approx(math.log(g.predict_gemm(c) / c.value_si), abs=1e-9)


def test_shipped_sets_are_the_fits() -> None:
    for key in v.CDNA_SETS:
        shipped = v._shipped(*key)
        fit, _ = v.cdna_in_sample(*key)
        assert fit.values == pytest.approx(shipped), key


def test_errors_within_stated_bounds() -> None:
    for key in (("cdna3", "bf16"), ("cdna4", "bf16"), ("cdna3", "fp8")):
        rep = v.cdna_holdout(*key)
        per = {p.source: p for p in rep.per_source}
        table = v.CDNA_SETS[key][0]
        bound = (0.22, 0.30) if key[1] == "bf16" else (0.35, 0.40)
        assert per[table].in_sample.median_abs <= bound[0], key
        assert per[table].held_out.median_abs <= bound[1], key
        big = next(s for s in per if s != table)
        assert abs(per[big].in_sample.worst) <= 0.12, key
        # the symptom that makes the large rows part of the fit: the table alone leaves them
        # 15-45 % off (MI355X bf16 too slow, MI300X fp8 up to 25 % too fast); CDNA 3 bf16's two
        # MAMF rows within 11 % since the MI325X's is priced at its measured clock (it was
        # -23.5 % at the MI300X's)
        # hipBLASLt's tiles (session 29) took Azure's fp8 rows held out from 14.9 to 31.1 %
        # median, +47 % at worst (made worse, stated on gemm.md)
        if key == ("cdna3", "bf16"):
            assert abs(per[big].held_out.worst) <= 0.11, key
        else:
            assert 0.15 <= abs(per[big].held_out.worst) <= 0.50, key
    # the row no fit saw (mamfv1 MI300X): the smooth model 10-20 % too slow (-16 % at 0.51, the
    # MI300X's clock; -8 % at 0.56 before the smooth model priced clocks: a held-out row made
    # worse, stated on vendors.md), the tile set 5-25 % too slow (stated on the page; 25 %
    # without the stream-K candidates)
    (j,) = v.cdna_judged_cases()
    assert -0.20 <= g.predict_gemm(j, smooth=True) / j.value_si - 1 <= -0.10
    assert -0.25 <= g.predict_gemm(j) / j.value_si - 1 <= -0.05
    assert not {c.id for c in v.cdna_anchor_cases()} & {j.id}
    _, ins = v.cdna_in_sample("cdna4", "fp8")
    assert ins.median_abs <= 0.12
    # with waves every table's median error is below a fifth of the smooth model's
    cs = v.cdna_table_cases()
    after, before = g.gemm_errors(cases=cs), g.gemm_errors(smooth=True, cases=cs)
    for s in {c.source for c in cs}:
        a = np.median([abs(e) for c, _, e in after if c.source == s])
        b = np.median([abs(e) for c, _, e in before if c.source == s])
        assert a < b / 5, s


def test_stream_k_ships_by_the_rule_not_on_noise() -> None:
    """The stream-K candidates (engine/tiles.py) ship per set as ``stream_k_choice`` decides:
    the library's documented default (gfx942 off, gfx950 on), the other choice only where it
    fits better in at least 95 % of the bootstrap resamples. CDNA 3 takes them (the other
    choice better in at least 95 % of resamples, bf16 and fp8); CDNA 4 keeps its default,
    where the two fits' losses differ by less than 1e-4 — margins the old rule ('on where the
    loss is lower') flipped on. (The figures themselves: gemm.md, generated.)"""
    shipped = {}
    for key in v.CDNA_SETS:
        ch = v.stream_k_choice(*key)
        assert ch.default == v.STREAM_K_DEFAULT[key[0]]
        assert ch.choice == (not ch.default if ch.other_better >= 0.95 else ch.default), key
        shipped[key] = v._shipped_stream_k(*key)
        assert shipped[key] == ch.choice, key
    assert shipped == {("cdna3", "bf16"): True, ("cdna3", "fp8"): True, ("cdna4", "bf16"): True,
                       ("cdna4", "fp8"): True}
    assert v.STREAM_K_DEFAULT == {"cdna3": False, "cdna4": True}
    # the CDNA 4 fits differ by less than 1e-4 in loss either way: noise, the default stays
    for dt in ("bf16", "fp8"):
        ch = v.stream_k_choice("cdna4", dt)
        (_, off), (_, on) = ch.fits
        assert abs(off - on) < 1e-4 and ch.other_better < 0.95, dt
    # CDNA 3: a clear margin, not a coin flip, for both dtypes
    for dt in ("bf16", "fp8"):
        assert v.stream_k_choice("cdna3", dt).other_better >= 0.95, dt


def test_stream_k_bootstrap_is_the_paired_loss_difference() -> None:
    """The bootstrap resamples the per-case difference whose full-sample sum over sources is
    the difference of the two fits' losses (each source's mean, as in ``_grid_loss``)."""
    cs = v.cdna_set_cases("cdna3", "fp8")
    ch = v.stream_k_choice("cdna3", "fp8")
    e = [np.array(v.cdna_log_errors({**vals, "stream_k": sk}, cs))
         for sk, (vals, _) in zip((False, True), ch.fits)]
    d = e[1] ** 2 - e[0] ** 2
    total = sum(d[[c.source == s for c in cs]].mean() for s in {c.source for c in cs})
    assert total == pytest.approx(ch.fits[1][1] - ch.fits[0][1], rel=1e-6, abs=1e-9)
