"""Failures injected on purpose (§4.4), reproducible under a seed.

Before a request reaches the scheduler, in this order:

1. **outage windows** — ``faults.outages`` as ``[{start_s, duration_s}]`` relative to the fault
   clock's origin (process start, or the last admin change of ``faults``): every request inside a
   window gets 503 with ``Retry-After`` equal to the time left in the window;
2. **overload shedding** — with ``shed_waiting_above = K > 0``, a request that finds ``K`` or more
   requests already waiting for a scheduler slot gets 503 ``overloaded`` at once;
3. **ratios** — draw ``u`` in ``[0, 1)``: ``u < ratio_429`` → 429, ``u < ratio_429 + ratio_503``
   → 503, both with ``Retry-After = retry_after_s`` (and the 429 with ``x-ratelimit-*`` at zero,
   as the OpenAI API sends).

Streams that pass may fail **mid-stream** with probability ``midstream_ratio`` after
``midstream_after_tokens`` tokens: ``error_event`` sends ``event: error`` + ``data: {"error":…}``
then ``data: [DONE]``; ``drop`` closes the connection without ending the chunked body.

Determinism: draw ``n`` of stream ``s`` is ``blake2b(f"{seed}:{s}:{n}")`` as a 64-bit fraction —
counter-based, not a shared generator, so the ``n``-th request of a process always meets the same
fate whatever else consumed randomness; ``draw()`` is public so tests predict exact counts. With
several worker processes each has its own counters (and origin), so counts are exact per process.
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Callable

from target_service.errors import APIError, RateLimited, Unavailable
from target_service.metrics import TargetMetrics
from target_service.settings import FaultSettings


def draw(seed: int, stream: str, n: int) -> float:
    digest = hashlib.blake2b(f"{seed}:{stream}:{n}".encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big") / 2**64


class FaultInjector:
    def __init__(
        self,
        settings: FaultSettings,
        metrics: TargetMetrics,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.settings = settings
        self._metrics = metrics
        self._clock = clock
        self.reset()

    def reset(self) -> None:
        """Restart the counters and the outage clock (at start and on an admin change)."""
        self.origin = self._clock()
        self._before = 0
        self._mid = 0

    def before_stream(self, waiting: int) -> APIError | None:
        s = self.settings
        elapsed = self._clock() - self.origin
        for outage in s.outages:
            end = outage.start_s + outage.duration_s
            if outage.start_s <= elapsed < end:
                self._metrics.faults_total.labels("outage_503").inc()
                return Unavailable(
                    "The service is temporarily unavailable (injected outage)",
                    code="service_unavailable",
                    retry_after_s=end - elapsed,
                )
        if s.shed_waiting_above and waiting >= s.shed_waiting_above:
            self._metrics.faults_total.labels("shed_503").inc()
            return Unavailable(
                "The engine is overloaded; retry later",
                code="overloaded",
                retry_after_s=s.retry_after_s,
            )
        if not (s.ratio_429 or s.ratio_503):
            return None
        u = draw(s.seed, "before", self._before)
        self._before += 1
        if u < s.ratio_429:
            self._metrics.faults_total.labels("ratio_429").inc()
            return RateLimited(
                "Rate limit reached for requests (injected)",
                code="rate_limit_exceeded",
                retry_after_s=s.retry_after_s,
                headers={"x-ratelimit-remaining-requests": "0"},
            )
        if u < s.ratio_429 + s.ratio_503:
            self._metrics.faults_total.labels("ratio_503").inc()
            return Unavailable(
                "The server is overloaded or not ready yet (injected)",
                code="service_unavailable",
                retry_after_s=s.retry_after_s,
            )
        return None

    def midstream(self) -> str | None:
        """The failure this stream will meet, decided when it starts: a mode, or ``None``."""
        s = self.settings
        if not s.midstream_ratio:
            return None
        u = draw(s.seed, "mid", self._mid)
        self._mid += 1
        if u < s.midstream_ratio:
            self._metrics.faults_total.labels(f"midstream_{s.midstream_mode}").inc()
            return s.midstream_mode
        return None
