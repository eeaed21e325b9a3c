"""Each worker's wall clock against the master's, measured NTP-style over Locust's messages.

Why it matters: the master sends the plan's start as a Unix time and every worker maps it onto its
own ``time.time()`` (``worker.py``), so a worker whose clock is off by θ runs the whole schedule
θ early or late. On one host θ is 0; across hosts it is whatever NTP left, and nothing else in a
run would show it.

The exchange is the one of NTP (RFC 5905 §8), its arithmetic in ``results.clock_offset``: the
master stamps ``t0`` and sends a ping to one worker, the worker stamps ``t1`` on receipt and
``t2`` as it answers, the master stamps ``t3`` on the answer. Of the last ``KEEP`` samples of a
worker the one with the smallest round trip is reported.

A worker says hello once its answer handler is registered (Locust connects a worker before
its ``init`` listeners have run, and warns about a message no handler takes); the master then
probes it ``BURST`` times and every ``PROBE_S`` afterwards, while it is not missing. The offset is
measured and reported (``summary.json`` ``clocks``), not applied: a worker paces on its own
clock, and a run whose offsets exceed what its figures can stand must be fixed at the hosts (NTP).
"""

from __future__ import annotations

import logging
import time
from collections import deque
from collections.abc import Callable, Mapping
from typing import Any

import gevent
from locust.runners import STATE_MISSING

from ramplab.results.clock_offset import ClockSample, estimate, surely_off_by
from ramplab.results.summary import ClockOffset

__all__ = ["HELLO", "PING", "PONG", "ClockProbe", "answer_pings"]

HELLO = "ramplab_clock_hello"
PING = "ramplab_clock_ping"
PONG = "ramplab_clock_pong"
PROBE_S = 2.0
BURST = 3
BURST_GAP_S = 0.2
KEEP = 16
WARN_MS = 5.0  # clocks surely this far apart shift a worker's schedule visibly: say so once
log = logging.getLogger("ramplab.plugin")

Clock = Callable[[], float]


class ClockProbe:
    """On the master: pings every live worker, keeps each one's recent samples."""

    def __init__(self, runner: Any, clock: Clock = time.time) -> None:
        self.runner = runner
        self.clock = clock
        self.samples: dict[str, deque[ClockSample]] = {}
        self.counted: dict[str, int] = {}  # every sample ever taken, per worker
        self.answering: set[str] = set()  # workers that said hello
        self.warned: set[str] = set()
        runner.register_message(PONG, self._on_pong)
        runner.register_message(HELLO, self._on_hello)
        gevent.spawn(self._probe_forever)  # for the process's life, as Locust's heartbeats

    def ping(self, worker: str) -> None:
        self.runner.send_message(PING, {"t0": self.clock()}, client_id=worker)

    def offsets(self) -> dict[str, ClockOffset]:
        """Each worker's estimate; ``samples`` counts every exchange of the process's life."""
        result: dict[str, ClockOffset] = {}
        for worker, kept in sorted(self.samples.items()):
            found = estimate(kept)
            if found is not None:
                result[worker] = found.model_copy(update={"samples": self.counted[worker]})
        return result

    def _on_pong(self, environment: Any, msg: Any, **_: Any) -> None:
        t3 = self.clock()
        data: Mapping[str, Any] = msg.data
        sample = ClockSample(float(data["t0"]), float(data["t1"]), float(data["t2"]), t3)
        worker = str(msg.node_id)
        kept = self.samples.setdefault(worker, deque(maxlen=KEEP))
        kept.append(sample)
        self.counted[worker] = self.counted.get(worker, 0) + 1
        found = estimate(kept) if len(kept) >= BURST and worker not in self.warned else None
        if found is not None and surely_off_by(found) > WARN_MS:
            self.warned.add(worker)
            log.warning(
                "worker %s: its clock is %+.1f ± %.1f ms off the master's, so its share of the "
                "schedule runs that much off; synchronise the hosts' clocks (NTP)",
                worker, found.offset_ms, found.uncertainty_ms,
            )  # fmt: skip

    def _on_hello(self, environment: Any, msg: Any, **_: Any) -> None:
        worker = str(msg.node_id)
        self.answering.add(worker)
        gevent.spawn(self._burst, worker)

    def _burst(self, worker: str) -> None:
        for _ in range(BURST):
            gevent.sleep(BURST_GAP_S)
            self._safe_ping(worker)

    def _probe_forever(self) -> None:
        while True:
            gevent.sleep(PROBE_S)
            for node in list(self.runner.clients.values()):
                if node.state != STATE_MISSING and str(node.id) in self.answering:
                    self._safe_ping(str(node.id))

    def _safe_ping(self, worker: str) -> None:
        try:
            self.ping(worker)
        except Exception:  # a worker that just left; the next round tries the others again
            log.debug("clock ping to %s failed", worker, exc_info=True)


def answer_pings(runner: Any, clock: Clock = time.time) -> None:
    """On a worker: answer each ping at once with the receipt and answer times."""

    def on_ping(environment: Any, msg: Any, **_: Any) -> None:
        t1 = clock()
        runner.send_message(PONG, {"t0": msg.data["t0"], "t1": t1, "t2": clock()})

    runner.register_message(PING, on_ping)
    runner.send_message(HELLO, {})
