"""The two kinds of pass of ``scheduler.run_replica``'s driver, as functions of the replica's
state ``s`` (a ``scheduler._Replica``; in a module of their own for the length of both):
``mixed_pass``, the mixed iterations of one call (prefill chunks with the decoding sequences'
tokens), and ``decode_run``, runs of identical decode steps summed in closed form.

Speed (CPython 3.11): the state a pass updates is read into locals once and written back once,
loaded and stored three to a line: a multiple assignment of two or three names compiles to
stack swaps, one of four or more builds and unpacks a tuple (the measured effect of both:
benchmarks/README.md, session 31).
"""

from __future__ import annotations

import heapq
import math
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .scheduler import _Replica

__all__ = ["decode_run", "mixed_pass"]

_heappop, _heappush = heapq.heappop, heapq.heappush


def mixed_pass(s: _Replica) -> bool:
    """Mixed iterations, each whole: this step's prefill chunks (``chunks[j]``: the tokens of
    ``pf[j]``, after its cached prefix ``pf[j][1]``: the partial prefills first, in order, then
    the prompts admitted now), the step's time (every decoding sequence's token with them; their
    context and, dynamic KV, blocks grow by a token), the clock's advance as after a decode run
    (Little's area, the arrivals meanwhile), and the prompts the step completed, which give their
    first token and decode from the next step (or finish, a one-token output). The next step
    follows in the same call while a prompt is still partial and the driver would do nothing
    else first (no sequence finished at this step; dynamic KV: the next step's new blocks free):
    a long prompt's chunks are one call. The clock, step and KV counts are locals, written back
    before admission reads them and at the end. False, with nothing but admission's rejections
    done: no chunk this step (no budget left, or no prompt admitted)."""
    pf, wait, pair = s.pf, s.wait, s.pair
    heap, arr, budget = s.heap, s.arr, s.budget
    chunked, dynamic, bs = s.chunked, s.dynamic, s.bs
    hist, total, pre = s.hist, s.total, s.pre
    dlin, slope, seq = s.dlin, s.slope, s.seq
    K, b, C = s.K, s.b, s.C
    used, now, area = s.used, s.now, s.area
    nxt = s.nxt
    while True:
        # the loop below needs no check of tok: pf holds at most one prompt (a step's chunks
        # all complete their prompts but the last; see below), and while it holds one that
        # prompt is running, not decoding, so b ≤ max_concurrency − 1 and tok ≥ 1
        # (run_replica: budget ≥ 1, and chunked budget ≥ max_concurrency)
        tok = budget - b if chunked else budget
        # the chunks' tokens, and their attention over the cached prefix and themselves
        chunks: list[int] = []
        Tt = 0
        att = 0.0
        for e in pf:
            cp = e[1]
            rem = e[2] - cp
            T = rem if rem < tok else tok
            chunks.append(T)
            Tt += T
            att += pair[T] * T * (cp + (T + 1) * 0.5)
            tok -= T
        if wait and s.running < s.mc and (tok > 0 or not s.prefill):
            s.K, s.b, s.C = K, b, C  # (admission reads them, and the clock)
            s.used, s.now = used, now
            j = len(chunks)
            s.admit(chunks, tok)
            b, C, used = s.b, s.C, s.used  # (a decode pool's admission starts decoding)
            for T in chunks[j:]:  # the prompts admitted now: no cached prefix
                Tt += T
                att += pair[T] * T * ((T + 1) * 0.5)
        if not chunks:  # (before the call's first step only: none of the locals moved)
            return False
        # the step's time
        s.iters += 1
        if s.pfirst:  # the prompts alone; the decoding sequences wait (no engine step)
            dt = pre[Tt] + att + seq * len(chunks)
        else:
            dt = pre[b + Tt] + att + seq * len(chunks)
            if b:
                dt += dlin[b] + slope[b] * (C + b)  # dlin[b] = lin[b] − pre[b]
                if dynamic:
                    used += hist[K % bs]
                C = C + b
            K = K + 1
        # the clock: the same lines as decode_run's (inline for speed; see there)
        area += (len(wait) + s.running) * dt
        now += dt
        if arr[nxt] <= now:
            while arr[nxt] <= now:
                area += now - arr[nxt]
                wait.append(nxt)
                nxt += 1
        # the prompts completed: every chunk but the last completes its prompt (a chunk short
        # of its prompt took the rest of the step's budget), so they are a prefix of pf
        last = len(chunks) - 1
        e = pf[last]
        e[1] += chunks[last]
        done = last + 1 if e[1] >= e[2] else last
        if done:  # their first token; decoding from step K, or a one-token output's finish
            gen, osl, k0 = s.gen, s.osl, s.k0
            x0, g0, dec = s.x0, s.g0, s.dec
            ver, t_first = s.ver, s.t_first
            for j in range(done):
                e = pf[j]
                i = e[0]
                g = gen[i] + 1
                if g == 1:
                    t_first[i] = now
                if g >= osl[i]:  # s.finish(i, s.held[i]), written out (used is a local here)
                    s.t_done[i] = now
                    used -= s.held[i]
                    s.running -= 1
                    s.finished += 1
                    s.live[i] = False
                else:  # s.start_decode(i, e[2], g), written out
                    x = e[2]
                    k0[i], x0[i], g0[i] = K, x, g
                    dec[i] = True
                    b += 1
                    C += x
                    if dynamic:
                        h = (K - x) % bs
                        hist[h] += 1
                        hist[h + bs] += 1
                    _heappush(heap, (K + osl[i] - g - 1, i, ver[i]))
            del pf[:done]
        # the next step at once when the driver would start it next (see the docstring)
        if not pf or (heap and heap[0][0] < K) or (
                dynamic and used + b > total and b and used + hist[K % bs] > total):
            s.K, s.b, s.C = K, b, C
            s.used, s.now, s.area = used, now, area
            s.nxt, s.blk0 = nxt, K  # (the next decode block starts after the last step)
            return True


