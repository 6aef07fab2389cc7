"""The iteration-level scheduler of one replica: continuous batching as vLLM and TensorRT-LLM
run it, stepped with the closed-form iteration costs of ``stepcost.StepCosts``.

Each iteration runs every decoding sequence (one token each) and, within a token budget, the
prefill of newly admitted prompts — whole, or in chunks (chunked prefill). With the engine
profile's ``prefill_first`` (vLLM V0 without chunked prefill) an iteration that has prompts to
prefill runs them alone and the decoding sequences wait for the next one. With the profile's
``scheduler_steps`` k > 1 (vLLM V0's multi-step scheduling) the scheduler runs once per k decode
steps: decode steps come in blocks of k, a sequence that finishes inside a block keeps its slot
(and its tokens reach the client) at the block's end, and prompts are admitted only between
blocks — except under dynamic KV where the pool runs out inside a block: the scheduler acts at
that step (the finished sequences leave then, the newest is preempted if still needed), since a
block's growth is taken step by step here. vLLM V0 instead reserves a block's k − 1 lookahead
slots when it schedules the block (vllm/engine/arg_utils.py: num_lookahead_slots at least
num_scheduler_steps − 1), so it preempts only between blocks (not modelled). A request is
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
from .scheduler_steps import decode_run, mixed_pass
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
    # the mixed pass relies on these (its first chunk is never empty): see
    # scheduler_steps.mixed_pass
    if budget < 1 or (chunked and max_concurrency > budget):
        raise SpecError(f"budget={budget}, max_concurrency={max_concurrency}, chunked={chunked}: "
                        "budget must be at least 1 and, chunked, at least max_concurrency (each "
                        "decoding sequence takes one token of the step's budget)")
    s = _Replica(arr, isl, osl, c, max_concurrency, budget, chunked, kv_policy, prefill)
    # one pass: the mixed iterations of one call (a prompt's chunks), or the runs of identical
    # decode steps up to the next thing the loop must do (scheduler_steps.py); the state lives
    # on ``s`` (slots), and a pass makes few calls (~2 passes per request in
    # benchmarks/bench_planning.py's chunked case)
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
        if (s.pf or (wait and s.running < mc)) and mixed_pass(s):
            if heap and heap[0][0] < s.K:
                s.retire()
            continue
        if s.b:  # a run of decode steps, the clock and the sequences it finished
            decode_run(s)
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
    """The scheduler's state between iterations, and one method per part of an iteration
    (the two passes, mixed iterations and decode runs: ``scheduler_steps``).

    Requests are indices into per-request lists; the decoding sequences are not objects but a
    heap of finishing steps (``heap``: (step, request, version); a preempted request's entries
    are stale by version), their count ``b``, summed context ``C`` and, for dynamic KV, a
    histogram of their positions modulo the block size (``hist``). Slots: the loop reads this
    state on every pass.
    """

    __slots__ = ("n", "arr", "isl", "osl", "lin", "slope", "pair", "pre", "dlin", "seq",
                 "pfirst", "bs", "total", "ms", "blk0",
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
        # a mixed step's decoding share, lin − pre, at each decode batch (≤ max_concurrency)
        self.dlin = [self.lin[b] - self.pre[b] for b in range(max_concurrency + 1)]
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
        heap, K, ver = self.heap, self.K, self.ver
        dec, x0, k0 = self.dec, self.x0, self.k0
        t_done, live, now = self.t_done, self.live, self.now
        dynamic, bs, hist = self.dynamic, self.bs, self.hist
        b, C, used = self.b, self.C, self.used
        n = 0
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
        wait, prefill, dynamic = self.wait, self.prefill, self.dynamic
        bs, total, wm = self.bs, self.total, self.wm
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
