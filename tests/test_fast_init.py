"""roofline._frozen.fast_init: the same construction as the dataclass's own __init__, faster;
solve's lazy energy equals the eager power model and never goes stale."""

from __future__ import annotations

import copy
import dataclasses
import math
import pickle

import pytest

import roofline as rl
from roofline._frozen import LAZY, fast_init
from roofline.engine.core import Totals
from roofline.engine.result import Result
from roofline.engine.solve import _energy_j


def _pair():
    """The same class twice: plain dataclass init, and fast_init's."""

    def make():
        @dataclasses.dataclass(frozen=True, slots=True)
        class P:
            a: int
            b: float = 2.5
            c: list[int] = dataclasses.field(default_factory=list)
            d: str = dataclasses.field(default="x", kw_only=True)
            e: tuple[int, ...] = dataclasses.field(kw_only=True)

            def __post_init__(self) -> None:
                if self.a < 0:
                    raise ValueError("a < 0")
                object.__setattr__(self, "b", self.b * 2)  # post_init sees the finished object

        return P

    return make(), fast_init()(make())


@pytest.mark.parametrize("args,kw", [((1,), {"e": ()}), ((1, 3.0, [4]), {"d": "y", "e": (5,)}),
                                     ((7,), {"c": [1], "e": (1, 2)})])
def test_fast_init_builds_what_the_dataclass_init_builds(args, kw):
    plain, fast = _pair()
    p, f = plain(*args, **kw), fast(*args, **kw)
    assert type(f) is fast and dataclasses.astuple(f) == dataclasses.astuple(p)
    assert fast(1, e=()).c is not fast(1, e=()).c  # a fresh default per instance
    with pytest.raises(dataclasses.FrozenInstanceError):
        f.a = 3  # type: ignore[misc]
    assert dataclasses.replace(f, a=9).a == 9 and dataclasses.replace(f, a=9).b == f.b * 2


def test_fast_init_refuses_what_the_dataclass_init_refuses():
    plain, fast = _pair()
    for cls in (plain, fast):
        with pytest.raises(TypeError):
            cls(e=())  # missing a
        with pytest.raises(TypeError):
            cls(1, 2.0, [], 4, e=())  # d is keyword-only
        with pytest.raises(TypeError):
            cls(1, e=(), z=0)  # unknown
        with pytest.raises(ValueError, match="a < 0"):
            cls(-1, e=())
    with pytest.raises(TypeError, match="frozen slotted"):
        fast_init()(dataclasses.dataclass(type("Q", (), {"__annotations__": {"a": "int"}})))


def test_totals_and_result_keep_their_types_and_frozenness():
    t = Totals(*range(9))
    assert type(t) is Totals and t.flops == 5 and t.t_memory_bound_ops == 0 - 4 - 7
    r = rl.solve("resnet50", "A100")
    assert type(r) is Result
    with pytest.raises(dataclasses.FrozenInstanceError):
        r.latency = 1.0  # type: ignore[misc]
    with pytest.raises(AttributeError, match="no attribute 'nope'"):
        r.nope  # noqa: B018


def test_solve_energy_is_the_power_model_of_the_solve_inputs():
    m, hw = rl.model("resnet50"), rl.hardware("A100")
    for preset in ("default", "bound", "mlsysim"):
        r = rl.solve(m, hw, batch=8, preset=preset)
        # the same function, arguments and order as the eager term it replaced
        assert r.energy == _energy_j(hw, preset, r.latency, r.mfu, r.mbu)
        assert r.energy > 0 and r.to_dict()["energy"] == r.energy


def test_lazy_energy_never_goes_stale():
    m, hw = rl.model("resnet50"), rl.hardware("A100")
    r = rl.solve(m, hw, batch=4)
    # a copy made before the first read computes it from the solve's inputs, not its fields
    moved = dataclasses.replace(r, latency=r.latency * 10, mfu=0.9, mbu=0.9)
    assert moved.energy == r.energy
    assert dataclasses.replace(r, energy=1.5).energy == 1.5
    # client=True adds host and stack time to the latency; energy stays the device's
    c = rl.solve(m, hw, batch=4, client=True)
    assert c.latency > r.latency and c.energy == r.energy
    # pickling and copies carry the value
    r2 = rl.solve(m, hw, batch=4)
    assert copy.copy(r2).energy == r.energy
    assert pickle.loads(pickle.dumps(dataclasses.replace(r2, _op_table=None, _call=None,
                                                         _energy_of=None))).energy == r.energy


def test_lazy_without_its_source_is_an_error_not_a_number():
    r = dataclasses.replace(rl.solve("resnet50", "A100"), _energy_of=None)
    bare = Result(**{f.name: getattr(r, f.name) for f in dataclasses.fields(Result)
                     if f.name != "energy"}, energy=LAZY)
    with pytest.raises(RuntimeError, match="_energy_of"):
        bare.energy  # noqa: B018
    assert math.isnan(Result(**{f.name: getattr(r, f.name) for f in dataclasses.fields(Result)
                                if f.name != "energy"}).energy)  # default: NaN, as before


def test_fast_init_keeps_init_false_fields_and_refuses_initvars():
    @fast_init()
    @dataclasses.dataclass(frozen=True, slots=True)
    class S:
        a: int
        total: int = dataclasses.field(init=False, default=0)
        seen: list[int] = dataclasses.field(init=False, default_factory=list)

        def __post_init__(self) -> None:
            object.__setattr__(self, "total", self.a * 2)

    s = S(3)
    assert (s.a, s.total, s.seen) == (3, 6, []) and dataclasses.replace(s, a=4).total == 8
    with pytest.raises(TypeError):
        S(3, 1)  # total is not an argument
    with pytest.raises(TypeError, match="not the dataclass's own"):
        @fast_init()
        @dataclasses.dataclass(frozen=True, slots=True)
        class V:
            a: int
            k: dataclasses.InitVar[int] = 0



@fast_init(build_on_pickle=("_built",))
@dataclasses.dataclass(frozen=True, slots=True)
class _Pickled:  # module level: pickle finds classes by name
    a: int
    _built: object = None
    later: int = dataclasses.field(init=False)  # no default: the slot starts unset


def _forty_two() -> int:
    return 42


def test_pickle_state_builds_lazy_parts_and_keeps_unset_slots_unset():
    p = _Pickled(3, _built=lambda: _forty_two())  # a lambda: does not pickle by itself
    q = pickle.loads(pickle.dumps(p))
    assert q.a == 3 and q._built == 42  # the builder ran into the pickle
    with pytest.raises(AttributeError):
        q.later  # noqa: B018 - still unset, not a marker object


def test_build_on_pickle_names_a_field():
    cls = dataclasses.make_dataclass("Q", [("x", int)], frozen=True, slots=True)
    with pytest.raises(TypeError, match="non-field"):
        fast_init(build_on_pickle=("nope",))(cls)
