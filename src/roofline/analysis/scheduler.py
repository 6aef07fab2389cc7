"""The iteration-level scheduler of one replica: continuous batching as vLLM and TensorRT-LLM
run it, stepped with the closed-form iteration costs of ``stepcost.StepCosts``.

Each iteration runs every decoding sequence (one token each) and, within a token budget, the
prefill of newly admitted prompts — whole, or in chunks (chunked prefill). A request is
admitted FIFO when the running set is below ``max_concurrency`` and its KV blocks are free:

- ``kv_policy="dynamic"`` (vLLM): the prompt's blocks at admission (1 % of the pool kept free,
  vLLM's watermark), one more block each time a sequence crosses a block boundary; when a step
  cannot get its blocks the newest running request is preempted — its blocks freed, and it is
  recomputed (prompt + tokens generated so far) when readmitted;
- ``kv_policy="reserve"`` (TensorRT-LLM's GUARANTEED_NO_EVICT): blocks for prompt + output are
  reserved at admission; nothing is ever preempted.

Speed: there are no per-token objects. A decoding sequence's finishing step is fixed when it
starts decoding (one token per step whatever the batch), so the running set is a heap of
finishing steps; between events (an arrival that can be admitted, a finish, the KV pool
running out) the decode steps are identical up to the context, and a run of k of them costs
k·(lin(b) + slope(b)·C) + slope(b)·b·k(k−1)/2 in closed form. Block growth is counted exactly
with a histogram of the sequences' positions modulo the block size.
"""

from __future__ import annotations

import heapq
import math
from collections import deque
from typing import Any

import numpy as np

from .stepcost import StepCosts

__all__ = ["run_replica"]


