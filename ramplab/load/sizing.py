"""How many users a worker needs for its share of the rate: Little's law, Erlang B, headroom.

In steady state the number of requests in flight is ``L = λ · W`` (arrival rate × mean time in
the system). An open-loop pacer needs at least that many free users, or it drops arrivals. Two
margins on top of the mean, whichever asks for more:

- ``headroom`` (× ``L``) covers a mean duration that is still growing (the server slowing down
  as the rate climbs, which the observed mean only shows with a lag) and burstier-than-Poisson
  arrivals;
- Erlang B covers Poisson bursts: with ``c`` users and Poisson arrivals an arrival finds no free
  user with probability ``B(c, L)`` whatever the distribution of ``W`` (M/G/c/c is insensitive
  to it), so we take the fewest ``c`` with ``B(c, L) ≤ max_loss``. A multiplicative headroom
  alone is far too thin at small ``L``: 2 users for ``L = 1`` lose 20 % of the arrivals.

A third floor covers the generator itself: when a worker's event loop stalls (garbage
collection, spawning users, a CPU shared with other processes) every arrival that fell due meanwhile
is dispatched at once when it wakes, so a worker keeps at least ``rate/n × stall_s`` users
(``STALL_S`` = 0.25 s by default: 75 users for 300 QPS on one worker) — without it, a 100 ms stall
at 300 QPS drops most of 30 arrivals whenever the observed durations are short.

Sizing is per worker (each paces ``1/n`` of the rate with its own users), then multiplied by the
number of workers, because Locust spreads users evenly and a worker cannot lend a free user to
another. ``max_users`` bounds the total; arrivals dropped beyond it are counted, which is the
honest outcome.

The sizing only pre-warms: an arrival that finds no free user below the cap gets a user started
for it on the spot (``ramplab/plugin/ondemand.py``). Pre-warming still matters — a user started
on demand sends its request a little late (its construction and first switch), and a worker
that must start dozens at once (a TTLT jump) spends its event loop on them.

**Warm start.** Before the first stream has finished there is no observed ``W``. The prior is
``prior_duration_s(max_tokens)``: ``PRIOR_TTFT_S`` + ``max_tokens`` × ``PRIOR_ITL_S`` (1 s +
50 ms per token). That is slower than most served models (10–40 ms per token) and than the
reference target's default (20 ms), so the first step errs on the side of too many users: an
idle user costs one parked greenlet, a missing one costs dropped arrivals. Once durations are
observed their mean replaces the prior.
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Iterable

PRIOR_TTFT_S = 1.0
PRIOR_ITL_S = 0.05
DEFAULT_MAX_LOSS = 1e-3
STALL_S = 0.25


def prior_duration_s(max_tokens: int) -> float:
    """A conservative guess of a stream's duration before any has been observed."""
    return PRIOR_TTFT_S + max(max_tokens, 1) * PRIOR_ITL_S


def worker_cap(max_users: int, workers: int) -> int:
    """One worker's share of ``max_users`` over ``workers`` live workers (at least one): the
    floor, so that with Locust's even split (which may give some workers one more) the users
    over all workers never pass ``max_users``."""
    return max(1, max_users // max(1, workers))


def erlang_b(servers: int, load: float) -> float:
    """Erlang-B blocking: the share of Poisson arrivals that find all ``servers`` busy.

    Uses the stable recurrence ``B(0) = 1``, ``B(c) = A·B(c−1) / (c + A·B(c−1))``.
    """
    if servers < 0 or load < 0:
        raise ValueError(f"need servers ≥ 0 and load ≥ 0; got {servers}, {load}")
    blocking = 1.0
    for c in range(1, servers + 1):
        blocking = load * blocking / (c + load * blocking)
    return blocking


def erlang_b_servers(load: float, max_loss: float) -> int:
    """Fewest servers ``c`` with Erlang-B blocking ``B(c, load) ≤ max_loss``."""
    if not (load >= 0 and 0 < max_loss < 1):
        raise ValueError(f"need load ≥ 0 and 0 < max_loss < 1; got {load}, {max_loss}")
    servers, blocking = 0, 1.0
    while blocking > max_loss:
        servers += 1
        blocking = load * blocking / (servers + load * blocking)
    return servers


def size_users(
    rate: float,
    duration_s: float,
    *,
    headroom: float = 1.5,
    max_users: int,
    min_users: int = 1,
    workers: int = 1,
    max_loss: float | None = None,
    stall_s: float = 0.0,
) -> int:
    """Users over all ``workers``: per worker the largest of ``ceil(L/n × headroom)``, Erlang B
    and ``ceil(rate/n × stall_s)``, times ``workers``, clamped to ``[min_users, max_users]``.

    ``L = rate × duration_s``; without ``max_loss`` Erlang B does not apply.
    """
    if not (rate >= 0 and duration_s >= 0 and headroom >= 1):
        raise ValueError(
            f"need rate ≥ 0, duration ≥ 0, headroom ≥ 1; got {rate}, {duration_s}, {headroom}"
        )
    if not 1 <= min_users <= max_users:
        raise ValueError(f"need 1 ≤ min_users ≤ max_users, got {min_users}, {max_users}")
    if workers < 1:
        raise ValueError(f"need workers ≥ 1, got {workers}")
    load = rate * duration_s / workers
    # The epsilon keeps float noise (e.g. 10 × 0.3 × 1.5 = 4.500000000000001) from adding a user.
    per_worker = math.ceil(load * headroom - 1e-9)
    if max_loss is not None and load > 0:
        per_worker = max(per_worker, erlang_b_servers(load, max_loss))
    per_worker = max(per_worker, math.ceil(rate / workers * stall_s - 1e-9))
    return min(max_users, max(min_users, per_worker * workers))


class UserSizer:
    """Sizing from the mean of the last ``window`` observed durations (the prior before any)."""

    def __init__(
        self,
        *,
        max_users: int,
        default_duration_s: float = 2.0,
        headroom: float = 1.5,
        min_users: int = 1,
        window: int = 500,
        max_loss: float | None = None,
        stall_s: float = 0.0,
    ) -> None:
        self.max_users = max_users
        self.stall_s = stall_s
        self.min_users = min_users
        self.headroom = headroom
        self.default_duration_s = default_duration_s
        self.max_loss = max_loss
        self._durations: deque[float] = deque(maxlen=window)

    def observe(self, duration_s: float) -> None:
        """A finished request's time in the system (intended start → outcome, waits included)."""
        self._durations.append(duration_s)

    def observe_many(self, durations_s: Iterable[float]) -> None:
        self._durations.extend(durations_s)

    @property
    def observed(self) -> int:
        return len(self._durations)

    def duration_s(self) -> float:
        """The mean observed duration, or the warm-start default before any observation."""
        if not self._durations:
            return self.default_duration_s
        return sum(self._durations) / len(self._durations)

    def users(self, rate: float, workers: int = 1) -> int:
        return size_users(
            rate,
            self.duration_s(),
            headroom=self.headroom,
            max_users=self.max_users,
            min_users=self.min_users,
            workers=workers,
            max_loss=self.max_loss,
            stall_s=self.stall_s,
        )
