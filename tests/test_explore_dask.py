"""The Dask path: a 2-worker LocalCluster (processes) gives the local path's result bit for bit,
and a worker that dies mid-run has its task retried and the run completes."""

from __future__ import annotations

import os
import sys

import numpy as np
import pytest

import roofline as rl

distributed = pytest.importorskip("dask.distributed")


def die_once(chunk):
    """Chunk 1 kills its worker process the first time it runs (a marker file remembers)."""
    from roofline.spaces.evaluate import evaluate_chunk

    marker = os.environ.get("ROOFLINE_TEST_DIE_MARKER", "")
    if chunk.index == 1 and marker and not os.path.exists(marker):
        with open(marker, "w") as f:
            f.write("died")
        os._exit(1)
    return evaluate_chunk(chunk)


@pytest.fixture(scope="module")
def client(tmp_path_factory):
    import cloudpickle

    cloudpickle.register_pickle_by_value(sys.modules[__name__])
    marker = tmp_path_factory.mktemp("die") / "marker"
    os.environ["ROOFLINE_TEST_DIE_MARKER"] = str(marker)  # inherited by the worker processes
    cluster = distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                                       dashboard_address=None)
    c = distributed.Client(cluster)
    yield c
    c.close()
    cluster.close()
    os.environ.pop("ROOFLINE_TEST_DIE_MARKER", None)


def _space():
    return rl.Space(model=["llama-3.2-1b", "llama-3.1-8b"],
                    hardware=rl.hardware_grid(base="H100", peak_scale=[0.5, 1, 2],
                                              bandwidth_scale=[1, 2]),
                    scenario=dict(phase="decode", batch=range(1, 33), context=[2048, 8192],
                                  precision=["bf16", "fp8"], tp=[1, 2]), hw_per_chunk=2)


KW = dict(objectives=["tokens_per_s_per_device", "-power_w"],
          constraints=["tpot <= 0.020", "fits"], keep=True, top=["tpot"])


def _same(a, b):
    for k in a.columns:
        x, y = np.asarray(a[k]), np.asarray(b[k])
        nan_ok = x.dtype.kind == "f"  # NaN (no price, no TDP) equals NaN here
        assert np.array_equal(x, y, equal_nan=nan_ok), k


def test_dask_equals_local_bit_for_bit(client):
    local = rl.explore(_space(), **KW)
    dist = rl.explore(_space(), scheduler=client, **KW)
    assert dist.evaluated == local.evaluated == _space().size
    _same(local.pareto, dist.pareto)
    _same(local.top(10, by="-tpot"), dist.top(10, by="-tpot"))
    pd_l, pd_d = local.to_pandas(), dist.to_pandas()
    assert pd_l.equals(pd_d)  # DataFrame.equals treats NaNs in the same place as equal


def test_a_dying_worker_is_retried_and_the_run_completes(client):
    local = rl.explore(_space(), **KW)
    marker = os.environ["ROOFLINE_TEST_DIE_MARKER"]
    assert not os.path.exists(marker)
    dist = rl.explore(_space(), scheduler=client, _chunk_fn=die_once, **KW)
    assert os.path.exists(marker)  # a worker did die
    assert not dist.failed and dist.evaluated == local.evaluated
    _same(local.pareto, dist.pareto)
