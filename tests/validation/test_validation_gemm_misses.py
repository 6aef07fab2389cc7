"""validation/gemm_misses.py: the monotone floor of a GEMM table and the A100 gap diagnostics."""

from __future__ import annotations

import numpy as np
import pytest

from roofline.validation import gemm_misses as v


def test_pava_by_hand() -> None:
    assert v.pava([1.0, 3.0, 2.0]).tolist() == [1.0, 2.5, 2.5]
    assert v.pava([3.0, 2.0, 1.0]).tolist() == [2.0, 2.0, 2.0]
    assert v.pava([1.0, 2.0, 2.0, 5.0]).tolist() == [1.0, 2.0, 2.0, 5.0]  # already monotone
    assert v.pava([4.0, 0.0, 5.0, 1.0]).tolist() == [2.0, 2.0, 3.0, 3.0]


def test_monotone_fit_on_two_by_two_by_hand() -> None:
    """y = [[0, 2], [1, 0]] (rows: axis 0). The corner y11 = 0 must be at least y01 = 2 and
    y10 = 1: the three pool at their mean (2 + 1 + 0) / 3 = 1, y00 = 0 stays: [[0, 1], [1, 1]],
    squared residuals 0 + 1 + 0 + 1 = 2. Checked against a brute force over a grid of
    monotone candidates."""
    y = np.array([[0.0, 2.0], [1.0, 0.0]])
    f = v.monotone_fit(y)
    assert f == pytest.approx(np.array([[0.0, 1.0], [1.0, 1.0]]), abs=1e-9)
    grid = np.linspace(-1, 3, 41)
    best = min(((a - 0) ** 2 + (b - 2) ** 2 + (c - 1) ** 2 + (d - 0) ** 2)
               for a in grid for b in grid for c in grid for d in grid
               if a <= b and c <= d and a <= c and b <= d)
    assert float(np.sum((f - y) ** 2)) == pytest.approx(best, abs=1e-9)


def test_monotone_input_is_its_own_fit() -> None:
    y = np.add.outer(np.add.outer(np.arange(3.0), np.arange(3.0)), np.arange(3.0) ** 2)
    assert v.monotone_fit(y) == pytest.approx(y)


def test_floor_is_below_every_monotone_model() -> None:
    """The shipped tile model is monotone on every table (more work never less time), so its
    RMS log error is at least the floor; on the MI300X fp8 table the floor itself is large."""
    rows = v._tables()
    assert {s for s, _, _ in rows} >= {"xla_h100", "xla_b200", "xla_b200_fp8", "xla_gfx942",
                                        "xla_gfx942_fp8", "xla_gfx950", "xla_gfx950_fp8",
                                        "tri3551", "tri6523", "tri7085"}
    got = {s: v.monotone_floor(s, lab, cs) for s, lab, cs in rows}
    for s, f in got.items():
        assert f.model_monotone, s
        assert f.model_rms >= f.floor_rms - 1e-12, s
    assert got["xla_gfx942_fp8"].floor_rms > 0.15  # the table itself is far from monotone
    assert got["xla_gfx942_fp8"].n == 125
    for s in ("xla_gfx942", "xla_gfx950", "xla_gfx950_fp8"):  # CDNA misses: not the tables
        assert got[s].floor_rms < got[s].model_rms / 2, s


def test_a100_gap_is_a_rate_not_a_per_call_cost() -> None:
    """tri6523's miss is better fitted by a rate factor than by a cost per call (the harness
    is tri3551's, whose own rate factor is within 5 % of 1)."""
    g = v.a100_gap("tri6523")
    assert g.n == 22
    assert g.rate_err[0] < g.per_call_err[0] and g.rate_err[1] < g.per_call_err[1]
    assert 0.6 <= g.rate <= 0.85
    assert g.shipped[0] > 0.25  # as shipped: 30 %
    h = v.a100_gap("tri3551")
    assert abs(h.rate - 1.0) <= 0.05
    # an unknown source is refused by name, with the known ones (RooflineError, not a bare
    # ValueError)
    from roofline.errors import RooflineError

    with pytest.raises(RooflineError, match="'nope'.*tri3551"):
        v.a100_gap("nope")


def test_tables_render_what_the_functions_compute() -> None:
    t = v.a100_gap_table()
    g = v.a100_gap("tri6523")
    assert f"| tri6523 | 22 | {g.shipped[0]:.1%} |" in t and f"| {g.rate:g} |" in t
    m = v.monotone_table()
    assert m.count("\n") == 1 + len(v._tables())


def test_a100_misses_follow_the_size() -> None:
    """Every A100 row falls in exactly one size class (by the cube root of m·n·k: 896³ is
    small, 1024³ and 3200³ mid, 4096³ and the thin 802816 x 192 x 768 large), and the
    pattern gemm.md states holds: on tri3551 the small sizes are too fast and the mid sizes
    too slow (medians of opposite signs), tri6523 too fast in both, Azure's large rows within
    5 % in the median."""
    from roofline.validation.gemm import a100_cases

    def case(m: int, n: int, k: int) -> dict[str, int]:
        return {"m": m, "n": n, "k": k, "b": 1}

    assert v.a100_size_class(case(896, 896, 896)).startswith("small")
    assert v.a100_size_class(case(1024, 1024, 1024)).startswith("mid")
    assert v.a100_size_class(case(3200, 3200, 3200)).startswith("mid")
    assert v.a100_size_class(case(802816, 192, 768)).startswith("large")
    g = v.a100_by_size()
    assert sum(len(e) for e in g.values()) == len(a100_cases())
    med = {k: float(np.median(e)) for k, e in g.items()}
    small, mid, large = (lab for lab, _ in v.A100_SIZES)
    assert med[("tri3551", small)] > 0 > med[("tri3551", mid)]
    assert med[("tri6523", small)] > 0 and med[("tri6523", mid)] > 0
    assert abs(med[("azure_a100", large)]) < 0.05
    t = v.a100_size_table()
    assert f"| tri3551 | {med[('tri3551', small)]:+.1%} (n 6) |" in t
    assert t.count("\n") == 1 + len({s for s, _ in g})


@pytest.mark.parametrize("bad", [{"m": 0}, {"n": -896}, {"k": float("nan")}, {"b": 0},
                                 {"m": float("inf")}])
def test_a100_size_class_refuses_a_shape_it_cannot_class(bad: dict[str, float]) -> None:
    """A zero, negative, NaN or infinite size is refused by name (it used to class m = 0 or
    b = 0 as 'small' and m = inf as 'large', and to escape a negative size as a TypeError from
    a complex cube root and a NaN one as a StopIteration)."""
    from roofline.errors import RooflineError

    shape = {"m": 896, "n": 896, "k": 896, "b": 1} | bad
    (name, value), = bad.items()
    with pytest.raises(RooflineError, match=f"{name}={value!r}"):
        v.a100_size_class(shape)  # type: ignore[arg-type]


def test_monotone_floor_refuses_an_empty_table_and_a_ragged_one() -> None:
    """No cases (it used to fail inside numpy: "Cannot apply_along_axis ...") and cases that are
    neither a full grid nor a chain of squares are refused by name."""
    from roofline.errors import RooflineError
    from roofline.validation.gemm import a100_cases

    with pytest.raises(RooflineError, match=r"cases=\[\]"):
        v.monotone_floor("x", "empty", [])
    square = next(c for c in a100_cases() if c["m"] == c["n"] == c["k"])
    thin = next(c for c in a100_cases() if c["m"] == 802816)
    with pytest.raises(RooflineError, match="neither a full"):
        v.monotone_floor("x", "ragged", [square, thin])
