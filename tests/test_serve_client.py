"""rl.serve(client=True): a per-request floor and the request's text and token ids, checked
against a hand calculation from the factors of data/presets/client.toml (engine/client.py)."""

import json

import numpy as np
import pytest

import roofline as rl
from roofline.errors import RooflineError

FLOOR, STACK, HOST = 1.80e-3, 0.6116e9, 64e9  # client.toml floor and transport; H100 PCIe Gen5
TEXT, ID = 4.0, 4.0  # bytes per token of text and per token id


@pytest.fixture(scope="module")
def pair():
    kw = dict(batch=8, prompt_len=1024, output_len=128)
    return (rl.serve("llama-3.1-8b", "H100", **kw),
            rl.serve("llama-3.1-8b", "H100", client=True, **kw))


def test_client_terms_by_hand(pair):
    r, c = pair
    tin, tout = 8 * 1024, 8 * 128  # the batch's prompt and output tokens
    d_ttft = FLOOR + tin * TEXT / STACK + tin * ID / HOST  # 1.80 ms + 53.58 µs + 0.51 µs
    d_out = tout * TEXT / STACK + tout * ID / HOST  # 6.70 µs + 0.06 µs over 127 steps
    assert c.ttft - r.ttft == pytest.approx(d_ttft, rel=1e-9)
    assert c.tpot - r.tpot == pytest.approx(d_out / 127, rel=1e-6)
    assert c.client_time == pytest.approx(d_ttft + d_out, rel=1e-9)
    assert c.client_time == pytest.approx(1.8609e-3, rel=1e-4)
    assert c.e2e_latency == pytest.approx(c.ttft + 127 * c.tpot, rel=1e-12)
    assert c.tokens_per_s == pytest.approx(8 * 128 / c.e2e_latency)
    assert c.mfu == pytest.approx(r.mfu * r.e2e_latency / c.e2e_latency)
    # what does not change: memory, the decode-only MBU, the device-side steady state
    assert (c.mbu, c.steady_tpot, c.max_batch) == (r.mbu, r.steady_tpot, r.max_batch)


def test_the_result_states_it(pair):
    r, c = pair
    assert r.client_time == 0.0 and "client" not in r.phase_seconds
    assert c.phase_seconds["client"] == pytest.approx(c.client_time)
    assert sum(c.phase_seconds.values()) == pytest.approx(c.e2e_latency, rel=1e-12)
    assert sum(c.shares.values()) == pytest.approx(1.0)
    assert any("client=True" in n for n in c.notes)
    assert "client=True: +" in str(c) and "client=True" not in str(r)
    # the serving bands are device-side residuals: none on a client-side result
    assert r.uncertainty and c.uncertainty == {}
    assert c.to_dict()["client_time"] == pytest.approx(c.client_time)


def test_one_output_token_and_no_host_link():
    r = rl.serve("llama-3.1-8b", "H100", batch=2, prompt_len=100, output_len=1)
    c = rl.serve("llama-3.1-8b", "H100", batch=2, prompt_len=100, output_len=1, client=True)
    # no decode step: the output's bytes join the TTFT
    assert c.e2e_latency == c.ttft and c.tpot == r.tpot
    assert c.ttft - r.ttft == pytest.approx(FLOOR + 2 * 101 * (TEXT / STACK + ID / HOST))
    # unified memory (no [links.host]): no copies, the stack and the floor remain
    kw = dict(batch=1, prompt_len=100, output_len=2, precision="fp16")
    u = rl.serve("llama-3.1-8b", "m2-ultra", **kw)
    uc = rl.serve("llama-3.1-8b", "m2-ultra", client=True, **kw)
    assert u.feasible and u.e2e_latency > 0
    assert uc.client_time == pytest.approx(FLOOR + 102 * TEXT / STACK)
    assert uc.e2e_latency - u.e2e_latency == pytest.approx(uc.client_time)


def test_a_result_that_cannot_run_stays_as_it_is():
    r = rl.serve("llama-3.1-8b", "m2-ultra", client=True)  # no bf16 on the part
    assert not r.feasible and r.client_time == 0.0 and "bf16" in r.reason


def test_bad_client_argument_is_refused():
    with pytest.raises(RooflineError, match="client"):
        rl.serve("llama-3.1-8b", "H100", client="yes")


def test_cli_flag(capsys):
    from roofline.cli import main

    assert main(["serve", "llama-3.1-8b", "H100", "--batch", "8", "--prompt", "1024",
                 "--client", "--format", "json"]) == 0
    d = json.loads(capsys.readouterr().out)
    assert d["client_time"] == pytest.approx(1.8609e-3, rel=1e-4)
    assert d["phase_seconds"]["client"] == pytest.approx(d["client_time"])
    assert main(["solve", "resnet50", "A100", "--client", "--format", "json"]) == 0
    assert json.loads(capsys.readouterr().out)["client_time"] > 2e-3


def test_serve_sweep_client_adds_the_steps_tokens_out():
    """serve_sweep(client=True): each step + its B output tokens (ids over the host link, 4 B
    of text each through the stack), by hand from client.toml's factors; client=False
    unchanged; a part without a host link pays the text only."""
    from roofline.engine.client import client_factors
    from roofline.scenarios.serving import serve_sweep

    f = client_factors()
    Bs = [1, 8, 64]
    kw = dict(batch=Bs, context=[512], precision="fp16")
    a = serve_sweep("llama-3.1-8b", ["H100", "M2-Ultra"], **kw)
    b = serve_sweep("llama-3.1-8b", ["H100", "M2-Ultra"], client=True, **kw)
    h100 = rl.hardware("H100")
    for j, B in enumerate(Bs):
        want = B * f.token_id_bytes / h100.host_link.bytes_per_s + \
            B * f.text_bytes_per_token / f.transport_bytes_per_s
        assert b["tpot"][0, 0, j, 0] - a["tpot"][0, 0, j, 0] == pytest.approx(want, rel=1e-9)
        text = B * f.text_bytes_per_token / f.transport_bytes_per_s
        assert b["tpot"][1, 0, j, 0] - a["tpot"][1, 0, j, 0] == pytest.approx(text, rel=1e-9)
    np.testing.assert_allclose(b["tokens_per_s"], np.asarray(Bs)[None, None, :, None] /
                               b["tpot"], rtol=1e-12)
    with pytest.raises(rl.RooflineError, match="client"):
        serve_sweep("llama-3.1-8b", "H100", batch=[1], context=[512], client="yes")
