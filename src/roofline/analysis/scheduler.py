"""The iteration-level scheduler of one replica: continuous batching as vLLM and TensorRT-LLM
run it, stepped with the closed-form iteration costs of ``stepcost.StepCosts``.

Each iteration runs every decoding sequence (one token each) and, within a token budget, the
prefill of newly admitted prompts — whole, or in chunks (chunked prefill). With the engine
profile's ``prefill_first`` (vLLM V0 without chunked prefill) an iteration that has prompts to
prefill runs them alone and the decoding sequences wait for the next one. With the profile's
``scheduler_steps`` k > 1 (vLLM V0's multi-step scheduling) the scheduler runs once per k decode
steps: decode steps come in blocks of k, a sequence that finishes inside a block keeps its slot
(and its tokens reach the client) at the block's end, and prompts are admitted only between
blocks. A request is
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

from ..errors import SpecError
from .stepcost import StepCosts

__all__ = ["run_replica"]

_heappop, _heappush = heapq.heappop, heapq.heappush


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
    # the mixed pass relies on these (its first chunk is never empty): see _Replica.mixed_pass
    if budget < 1 or (chunked and max_concurrency > budget):
        raise SpecError(f"budget={budget}, max_concurrency={max_concurrency}, chunked={chunked}: "
                        "budget must be at least 1 and, chunked, at least max_concurrency (each "
                        "decoding sequence takes one token of the step's budget)")
    s = _Replica(arr, isl, osl, c, max_concurrency, budget, chunked, kv_policy, prefill)
    # one pass: the mixed iterations of one call (a prompt's chunks), or one run of identical
    # decode steps; the state lives on ``s`` (slots), and a pass makes few calls (~3 passes per
    # request in benchmarks/bench_planning.py's chunked case)
    n, times, wait, heap, mc = s.n, s.arr, s.wait, s.heap, s.mc
    dynamic, hist, bs, total = s.dynamic, s.hist, s.bs, s.total
    s.arrive()  # (and again whenever the clock jumps to an arrival)
    # `while True`, not `while s.finished < n`: CPython 3.11 specialises the bytecode of a
    # function entered once only after a few unconditional backward jumps, and a `while cond:`
    # loop jumps back conditionally — this loop would run unspecialised throughout
    while True:
        if s.finished >= n:
            break
        if not wait and s.running == 0:  # an empty system: on to the next arrival
            s.now = times[s.nxt]
            s.arrive()
            continue
        # this step's new blocks (at most one per decoding sequence: the first test is enough
        # while the pool has room for them all)
        if dynamic and s.used + s.b > total and s.b and s.used + hist[s.K % bs] > total:
            s.make_room()
        # prefill chunks: the partial prefills, and admission when a request waits for a slot;
        # mixed iterations are one call (their steps, the clock, the prompts they complete)
        if (s.pf or (wait and s.running < mc)) and s.mixed_pass():
            if heap and heap[0][0] < s.K:
                s.retire()
            continue
        if s.b:  # a run of decode steps, the clock and the sequences it finished
            s.decode_run()
        elif s.finished >= n:  # the last requests finished at admission (decode pool)
            break
        else:  # nothing can run: an idle engine waiting for an arrival
            if s.nxt >= n:
                raise RuntimeError("scheduler stalled with requests left")  # pragma: no cover
            s.now = max(s.now, times[s.nxt])
            s.arrive()
    return s.result()


def _tables(c: StepCosts, top: int) -> tuple[list[float], list[float], list[float], list[float]]:
    """``c``'s lin, slope, pair and pre as lists indexed up to ``top``: past the tables the step
    time is extrapolated linearly (slope and pair stay at their last value), extended once so
    that the loop indexes them without a branch."""
    lin, slope, pair, pre = (c.lin.tolist(), c.slope.tolist(), c.pair.tolist(), c.pre.tolist())
    NM = len(lin) - 1
    if top > NM:
        lin_tail = lin[NM] - lin[NM - 1]
        pre_tail = pre[NM] - pre[NM - 1]
        j = np.arange(1, top - NM + 1, dtype=np.float64)  # j − NM, the same float operations
        lin += (lin[NM] + lin_tail * j).tolist()
        pre += (pre[NM] + pre_tail * j).tolist()
        slope += [slope[NM]] * (top - NM)
        pair += [pair[NM]] * (top - NM)
    return lin, slope, pair, pre


class _Replica:
    """The scheduler's state between iterations, and one method per part of an iteration.

    Requests are indices into per-request lists; the decoding sequences are not objects but a
    heap of finishing steps (``heap``: (step, request, version); a preempted request's entries
    are stale by version), their count ``b``, summed context ``C`` and, for dynamic KV, a
    histogram of their positions modulo the block size (``hist``). Slots: the loop reads this
    state on every pass.
    """

    __slots__ = ("n", "arr", "isl", "osl", "lin", "slope", "pair", "pre", "seq", "pfirst", "bs",
                 "total", "ms", "blk0",
                 "dynamic", "wm", "mc", "budget", "chunked", "prefill",
                 "t_admit", "t_first", "t_done", "gen", "held", "k0", "x0", "g0", "ver", "dec",
                 "live", "hist", "heap", "order", "pf", "wait",
                 "nxt", "now", "K", "b", "C", "used", "running", "finished", "preempt", "iters",
                 "area")

    def __init__(self, arr: np.ndarray, isl: np.ndarray, osl: np.ndarray, c: StepCosts,
                 max_concurrency: int, budget: int, chunked: bool, kv_policy: str,
                 prefill: bool) -> None:
        n = self.n = len(arr)
        self.arr = arr.tolist() + [math.inf]  # a sentinel: the arrival that never comes
        self.isl = np.asarray(isl).astype(np.int64).tolist()  # Python ints (int() of each)
        self.osl = np.asarray(osl).astype(np.int64).tolist()
        top = max_concurrency + max(budget, max(self.isl, default=0) + max(self.osl, default=0)) + 1
        self.lin, self.slope, self.pair, self.pre = _tables(c, top)
        self.seq = c.seq_overhead  # host time per prefill chunk (the decoding ones: in lin)
        self.pfirst = c.prefill_first and not chunked  # prefill-only steps (vLLM V0)
        # multi-step scheduling: decode steps in blocks of ms from step blk0 (reset after each
        # prefill step: the scheduler's next pass starts a new block)
        self.ms = max(1, int(getattr(c.host, "scheduler_steps", 1) or 1))
        self.blk0 = 0
        self.bs = bs = c.block_size
        self.total = c.total_blocks
        self.dynamic = kv_policy == "dynamic"
        self.wm = max(1, self.total // 100) if self.dynamic else 0  # vLLM's watermark
        self.mc, self.budget, self.chunked, self.prefill = (max_concurrency, budget, chunked,
                                                            prefill)
        self.t_admit = [math.nan] * n
        self.t_first = [math.nan] * n
        self.t_done = [math.nan] * n
        self.gen = [0] * n  # tokens generated before the current (re)admission
        self.held = [0] * n  # KV blocks held (prefilling / reserve policy)
        self.k0 = [0] * n  # step at which decoding (re)started
        self.x0 = [0] * n  # tokens in KV at that step
        self.g0 = [0] * n  # tokens generated at that step
        self.ver = [0] * n  # bumped at each preemption: the heap's older entries are stale
        self.dec = [False] * n  # decoding
        self.live = [False] * n  # running (prefilling or decoding)
        self.hist = [0] * (2 * bs)  # twice over: bs consecutive phases are one slice
        self.heap: list[tuple[int, int, int]] = []
        self.order: list[int] = []  # running requests in admission order (victims: newest)
        self.pf: list[list[int]] = []  # partial prefills [idx, done tokens, total tokens]
        self.wait: deque[int] = deque()
        self.nxt = 0  # next arrival
        self.now = 0.0
        self.K = 0  # engine steps so far
        self.b = 0  # decoding sequences
        self.C = 0  # tokens in KV of the decoding sequences (before the step)
        self.used = 0  # KV blocks in use
        self.running = self.finished = self.preempt = self.iters = 0
        self.area = 0.0  # ∫ (waiting + running) dt: Little's L, from the scheduler's own counts

    def result(self) -> dict[str, Any]:
        return {"admit": np.asarray(self.t_admit), "first": np.asarray(self.t_first),
                "done": np.asarray(self.t_done), "preemptions": self.preempt,
                "iterations": self.iters, "area": self.area}

    # -- arrivals and time
    def arrive(self) -> None:
        """Requests that have arrived by now join the queue."""
        arr, nxt, now, wait = self.arr, self.nxt, self.now, self.wait
        while arr[nxt] <= now:
            wait.append(nxt)
            nxt += 1
        self.nxt = nxt

    # -- decoding sequences and KV blocks
    def start_decode(self, i: int, x: int, g: int) -> None:
        """Request ``i`` decodes from this step with ``x`` tokens in KV, ``g`` generated."""
        K = self.K
        self.k0[i], self.x0[i], self.g0[i] = K, x, g
        self.dec[i] = True
        self.b += 1
        self.C += x
        if self.dynamic:
            j = (K - x) % self.bs
            self.hist[j] += 1
            self.hist[j + self.bs] += 1
        _heappush(self.heap, (K + self.osl[i] - g - 1, i, self.ver[i]))

    def stop_decode(self, i: int) -> int:
        """Remove a decoding sequence; returns its blocks."""
        x = self.x0[i] + self.K - self.k0[i]
        self.dec[i] = False
        self.b -= 1
        self.C -= x
        if self.dynamic:
            bs = self.bs
            j = (self.k0[i] - self.x0[i]) % bs
            self.hist[j] -= 1
            self.hist[j + bs] -= 1
            return -(-x // bs)
        return self.held[i]

    def finish(self, i: int, blocks: int) -> None:
        self.t_done[i] = self.now
        self.used -= blocks
        self.running -= 1
        self.finished += 1
        self.live[i] = False

    def retire(self) -> None:
        """Sequences whose last token was this step's finish (stale heap entries dropped):
        ``stop_decode`` and ``finish`` of each, written out (one call per request)."""
        heap, K, ver, dec = self.heap, self.K, self.ver, self.dec
        x0, k0, t_done, live, now = self.x0, self.k0, self.t_done, self.live, self.now
        dynamic, bs, hist = self.dynamic, self.bs, self.hist
        b, C, used, n = self.b, self.C, self.used, 0
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
                    used -= self.held[i]
                t_done[i] = now
                n += 1
                live[i] = False
        self.b, self.C, self.used = b, C, used
        self.running -= n
        self.finished += n

    def make_room(self) -> None:
        """Dynamic KV: preempt the newest requests until this step's new blocks fit (the
        caller has found that they do not)."""
        hist, k = self.hist, self.K % self.bs
        while self.used + hist[k] > self.total and self.preempt_newest():
            pass

    def preempt_newest(self) -> bool:
        """Preempt the newest running request: its blocks freed, back to the queue's head
        (recomputed when readmitted). False: none running."""
        order, live = self.order, self.live
        while order and not live[order[-1]]:
            order.pop()
        if not order:
            return False
        v = order.pop()
        if self.dec[v]:
            self.gen[v] = self.g0[v] + self.K - self.k0[v]
            self.used -= self.stop_decode(v)
        else:
            pf = self.pf
            for j, e in enumerate(pf):
                if e[0] == v:
                    del pf[j]
                    break
            self.used -= self.held[v]
        self.ver[v] += 1
        live[v] = False
        self.running -= 1
        self.preempt += 1
        self.wait.appendleft(v)
        return True

    # -- admission and prefill
    def admit(self, chunks: list[int], tok: int) -> None:
        """FIFO admission while the running set is below the limit, its KV blocks are free
        and (prefill) the step has budget left; ``tok``: that budget. Chunked, a prompt takes
        what is left of it; a whole prompt longer than that waits for a later step, unless it
        would run alone. A request whose blocks exceed the whole pool is rejected (times inf)."""
        # (a call admits about one request: what the loop reads once is read from self)
        wait, prefill, dynamic, bs, total, wm = (self.wait, self.prefill, self.dynamic, self.bs,
                                                 self.total, self.wm)
        grow = self.hist[self.K % bs] if dynamic and self.b else 0  # this step's new blocks
        while wait and self.running < self.mc and (tok > 0 or not prefill):
            i = wait[0]
            # KV to hold: prompt + tokens so far (a decode pool's request holds its prompt
            # and all but its newest token: it resumes where it stopped)
            g = self.gen[i]
            plen = self.isl[i] + g if prefill else self.isl[i] + max(g, 1) - 1
            need = -(-plen // bs) if dynamic else -(-(self.isl[i] + self.osl[i] - 1) // bs)
            if need > total - wm:  # can never fit: reject
                wait.popleft()
                self.t_admit[i] = self.t_first[i] = self.t_done[i] = math.inf
                self.finished += 1
                continue
            # a decode pool's request joins this step: its first token may need a block (not
            # one with a one-token output: it finishes at admission and never decodes)
            first_blk = (1 if not prefill and dynamic and plen % bs == 0 and self.osl[i] > 1
                         else 0)
            if self.used + need + first_blk + grow + (wm if self.running else 0) > total:
                break
            if not prefill:
                T = 0
            elif self.chunked:
                T = plen if plen < tok else tok
            elif plen > tok and chunks:
                break
            else:
                T = plen
            wait.popleft()
            self.used += need
            grow += first_blk
            self.held[i] = need
            self.running += 1
            self.live[i] = True
            self.order.append(i)
            t_admit = self.t_admit
            if t_admit[i] != t_admit[i]:
                t_admit[i] = self.now
            if prefill:
                self.pf.append([i, 0, plen])
                chunks.append(T)
                tok -= T
            elif self.osl[i] <= 1:  # decode pool: KV and first token arrived with the request
                self.finish(i, need)
            else:
                self.start_decode(i, plen, max(g, 1))

    # -- iterations
    def mixed_pass(self) -> bool:
        """Mixed iterations, each whole: this step's prefill chunks (``chunks[j]``: the tokens
        of ``pf[j]``, after its cached prefix ``pf[j][1]``: the partial prefills first, in
        order, then the prompts admitted now), the step's time (every decoding sequence's
        token with them; their context and, dynamic KV, blocks grow by a token), the clock's
        advance as after a decode run (Little's area, the arrivals meanwhile), and the prompts
        the step completed, which give their first token and decode from the next step (or
        finish, a one-token output). The next step follows in the same call while a prompt is
        still partial and the driver would do nothing else first (no sequence finished at this
        step; dynamic KV: the next step's new blocks free): a long prompt's chunks are one
        call. False, with nothing but admission's rejections done: no chunk this step (no
        budget left, or no prompt admitted)."""
        pf, wait, pair, heap = self.pf, self.wait, self.pair, self.heap
        budget, chunked, dynamic, bs, hist = (self.budget, self.chunked, self.dynamic, self.bs,
                                              self.hist)
        while True:
            b = self.b
            # the loop below needs no check of tok: pf holds at most one prompt (a step's
            # chunks all complete their prompts but the last; see below), and while it holds
            # one that prompt is running, not decoding, so b ≤ max_concurrency − 1 and tok ≥ 1
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
            if wait and self.running < self.mc and (tok > 0 or not self.prefill):
                j = len(chunks)
                self.admit(chunks, tok)
                for T in chunks[j:]:  # the prompts admitted now: no cached prefix
                    Tt += T
                    att += pair[T] * T * ((T + 1) * 0.5)
            if not chunks:
                return False
            # the step's time
            self.iters += 1
            K = self.K
            if self.pfirst:  # the prompts alone; the decoding sequences wait (no engine step)
                self.blk0 = K
                dt = self.pre[Tt] + att + self.seq * len(chunks)
            else:
                self.blk0 = K + 1  # the next decode block starts after it
                b = self.b  # (admission may have started decoding: a decode pool)
                dt = self.pre[b + Tt] + att + self.seq * len(chunks)
                if b:
                    C = self.C
                    dt += self.lin[b] - self.pre[b] + self.slope[b] * (C + b)
                    if dynamic:
                        self.used += hist[K % bs]
                    self.C = C + b
                K = self.K = K + 1
            # the clock: the same lines as decode_run's (inline for speed; see there)
            area = self.area + (len(wait) + self.running) * dt
            now = self.now = self.now + dt
            times, nxt = self.arr, self.nxt
            if times[nxt] <= now:
                while times[nxt] <= now:
                    area += now - times[nxt]
                    wait.append(nxt)
                    nxt += 1
                self.nxt = nxt
            self.area = area
            # the prompts completed: every chunk but the last completes its prompt (a chunk
            # short of its prompt took the rest of the step's budget), so they are a prefix of pf
            last = len(chunks) - 1
            e = pf[last]
            e[1] += chunks[last]
            done = last + 1 if e[1] >= e[2] else last
            if done:  # their first token; decoding from step K, or a one-token output's finish
                gen, b, C, osl, k0, x0, g0, dec, ver = (
                    self.gen, self.b, self.C, self.osl, self.k0, self.x0, self.g0, self.dec,
                    self.ver)
                t_first = self.t_first
                for j in range(done):
                    e = pf[j]
                    i = e[0]
                    g = gen[i] + 1
                    if g == 1:
                        t_first[i] = now
                    if g >= osl[i]:
                        self.finish(i, self.held[i])
                    else:  # start_decode(i, e[2], g), written out
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
                self.b, self.C = b, C
                del pf[:done]
            # the next step at once when the driver would start it next (see the docstring)
            if not pf or (heap and heap[0][0] < K) or (
                    dynamic and self.used + self.b > self.total and self.b
                    and self.used + hist[K % bs] > self.total):
                return True

    def decode_run(self) -> None:
        """A run of identical decode steps, summed in closed form (the j-th costs base + inc·j),
        up to the next event: the first finish, the step that reaches an arrival that can be
        admitted, or (dynamic KV) the step the free blocks run out; then the clock moves by
        it and the sequences that finished at its last step are retired."""
        heap = self.heap
        h = heap[0]
        if self.preempt:  # stale entries (only a preemption leaves them)
            ver, dec = self.ver, self.dec
            while h[2] != ver[h[1]] or not dec[h[1]]:
                _heappop(heap)
                h = heap[0]
        K, b = self.K, self.b
        k = h[0] - K + 1  # to the first finish (≥ 1: the finished ones were retired)
        sl = self.slope[b]
        base = self.lin[b] + sl * (self.C + b)
        inc = sl * float(b)  # (float·float: CPython's int·float takes a slower path; same value)
        if self.running < self.mc and not self.wait and self.nxt < self.n:
            # the fewest steps that reach the next arrival: k·base + inc·k(k−1)/2 ≥ gap
            gap = self.arr[self.nxt] - self.now
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
        ms = self.ms
        if ms > 1:  # multi-step: on to the end of the block the event falls in
            k += -(k + (K - self.blk0) % ms) % ms
        if self.dynamic:  # the blocks the run takes, and as many steps as the free ones last
            bs, hist = self.bs, self.hist
            free = self.total - self.used
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
            self.used += full * b + sum(hist[j0:j0 + r]) if r else full * b
        self.C += b * k
        K = self.K = K + k
        self.iters += k
        fk = float(k)
        dt = fk * base + inc * fk * (fk - 1.0) / 2.0  # = k·base + inc·k(k−1)/2, to the bit
        # the clock moves by the step(s); Little's area grows by who was in the system, and
        # the requests arriving meanwhile join the queue (counted from their arrival). Written
        # twice on purpose: mixed_pass repeats these lines for a mixed iteration (one method,
        # _Replica.advance, for both cost +2.5 % instructions per request: valgrind,
        # benchmarks/README session 29); the step-by-step reference tests compare the area, so
        # the two copies cannot drift apart unnoticed
        wait = self.wait
        area = self.area + (len(wait) + self.running) * dt
        now = self.now = self.now + dt
        times, nxt = self.arr, self.nxt
        if times[nxt] <= now:
            while times[nxt] <= now:
                area += now - times[nxt]
                wait.append(nxt)
                nxt += 1
            self.nxt = nxt
        self.area = area
        if heap[0][0] < K:  # (a decode run has sequences: the heap is not empty)
            self.retire()