def decode_run(s: _Replica) -> None:
    """Runs of identical decode steps, each summed in closed form (the j-th step of a run costs
    base + inc·j), up to the next event: the first finish, the step that reaches an arrival
    that can be admitted, or (dynamic KV) the step the free blocks run out; after each run the
    clock moves by it and the sequences that finished at its last step are retired
    (``_Replica.retire``'s lines). The next run follows in the same call while the driver
    would start it next (nothing to admit, no preemption due, a sequence still decoding); each
    run's arithmetic is that of a run the driver starts, in the same order."""
    heap, wait, arr = s.heap, s.wait, s.arr
    lin, slope, ver = s.lin, s.slope, s.ver
    dec, x0, k0 = s.dec, s.x0, s.k0
    t_done, live, held = s.t_done, s.live, s.held
    dynamic, bs, hist = s.dynamic, s.bs, s.hist
    total, ms, mc = s.total, s.ms, s.mc
    n, stale = s.n, s.preempt  # (only a preemption leaves stale heap entries)
    K, b, C = s.K, s.b, s.C
    used, running, nxt = s.used, s.running, s.nxt
    now, area, iters = s.now, s.area, s.iters
    finished = s.finished
    while True:
        h = heap[0]
        if stale:
            while h[2] != ver[h[1]] or not dec[h[1]]:
                _heappop(heap)
                h = heap[0]
        k = h[0] - K + 1  # to the first finish (≥ 1: the finished ones were retired)
        sl = slope[b]
        base = lin[b] + sl * (C + b)
        inc = sl * float(b)  # (float·float: CPython's int·float is slower; the same value)
        if running < mc and not wait and nxt < n:
            # the fewest steps that reach the next arrival: k·base + inc·k(k−1)/2 ≥ gap
            gap = arr[nxt] - now
            if gap <= base:
                ka = 1
            elif inc > 0:  # the positive root of the quadratic in k
                a2 = inc / 2.0
                b1 = base - a2
                ka = math.ceil((-b1 + math.sqrt(b1 * b1 + 4.0 * a2 * gap)) / (2.0 * a2) - 1e-9)
            else:
                ka = math.ceil(gap / base - 1e-9)
            if ka < k:
                k = ka
        if ms > 1:  # multi-step: on to the end of the block the event falls in
            k += -(k + (K - s.blk0) % ms) % ms
        if dynamic:  # the blocks the run takes, and as many steps as the free ones last
            free = total - used
            full = k // bs
            j0 = K % bs
            if b * (full + 1) > free:
                cyc = free // b  # whole cycles of bs steps: b blocks each
                rest = free - cyc * b
                j = 0
                while j < bs and hist[j0 + j] <= rest:
                    rest -= hist[j0 + j]
                    j += 1
                k = max(1, min(k, cyc * bs + j))  # ≥ 1: make_room freed this step's blocks
                full = k // bs
            r = k - full * bs
            used += full * b + sum(hist[j0:j0 + r]) if r else full * b
        C += b * k
        K += k
        iters += k
        fk = float(k)
        dt = fk * base + inc * fk * (fk - 1.0) / 2.0  # = k·base + inc·k(k−1)/2, to the bit
        # the clock moves by the step(s); Little's area grows by who was in the system, and the
        # requests arriving meanwhile join the queue (counted from their arrival). Written
        # twice on purpose: mixed_pass repeats these lines for a mixed iteration (one function
        # for both cost +2.5 % instructions per request: valgrind, benchmarks/README session
        # 29); the step-by-step reference tests compare the area, so the two copies cannot
        # drift apart unnoticed
        area += (len(wait) + running) * dt
        now += dt
        if arr[nxt] <= now:
            while arr[nxt] <= now:
                area += now - arr[nxt]
                wait.append(nxt)
                nxt += 1
        if heap[0][0] < K:  # the sequences that finished at the run's last step: retire's lines
            while heap and heap[0][0] < K:
                _, i, v = _heappop(heap)
                if v == ver[i] and dec[i]:
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
        # back to the driver when it would do something else: admit, preempt, or (no sequence
        # decoding) go on to the next arrival or stop
        if not b or (wait and running < mc) or (
                dynamic and used + b > total and used + hist[K % bs] > total):
            break
    s.K, s.b, s.C = K, b, C
    s.used, s.running, s.nxt = used, running, nxt
    s.now, s.area, s.iters = now, area, iters
    s.finished = finished
