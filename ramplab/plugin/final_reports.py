"""The workers' last records reach the master before it quits.

Locust's headless master ends a run with ``MasterRunner.quit()``: it tells each worker to quit,
gives them half a second (``gevent.sleep(0.5)``) and stops listening. A worker cuts the requests
it still has in flight as it quits and sends their records then; on a loaded machine half a
second was not always enough, and those requests — the slowest, the tail — had no record (a CI
run: 4 of 12 dispatched requests, when the master was interrupted).

So the master asks first. ``quit`` is wrapped (as ``ondemand.keep_users`` wraps ``stop_users``):
it sends ``FINAL_MESSAGE`` to every worker, which stops dispatching, stops its users (each
request in flight gets its cut record) and sends its records with a last progress report marked
``final``; the master waits for every worker's, at most ``FINAL_WAIT_S``, then quits as
Locust does.

"Every worker" includes one Locust calls *missing*: a worker starved of CPU (a real engine on the
same two cores left the workers ~1 % of a CPU) misses Locust's three heartbeats and is marked
missing while alive, and a CI run lost all six records of such a worker. So a worker marked
missing less than ``MISSING_GRACE_S`` before the stop is waited for too; one silent for longer
(killed) is not. A worker that does not answer in time (hung, starved) is named in the log, and
the master records what its last report had in flight (``MasterEngine.unfinished_records``).
"""

from __future__ import annotations

import logging
import time
from typing import TYPE_CHECKING, Any

import gevent
from gevent.event import Event
from locust.runners import STATE_MISSING

if TYPE_CHECKING:
    from ramplab.plugin.master import MasterEngine

log = logging.getLogger("ramplab.plugin")

FINAL_MESSAGE = "ramplab_final"
# Cutting a request and sending its record takes milliseconds; the bound is for a worker that
# is starved or hung, which the run waits for no longer than this.
FINAL_WAIT_S = 15.0
POLL_S = 0.05
# A missing worker heard from this recently is still waited for (Locust marks a worker missing
# after three silent seconds; a killed one is silent for good).
MISSING_GRACE_S = 10.0


def quit_after_final_reports(runner: Any, master: MasterEngine) -> None:
    """Make ``runner.quit`` collect every live worker's last records first (the docstring).

    ``quit`` may be called twice at once (Ctrl-C in the main greenlet while the shape's greenlet
    ends the run): the second caller waits for the first's collection, then both quit as
    Locust's own ``quit`` allows."""
    quit = runner.quit
    collected = Event()

    def quit_once_reported() -> None:
        if not master.stopping:
            master.stopping = True
            try:
                collect(runner, master)
            finally:
                collected.set()
        collected.wait()
        quit()

    runner.quit = quit_once_reported


def awaited(runner: Any) -> set[str]:
    """The workers whose last report the master waits for: the live ones, and the missing ones
    heard from within ``MISSING_GRACE_S`` (Locust's ``heartbeat`` counts down a beat a second
    from its liveness once a worker is silent, so ``-MISSING_GRACE_S`` is that many seconds
    past missing)."""
    return {
        str(node.id)
        for node in runner.clients.values()
        if node.state != STATE_MISSING or node.heartbeat >= -MISSING_GRACE_S
    }


def collect(runner: Any, master: MasterEngine) -> None:
    """Ask every worker for its last report and wait for them (at most FINAL_WAIT_S).

    Who is waited for is decided once, at the stop: a worker silent then but heard from
    recently is waited for until it answers or the deadline passes, however long its silence
    grows meanwhile; one that Locust removes (it quit) is not waited for any longer."""
    expected = awaited(runner)
    if not expected:
        return
    runner.send_message(FINAL_MESSAGE, None)
    deadline = time.monotonic() + FINAL_WAIT_S
    while True:
        connected = {str(node.id) for node in runner.clients.values()}
        waiting = sorted(
            w for w in expected & connected if not master.progress.get(w, {}).get("final")
        )
        if not waiting:
            return
        if time.monotonic() >= deadline:
            log.warning(
                "workers %s sent no last report within %.0f s: the requests in flight in their "
                "last reports are recorded as unfinished",
                waiting,
                FINAL_WAIT_S,
            )
            return
        gevent.sleep(POLL_S)
