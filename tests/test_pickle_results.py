"""Results pickle (multiprocessing pools and Dask ship them between processes; users cache
them): every field survives, the lazily built parts are built into the pickle, and a call that
cannot be pickled (an imported module) is dropped with a clear error on the copy's levers()."""

import pickle

import pytest

import roofline as rl
from roofline.errors import SpecError
from roofline.graphs.resolve import model


def _round(x):
    return pickle.loads(pickle.dumps(x))


@pytest.mark.parametrize("key", ["resnet-50", "llama-3.1-8b", "mamba-2.8b"])
def test_zoo_models_pickle_and_build_the_same_graph(key):
    m = model(key)
    y = _round(m)
    g, h = m.graph(precision="fp16"), y.graph(precision="fp16")
    assert (y.key, y.params) == (m.key, m.params)
    assert h.names == g.names and h.kinds == g.kinds
    assert rl.solve(y, "A100", batch=4).latency == rl.solve(m, "A100", batch=4).latency


def test_solve_result_round_trips_with_its_call():
    r = rl.solve(model("resnet-50"), "A100", batch=8)
    y = _round(r)
    assert str(y) == str(r) and y.latency == r.latency and y.energy == r.energy
    assert list(y.ops) == list(r.ops)
    assert str(y._call) == str(r._call)
    assert y.levers().best.lever == r.levers().best.lever  # the copy can still re-run its call


def test_serve_result_pickles_with_its_phases_built():
    s = rl.serve("llama-3.1-8b", "H100", decode_hardware="A100", batch=4, prompt_len=512,
                 output_len=64)
    y = _round(s)
    assert (y.ttft, y.tpot, y.tokens_per_s) == (s.ttft, s.tpot, s.tokens_per_s)
    assert not callable(y._prefill) and not callable(y._decode)
    assert y.prefill.latency == s.prefill.latency and y.decode.latency == s.decode.latency
    assert y.decode.hardware == s.decode.hardware != y.prefill.hardware
    assert y._hw().key == s._hw().key
    assert str(y) == str(s)


def test_train_result_round_trips():
    t = rl.train(model("llama-3.1-8b"), "dgx-h100", global_batch=64, seq_len=2048)
    y = _round(t)
    assert str(y) == str(t) and y.step_time == t.step_time and y.mfu == t.mfu


def test_a_call_on_an_imported_module_is_dropped_not_fatal():
    torch = pytest.importorskip("torch")
    net = torch.nn.Sequential(torch.nn.Linear(64, 64), torch.nn.ReLU())
    r = rl.solve(rl.model(net, example_inputs=(torch.randn(1, 64),)), "A100", batch=8)
    y = _round(r)
    assert y.latency == r.latency and y._call is None and r._call is not None
    with pytest.raises(SpecError, match="no call to vary"):
        y.levers()
