"""A narrow dtype's own candidate tiles (engine/tiles.py: ``[arch.<name>.<dtype>] shapes``):
a set that lists none takes its architecture's; one that lists its own keeps them through
``Tiles.for_dtype``; a list without a source, or malformed, is refused."""
from __future__ import annotations

from dataclasses import replace

import pytest

from roofline.engine.tiles import _own_shapes, _shape_list, tiles_for
from roofline.errors import SpecError
from roofline.specs.hardware import hardware

SRC = {"lib": "a test source"}


def test_a_narrow_set_without_shapes_takes_the_architectures() -> None:
    t = tiles_for(hardware("mi300x"))
    assert t is not None
    f = t.for_dtype("fp8")
    assert f is not None and f.shapes == t.shapes and f.slots == t.slots
    assert _own_shapes({"max": 1}, "t", SRC) is None


def test_a_narrow_set_keeps_its_own_shapes() -> None:
    t = tiles_for(hardware("mi300x"))
    assert t is not None
    own = ((256, 256), (128, 128))
    narrow = tuple((d, replace(x, shapes=own) if d == "fp8" else x) for d, x in t.narrow)
    t2 = replace(t, narrow=narrow)
    t2.check("test")
    f = t2.for_dtype("fp8")
    assert f is not None and f.shapes == own and t2.for_dtype("bf16") is t2
    assert _own_shapes({"shapes": [[256, 256], [128, 128]], "shapes_source": "lib"}, "t",
                       SRC) == own


def test_own_shapes_refusals() -> None:
    with pytest.raises(SpecError, match="shapes_source 'nope'"):
        _own_shapes({"shapes": [[64, 64]], "shapes_source": "nope"}, "t", SRC)
    with pytest.raises(SpecError, match=r"shapes=\[\]"):
        _own_shapes({"shapes": [], "shapes_source": "lib"}, "t", SRC)
    with pytest.raises(SpecError, match="rows, columns"):
        _own_shapes({"shapes": [[64, 64, 1]], "shapes_source": "lib"}, "t", SRC)


@pytest.mark.parametrize("raw", [[[64.5, 64]], [["64", 64]], [[True, 64]], [[0, 64]],
                                 [[64, -128]], None])
def test_shapes_are_integers_not_converted(raw: object) -> None:
    """A tile side that is not an integer >= 1 is refused, naming the list, not truncated by
    ``int`` (64.5 read as 64) nor left to a bare ValueError ('64' as text, a missing list):
    the architecture's list and a narrow set's own are read by one rule."""
    with pytest.raises(SpecError, match=r"shapes=.* integers >= 1"):
        _own_shapes({"shapes": raw, "shapes_source": "lib"}, "t", SRC)
    with pytest.raises(SpecError, match=r"\[arch\.x\]: shapes=.* integers >= 1"):
        _shape_list(raw, "[arch.x]")
