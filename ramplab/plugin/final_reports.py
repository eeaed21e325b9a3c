"""The workers' last records reach the master before it quits.

Locust's headless master ends a run with ``MasterRunner.quit()``: it tells each worker to quit,
gives them half a second (``gevent.sleep(0.5)``) and stops listening. A worker cuts the requests
it still has in flight as it quits and sends their records then; on a loaded machine half a
second was not always enough, and those requests — the slowest, the tail — had no record (a CI
run: 4 of 12 dispatched requests, when the master was interrupted).

So the master asks first. ``quit`` is wrapped (as ``ondemand.keep_users`` wraps ``stop_users``):
it sends ``FINAL_MESSAGE`` to every worker, which stops dispatching, stops its users (each
request in flight gets its cut record) and sends its records with a last progress report marked
``final``; the master waits for every live worker's, at most ``FINAL_WAIT_S``, then quits as
Locust does. A worker that does not answer in time (hung, starved) is named in the log, and what
it had in flight shows in the summary as dispatched requests with no record.
"""

from __future__ import annotations

import logging
import time
from typing import TYPE_CHECKING, Any

import gevent
from gevent.event import Event

if TYPE_CHECKING:
    from ramplab.plugin.master import MasterEngine

log = logging.getLogger("ramplab.plugin")

FINAL_MESSAGE = "ramplab_final"
# Cutting a request and sending its record takes milliseconds; the bound is for a worker that
# is starved or hung, which the run waits for no longer than this.
FINAL_WAIT_S = 15.0
POLL_S = 0.05


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


def collect(runner: Any, master: MasterEngine) -> None:
    """Ask every live worker for its last report and wait for them (at most FINAL_WAIT_S)."""
    if not master.live_workers():
        return
    runner.send_message(FINAL_MESSAGE, None)
    deadline = time.monotonic() + FINAL_WAIT_S
    while True:
        waiting = [w for w in master.live_workers() if not master.progress.get(w, {}).get("final")]
        if not waiting:
            return
        if time.monotonic() >= deadline:
            log.warning(
                "workers %s sent no last report within %.0f s: the requests they had in flight "
                "have no record",
                waiting,
                FINAL_WAIT_S,
            )
            return
        gevent.sleep(POLL_S)