def run_replica(arr: np.ndarray, isl: np.ndarray, osl: np.ndarray, c: StepCosts, *,
                max_concurrency: int, budget: int, chunked: bool, kv_policy: str = "dynamic",
                prefill: bool = True) -> dict[str, Any]:
    """Simulate one replica serving requests arriving at ``arr`` (sorted, s).

    ``budget``: prefill tokens per step (chunked: the chunk budget, shared with the decoding
    sequences' one token each, as vLLM's max_num_batched_tokens; whole prompts: the most prompt
    tokens batched into one step, a longer prompt running alone). ``prefill=False``: a decode
    pool of disaggregated serving — requests arrive with their prompt's KV and first token; one
    preempted there resumes where it stopped when readmitted (re-sending or recomputing its KV
    is not priced).

    Returns per-request admit / first-token / done times (inf: never fits), the preemption
    count and the number of iterations.
    """
    n = len(arr)
    arr_l = arr.tolist()
    isl_l = [int(x) for x in isl.tolist()]
    osl_l = [int(x) for x in osl.tolist()]
    lin = c.lin.tolist()
    slope = c.slope.tolist()
    pair = c.pair.tolist()
    pre = c.pre.tolist()
    NM = len(lin) - 1
    lin_tail = lin[NM] - lin[NM - 1]
    pre_tail = pre[NM] - pre[NM - 1]
    # past the tables the step time is extrapolated linearly (slope and pair stay at their
    # last value): extend the lists once to the largest step this run can form, so that the
    # loop indexes them without a branch
    top = max_concurrency + max(budget, max(isl_l, default=0) + max(osl_l, default=0)) + 1
    if top > NM:
        lin += [lin[NM] + lin_tail * (j - NM) for j in range(NM + 1, top + 1)]
        pre += [pre[NM] + pre_tail * (j - NM) for j in range(NM + 1, top + 1)]
        slope += [slope[NM]] * (top - NM)
        pair += [pair[NM]] * (top - NM)
    bs = c.block_size
    total = c.total_blocks
    dynamic = kv_policy == "dynamic"
    wm = max(1, total // 100) if dynamic else 0
    inf = math.inf
    heappop = heapq.heappop
    t_admit = [math.nan] * n
    t_first = [math.nan] * n
    t_done = [math.nan] * n
    gen = [0] * n  # tokens generated before the current (re)admission
    held = [0] * n  # KV blocks held (prefilling / reserve policy)
    k0 = [0] * n  # step at which decoding (re)started
    x0 = [0] * n  # tokens in KV at that step
    g0 = [0] * n  # tokens generated at that step
    ver = [0] * n
    dec = [False] * n
    live = [False] * n
    hist = [0] * (2 * bs)  # twice over: bs consecutive phases are one slice
    heap: list[tuple[int, int, int]] = []
    order: list[int] = []  # running requests in admission order (preemption victims: newest)
    pf: list[list[int]] = []  # partial prefills [idx, done tokens, total tokens]
    wait: deque[int] = deque()
    nxt = 0
    now = 0.0
    K = 0
    b = 0  # decoding sequences
    C = 0  # tokens in KV of the decoding sequences (before the step)
    used = 0
    running = 0
    finished = 0
    preempt = 0
    iters = 0
    area = 0.0  # ∫ (waiting + running) dt: Little's L, from the scheduler's own counts

    def start_decode(i: int, x: int, g: int) -> None:
        nonlocal b, C
        k0[i], x0[i], g0[i] = K, x, g
        dec[i] = True
        b += 1
        C += x
        if dynamic:
            j = (K - x) % bs
            hist[j] += 1
            hist[j + bs] += 1
        heapq.heappush(heap, (K + osl_l[i] - g - 1, i, ver[i]))

    def stop_decode(i: int) -> int:
        """Remove a decoding sequence; returns its blocks."""
        nonlocal b, C
        x = x0[i] + K - k0[i]
        dec[i] = False
        b -= 1
        C -= x
        if dynamic:
            j = (k0[i] - x0[i]) % bs
            hist[j] -= 1
            hist[j + bs] -= 1
            return -(-x // bs)
        return held[i]

    def finish(i: int, blocks: int) -> None:
        nonlocal used, running, finished
        t_done[i] = now
        used -= blocks
        running -= 1
        finished += 1
        live[i] = False

    def preempt_newest() -> bool:
        nonlocal used, running, preempt
        while order and not live[order[-1]]:
            order.pop()
        if not order:
            return False
        v = order.pop()
        if dec[v]:
            gen[v] = g0[v] + K - k0[v]
            used -= stop_decode(v)
        else:
            for j, e in enumerate(pf):
                if e[0] == v:
                    del pf[j]
                    break
            used -= held[v]
        ver[v] += 1
        live[v] = False
        running -= 1
        preempt += 1
        wait.appendleft(v)
        return True

    while finished < n:
        while nxt < n and arr_l[nxt] <= now:
            wait.append(nxt)
            nxt += 1
        if running == 0 and not wait:
            now = arr_l[nxt]
            continue
        if dynamic and b:  # this step's new blocks
            while used + hist[K % bs] > total and preempt_newest():
                pass
        # -- admission and the prefill chunks of this step
        chunks: list[tuple[int, int, int]] = []  # (idx, tokens, cached prefix)
        if pf or wait:  # (else: a decode-only step, nothing to admit)
            tok = budget - b if chunked else budget
            grow = hist[K % bs] if dynamic and b else 0
            for e in pf:
                if tok <= 0:
                    break
                rem = e[2] - e[1]
                T = min(rem, tok) if chunked else rem
                if not chunked and T > tok and chunks:
                    break
                chunks.append((e[0], T, e[1]))
                tok -= T
            while wait and running < max_concurrency and (tok > 0 or not prefill):
                i = wait[0]
                # KV to hold: prompt + tokens so far (a decode pool's request holds its prompt
                # and all but its newest token: it resumes where it stopped)
                plen = isl_l[i] + gen[i] if prefill else isl_l[i] + max(gen[i], 1) - 1
                need = -(-(isl_l[i] + osl_l[i] - 1) // bs) if not dynamic else -(-plen // bs)
                if need > total - wm:  # can never fit: reject
                    wait.popleft()
                    t_admit[i] = t_first[i] = t_done[i] = inf
                    finished += 1
                    continue
                # a decode pool's request joins this step: its first token may need a block
                first_blk = 1 if not prefill and dynamic and plen % bs == 0 else 0
                if used + need + first_blk + grow + (wm if running else 0) > total:
                    break
                if prefill and not chunked and plen > tok and chunks:
                    break
                wait.popleft()
                used += need
                grow += first_blk
                held[i] = need
                running += 1
                live[i] = True
                order.append(i)
                if t_admit[i] != t_admit[i]:
                    t_admit[i] = now
                if not prefill:  # decode pool: KV and first token arrived with the request
                    if osl_l[i] <= 1:
                        finish(i, need)
                    else:
                        start_decode(i, plen, max(gen[i], 1))
                    continue
                T = min(plen, tok) if chunked else plen
                pf.append([i, 0, plen])
                chunks.append((i, T, 0))
                tok -= T
        if chunks:  # -- one mixed iteration
            iters += 1
            Tt = 0
            att = 0.0
            for _i, T, cp in chunks:
                Tt += T
                att += pair[T] * T * (cp + (T + 1) * 0.5)
            N = b + Tt
            dt = pre[N] + att
            if b:
                dt += lin[b] - pre[b] + slope[b] * (C + b)
                if dynamic:
                    used += hist[K % bs]
                C += b
            area += (len(wait) + running) * dt
            now += dt
            while nxt < n and arr_l[nxt] <= now:  # arrived during the step: in the system
                area += now - arr_l[nxt]
                wait.append(nxt)
                nxt += 1
            K += 1
            # chunks[j] is pf[j]: partial prefills first, then the prompts admitted now
            done_pf = False
            for j in range(len(chunks)):
                e = pf[j]
                e[1] += chunks[j][1]
                if e[1] >= e[2]:
                    done_pf = True
                    i = e[0]
                    g = gen[i] + 1
                    if gen[i] == 0:
                        t_first[i] = now
                    if g >= osl_l[i]:
                        finish(i, held[i])
                    else:
                        start_decode(i, e[2], g)
            if done_pf:
                pf = [e for e in pf if e[1] < e[2]]
        elif b:  # -- a run of identical decode steps
            while heap and (heap[0][2] != ver[heap[0][1]] or not dec[heap[0][1]]):
                heappop(heap)
            k = heap[0][0] - K + 1
            sl = slope[b]
            base = lin[b] + sl * (C + b)
            inc = sl * b
            can_admit = running < max_concurrency and not wait and nxt < n
            if can_admit:
                gap = arr_l[nxt] - now
                if gap <= base:
                    ka = 1
                elif inc > 0:
                    a2 = inc / 2
                    b1 = base - a2
                    ka = math.ceil((-b1 + math.sqrt(b1 * b1 + 4 * a2 * gap)) / (2 * a2) - 1e-9)
                else:
                    ka = math.ceil(gap / base - 1e-9)
                k = max(1, min(k, ka))
            if dynamic:
                free = total - used
                full = k // bs
                if b * (full + 1) > free:
                    cyc = free // b
                    rest = free - cyc * b
                    j = 0
                    j0 = K % bs
                    while j < bs and hist[j0 + j] <= rest:
                        rest -= hist[j0 + j]
                        j += 1
                    k = max(1, min(k, cyc * bs + j))
                    full = k // bs
                r = k - full * bs
                if r:
                    j0 = K % bs
                    used += full * b + sum(hist[j0:j0 + r])
                else:
                    used += full * b
            dt = k * base + inc * k * (k - 1) / 2
            area += (len(wait) + running) * dt
            now += dt
            while nxt < n and arr_l[nxt] <= now:
                area += now - arr_l[nxt]
                wait.append(nxt)
                nxt += 1
            C += b * k
            K += k
            iters += k
        else:  # nothing can run: only an idle engine waiting for an arrival
            if finished >= n:  # the last requests finished at admission (decode pool)
                break
            if nxt >= n:
                raise RuntimeError("scheduler stalled with requests left")  # pragma: no cover
            now = max(now, arr_l[nxt])
            continue
        while heap and heap[0][0] < K:  # finished: stop_decode + finish, inlined (hot)
            _, i, v = heappop(heap)
            if v != ver[i] or not dec[i]:
                continue
            x = x0[i] + K - k0[i]
            dec[i] = False
            b -= 1
            C -= x
            if dynamic:
                j = (k0[i] - x0[i]) % bs
                hist[j] -= 1
                hist[j + bs] -= 1
                used -= -(-x // bs)
            else:
                used -= held[i]
            t_done[i] = now
            running -= 1
            finished += 1
            live[i] = False
    return {"admit": np.asarray(t_admit), "first": np.asarray(t_first),
            "done": np.asarray(t_done), "preemptions": preempt, "iterations": iters,
            "area": area}
