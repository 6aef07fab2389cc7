"""The event-driven scheduler (runs of decode steps summed in closed form, block growth from a
histogram) against a plain step-by-step one written independently here: one iteration per
loop pass, one Python record per running request, every step priced by ``StepCosts``'s own
methods. Same admissions, preemptions and times to 1e-9 on seeded runs."""

from __future__ import annotations

import math
from dataclasses import replace

import numpy as np
import pytest

import roofline as rl
from roofline.analysis.scheduler import run_replica
from roofline.analysis.stepcost import step_costs


def _blocks(tokens: int, bs: int) -> int:
    return -(-tokens // bs)


def step_by_step(arr, isl, osl, c, *, max_concurrency, budget, chunked, kv_policy="dynamic",
                 prefill=True):
    """The scheduler of ``run_replica``'s docstring, one engine iteration at a time. Multi-step
    (``c.host``'s scheduler_steps k > 1): the scheduler acts (retires, preempts, admits) only
    after every k decode-only steps counted from the last step with prompts, or earlier where
    the next step's new KV blocks do not fit; between, the decoding sequences step on, those
    past their last token included."""
    n, bs, total = len(arr), c.block_size, c.total_blocks
    pfirst = c.prefill_first and not chunked  # vLLM V0: a step with prompts runs them alone
    ms = max(1, int(getattr(c.host, "scheduler_steps", 1) or 1))
    since, sched = 0, True  # decode-only steps since the last step with prompts; act now
    dynamic = kv_policy == "dynamic"
    wm = max(1, total // 100) if dynamic else 0
    admit, first, done = [math.nan] * n, [math.nan] * n, [math.nan] * n
    gen = [0] * n  # tokens generated before the current admission
    run = []  # running requests in admission order: dicts
    wait: list[int] = []
    nxt, now, used, left, preempt, iters, area = 0, 0.0, 0, n, 0, 0, 0.0

    def blocks_of(r):
        return _blocks(r["x"], bs) if dynamic and r["dec"] else r["held"]

    while left:
        while nxt < n and arr[nxt] <= now:
            wait.append(nxt)
            nxt += 1
        if not run and not wait:
            now = arr[nxt]
            continue
        decs = [r for r in run if r["dec"]]
        # a decoding sequence whose KV fills its last block needs a new one for this token
        grow = sum(1 for r in decs if r["x"] % bs == 0) if dynamic else 0
        while dynamic and decs and used + grow > total and run:
            v = run.pop()  # the newest request is preempted and recomputed later
            used -= blocks_of(v)
            if v["dec"]:
                gen[v["i"]] = v["g"]
            preempt += 1
            wait.insert(0, v["i"])
            decs = [r for r in run if r["dec"]]
            grow = sum(1 for r in decs if r["x"] % bs == 0)
        b = len(decs)
        tok = budget - b if chunked else budget
        chunks = []  # (record, tokens, cached)
        for r in run:
            if r["dec"] or tok <= 0 or not sched:
                continue
            rem = r["plen"] - r["done"]
            T = min(rem, tok) if chunked else rem
            if not chunked and T > tok and chunks:
                break
            chunks.append((r, T, r["done"]))
            tok -= T
        while sched and wait and len(run) < max_concurrency and (tok > 0 or not prefill):
            i = wait[0]
            if prefill:
                plen = isl[i] + gen[i]
            else:
                plen = isl[i] + max(gen[i], 1) - 1
            need = _blocks(plen, bs) if dynamic else _blocks(isl[i] + osl[i] - 1, bs)
            if need > total - wm:
                wait.pop(0)
                admit[i] = first[i] = done[i] = math.inf
                left -= 1
                continue
            # a decode pool's request joins this step: its first token may need a block (not
            # one with a one-token output: it finishes at admission)
            first_blk = 1 if not prefill and dynamic and plen % bs == 0 and osl[i] > 1 else 0
            if used + need + first_blk + grow + (wm if run else 0) > total:
                break
            if prefill and not chunked and plen > tok and chunks:
                break
            wait.pop(0)
            used += need
            grow += first_blk
            if math.isnan(admit[i]):
                admit[i] = now
            r = {"i": i, "held": need, "plen": plen, "done": 0, "dec": False, "x": 0, "g": 0}
            if not prefill:
                if osl[i] <= 1:
                    done[i] = now
                    used -= need
                    left -= 1
                    continue
                r.update(dec=True, x=plen, g=max(gen[i], 1))
                run.append(r)
                continue
            run.append(r)
            T = min(plen, tok) if chunked else plen
            chunks.append((r, T, 0))
            tok -= T
        if not prefill:  # a decode pool's admissions decode in this very step
            decs = [r for r in run if r["dec"]]
            b = len(decs)
            grow = sum(1 for r in decs if r["x"] % bs == 0) if dynamic else 0
        if not chunks and not decs:
            if not left:  # the last requests finished at admission or were rejected
                break
            now = max(now, arr[nxt])
            continue
        if chunks and pfirst:  # the prompts alone: the decoding sequences wait a step
            decs, b, grow = [], 0, 0
        ctx = sum(r["x"] for r in decs) + b  # attention contexts incl. the token written
        if chunks:
            dt = c.step_time(b, ctx, [(T, cp) for _, T, cp in chunks])
        else:
            dt = c.decode_time(b, ctx)
        iters += 1
        area += (len(wait) + len(run)) * dt
        now += dt
        while nxt < n and arr[nxt] <= now:
            area += now - arr[nxt]
            wait.append(nxt)
            nxt += 1
        used += grow
        for r in decs:
            r["x"] += 1
            r["g"] += 1
        for r, T, _ in chunks:
            r["done"] += T
            if r["done"] >= r["plen"]:
                i = r["i"]
                if gen[i] == 0:
                    first[i] = now
                r.update(dec=True, x=r["plen"], g=gen[i] + 1)
                if dynamic:  # the prompt's blocks are its KV's blocks
                    assert r["held"] == _blocks(r["x"], bs)
        since = 0 if chunks else since + 1
        # the scheduler's next pass: at a block's end, or where the next step's blocks run out
        grow = sum(1 for r in run if r["dec"] and r["x"] % bs == 0) if dynamic else 0
        sched = since % ms == 0 or used + grow > total
        for r in [r for r in run if sched and r["dec"] and r["g"] >= osl[r["i"]]]:
            run.remove(r)
            used -= blocks_of(r)
            done[r["i"]] = now
            left -= 1
        assert 0 <= used <= total
    return {"admit": np.asarray(admit), "first": np.asarray(first), "done": np.asarray(done),
            "preemptions": preempt, "iterations": iters, "area": area}


@pytest.fixture(scope="module")
def costs():
    return step_costs("llama-3.1-8b", "H100", max_tokens=1024 + 64, ref_prompts=(64, 300))


def _mix(n, rate, seed, out_max):
    wl = rl.Workload(prompt=rl.lengths("lognormal", mean=300, sigma=0.8, max=900),
                     output=rl.lengths("uniform", 1, out_max), rate=rate)
    arr, isl, osl = wl.sample(n, seed)
    return arr, isl.astype(int), osl.astype(int)


CASES = {
    # name: (rate, KV blocks, max_concurrency, budget, chunked, policy, prefill)
    "chunked, dynamic, ample KV": (30.0, None, 48, 512, True, "dynamic", True),
    "chunked, dynamic, KV pressure (preemptions)": (60.0, 400, 64, 512, True, "dynamic", True),
    "whole prompts, dynamic, KV pressure": (60.0, 300, 64, 1024, False, "dynamic", True),
    "whole prompts, reserve": (40.0, 600, 32, 1024, False, "reserve", True),
    "decode pool, dynamic, KV pressure": (80.0, 250, 64, 512, True, "dynamic", False),
    "block-aligned prompts, chunked, KV pressure": (60.0, 400, 64, 512, True, "dynamic", True),
    "block-aligned prompts, decode pool, KV pressure": (80.0, 250, 64, 512, True, "dynamic",
                                                        False),
}


@pytest.mark.parametrize("case", list(CASES))
def test_event_scheduler_equals_step_by_step(costs, case):
    rate, blocks, mc, budget, chunked, policy, prefill = CASES[case]
    c = costs if blocks is None else replace(costs, total_blocks=blocks)
    arr, isl, osl = _mix(400, rate, seed=7, out_max=120)
    if "aligned" in case:  # every prompt fills whole KV blocks: growth on the first token
        isl = np.maximum(16, isl // 16 * 16)
    kw = dict(max_concurrency=mc, budget=budget, chunked=chunked, kv_policy=policy,
              prefill=prefill)
    fast = run_replica(arr, isl, osl, c, **kw)
    ref = step_by_step(arr.tolist(), isl.tolist(), osl.tolist(), c, **kw)
    assert fast["preemptions"] == ref["preemptions"]
    if "pressure" in case:
        assert ref["preemptions"] > 0  # the case does exercise preemption
    assert fast["iterations"] == ref["iterations"]
    for k in ("admit", "first", "done"):
        a, b = fast[k], ref[k]
        assert np.array_equal(np.isfinite(a), np.isfinite(b)), k
        ok = np.isfinite(a)
        np.testing.assert_allclose(a[ok], b[ok], rtol=1e-9, atol=1e-12, err_msg=k)
    assert fast["area"] == pytest.approx(ref["area"], rel=1e-9)
    # the percentiles a user reads are therefore the same
    ttft_f = np.percentile(fast["first"] - arr, [50, 99])
    ttft_r = np.percentile(ref["first"] - arr, [50, 99])
    np.testing.assert_allclose(ttft_f, ttft_r, rtol=1e-9)
