"""The policy's own code replayed on a virtual clock against an ideal faulty server.

Where no closed form exists — an outage window met by jittered back-offs, a retry budget or a
throttle draining during the window, the wave of retries when the window ends — the model runs
``ramplab.retry`` itself (``RetrySetup``: the same ``Retrier``, budget and throttle a worker
builds) on a virtual clock, with a server that is ideal except for the faults the scenario
names: an attempt fails at once (after ``fail_s``) when it falls in the outage window or loses
an independent draw of ``p``; otherwise it gets its first token ``ok_ttft_s`` after the send,
plus the wait of a fluid queue of ``slots`` servers of ``service_s`` each (the retry wave after
an outage queues there). The arrivals are given: the study passes the run's own intended
starts, so a Poisson draw that bunched arrivals inside the window is not mistaken for the
policy's doing (``even_arrivals`` spaces them evenly instead). Jitter and the random faults are
drawn from seeded generators, so the replay is reproducible.

What is left out, on purpose, is what the measurement adds: the target's real
(near-deterministic) service and its shedding, client and network time.
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from ramplab.retry.base import AttemptOutcome
from ramplab.retry.config import RetrySetup, parse_retry

__all__ = ["Faults", "Replay", "ReplayResult", "even_arrivals", "recovery_s", "replay"]

RECOVERY_WINDOW_S = 1.0  # as summary.json's outage.recovery_s
RECOVERY_THRESHOLD = 0.95


@dataclass(frozen=True, slots=True)
class Faults:
    """What the ideal server refuses: a share ``p`` at random, and everything in a window."""

    p: float = 0.0
    status: int = 429  # of the random refusals
    retry_after_s: float | None = None  # of the random refusals
    window: tuple[float, float] | None = None  # [start, end) in run seconds: 503, Retry-After left

    def outcome(self, t: float, u: float) -> tuple[int | None, float | None]:
        """(status, Retry-After) of an attempt sent at ``t``; status None: it succeeded."""
        if self.window is not None and self.window[0] <= t < self.window[1]:
            return 503, self.window[1] - t
        if u < self.p:
            return self.status, self.retry_after_s
        return None, None


@dataclass(frozen=True, slots=True)
class Replay:
    """The server the policy is replayed against (times in run seconds)."""

    faults: Faults
    ok_ttft_s: float  # send → first token of a successful attempt on an idle server
    fail_s: float  # send → answer of a refused attempt
    service_s: float  # how long a successful request holds a slot
    slots: int  # the server's slots (max_num_seqs)
    slo_ttft_s: float | None = None  # goodput: TTFT from the intended start ≤ this
    seed: int = 0


@dataclass(frozen=True, slots=True)
class ReplayResult:
    """Per request, in arrival order."""

    intended: np.ndarray  # run seconds
    attempts: np.ndarray  # HTTP attempts (0 when throttled before the first)
    ok: np.ndarray  # bool
    ttft_s: np.ndarray  # from the intended start; nan when not ok
    good: np.ndarray  # ok and within the SLO (ok when there is none)
    last_attempt_s: np.ndarray  # run seconds of the final attempt's send (nan if none)

    def amplification(self, lo: float = -math.inf, hi: float = math.inf) -> float:
        sel = (self.intended >= lo) & (self.intended < hi)
        return float(self.attempts[sel].mean()) if sel.any() else math.nan

    def share(self, flags: np.ndarray, lo: float = -math.inf, hi: float = math.inf) -> float:
        sel = (self.intended >= lo) & (self.intended < hi)
        return float(flags[sel].mean()) if sel.any() else math.nan


def even_arrivals(stages: Sequence[tuple[float, float, float]]) -> np.ndarray:
    """Evenly spaced arrivals of ``(start_s, end_s, rate)`` stages, in run seconds."""
    parts = [
        start + np.arange(max(0, math.ceil((end - start) * rate - 1e-9))) / rate
        for start, end, rate in stages
        if rate > 0 and end > start
    ]
    return np.concatenate(parts) if parts else np.zeros(0)


def replay(
    retry: Mapping[str, Any] | str | None, scenario: Replay, arrivals: np.ndarray
) -> ReplayResult:
    """Run every request (``arrivals``, sorted run seconds) through the policy ``retry`` (a
    campaign's ``retry`` value) against ``scenario``."""
    now = [0.0]
    rng = np.random.default_rng(scenario.seed)
    draws = np.random.default_rng(scenario.seed + 1)  # the server's, apart from the jitter's
    setup = RetrySetup(parse_retry(retry), lambda: now[0], rng)
    intended = np.asarray(arrivals, dtype=np.float64)
    n = intended.size
    attempts = np.zeros(n, dtype=np.int64)
    ok = np.zeros(n, dtype=bool)
    sent_ok = np.full(n, np.nan)  # send time of the successful attempt
    last = np.full(n, np.nan)
    policies = [setup.policy() for _ in range(n)]
    # (time, order, request, attempt number): the shared budget and throttle see every attempt
    # in time order, as a worker's would.
    events: list[tuple[float, int, int, int]] = [(t, i, i, 1) for i, t in enumerate(intended)]
    heapq.heapify(events)
    order = n
    while events:
        t, _, i, number = heapq.heappop(events)
        now[0] = t
        policy = policies[i]
        if not policy.admit():
            continue  # throttled locally: the request ends failed
        attempts[i] += 1
        last[i] = t
        status, retry_after = scenario.faults.outcome(t, float(draws.random()))
        outcome = AttemptOutcome(number, status is None, status, None, retry_after)
        now[0] = t + (scenario.ok_ttft_s if status is None else scenario.fail_s)
        policy.record(outcome)
        if status is None:
            ok[i] = True
            sent_ok[i] = t
            continue
        delay = policy.next_delay(outcome)
        if delay is not None:
            order += 1
            heapq.heappush(events, (now[0] + delay, order, i, number + 1))
    wait = _fluid_wait(sent_ok, scenario.service_s, scenario.slots)
    ttft = sent_ok + wait + scenario.ok_ttft_s - intended
    good = ok.copy()
    if scenario.slo_ttft_s is not None:
        good &= np.nan_to_num(ttft, nan=math.inf) <= scenario.slo_ttft_s
    return ReplayResult(intended, attempts, ok, ttft, good, last)


def _fluid_wait(sent: np.ndarray, service_s: float, slots: int) -> np.ndarray:
    """Queue wait of each successful send (nan elsewhere) in a fluid queue of ``slots``
    servers: work arrives with each send and drains at ``slots`` seconds per second."""
    wait = np.full(sent.shape, np.nan)
    idx = np.flatnonzero(~np.isnan(sent))
    if idx.size == 0:
        return wait
    idx = idx[np.argsort(sent[idx], kind="stable")]
    backlog, prev = 0.0, float(sent[idx[0]])
    for i in idx:
        t = float(sent[i])
        backlog = max(0.0, backlog - slots * (t - prev))
        prev = t
        # Work ahead of this request, shared by the slots; the first ``slots`` start at once.
        wait[i] = max(0.0, backlog - (slots - 1) * service_s) / slots
        backlog += service_s
    return wait


def recovery_s(
    intended: np.ndarray, good: np.ndarray, outage_end: float, until: float
) -> float | None:
    """``summary.json``'s rule on the model's requests: seconds from ``outage_end`` to the first
    1-s window (by intended start, starting at the end or at a later request) with ≥ 95 %
    good; ``None`` when none ends by ``until``."""
    sel = intended >= outage_end
    t, g = intended[sel], good[sel]
    cum = np.concatenate([[0], np.cumsum(g)])
    for c in np.concatenate([[outage_end], t]):
        if c + RECOVERY_WINDOW_S > until:
            return None
        lo = int(np.searchsorted(t, c, side="left"))
        hi = int(np.searchsorted(t, c + RECOVERY_WINDOW_S, side="left"))
        if hi > lo and cum[hi] - cum[lo] >= RECOVERY_THRESHOLD * (hi - lo):
            return float(c - outage_end)
    return None
