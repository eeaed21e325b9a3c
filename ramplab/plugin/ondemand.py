"""Users on demand: an arrival that finds no free user gets a new Locust user of its own.

The master's sizing (``ramplab/load/sizing.py``) only *pre-warms*: Little's law follows the
observed mean duration with a lag, and when a step's TTLT jumps (the server saturating, a slow
engine) the estimate falls far short for seconds — a field run dropped a quarter of its arrivals
with a third of its cap running. So when the pacer finds no parked user, the worker starts one
there and then, up to its share of ``--ramplab-max-users``, and hands it the arrival; only an
arrival that finds the worker at its cap is dropped (counted, as before).

Why a real Locust user, spawned by the worker's own runner (``Runner.spawn_users``), and not a
bare greenlet: Locust then counts it — the worker reports it to the master with its other users,
the web UI and the master's user count show it, and the run's stop kills it with the rest (its
request in flight gets an ``unfinished`` record like any other). What that asks of the rest:

- **The shape's target follows.** Each worker reports how many users it runs; the master's target
  is never below ``workers × the most any worker runs`` (capped), so the spawn messages Locust
  sends (an even split) never ask a worker for fewer users than it has (``MasterEngine``).
- **No user is stopped while the run lasts.** The target can still lag by one report: the
  master may send a spawn message computed before it heard of a user started on demand, and
  Locust's answer to "fewer users" is to kill some, requests in flight included. ``keep_users``
  makes a ramp process's runner stop users only when Locust stops the whole test (its state is
  ``cleanup`` then); a smaller target meanwhile is ignored, the same rule ``wanted_users`` already
  keeps (users never decrease during a run).
- **The cap, per worker.** A worker grows to ``sizing.worker_cap``: ``max_users // workers``
  (the live workers of the plan's last epoch), at least one. Locust's even split may give a
  worker one more user than that, never the sum over workers more than the cap.
- **Every arrival accounted for.** The arrival is *dispatched* when the new user takes it, not
  when the user is started: if Locust kills the user before its greenlet first runs (the run
  stopped in between), ``leftovers`` gives the arrival back and the engine counts it as dropped,
  so ``scheduled = dispatched + dropped + lost`` still holds.

Rejected: a bare greenlet outside Locust's users (Locust's counts would lie and its stop would
not reach it); asking the master for users (a message and a shape tick away: the arrival would
wait a second or be dropped anyway); spawning the whole cap up front (1,000 parked users by
default, and the user count would always read the cap, saying nothing of the need).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from locust.runners import STATE_CLEANUP

from ramplab.load.pacer import Arrival
from ramplab.plugin.dispatch import Dispatcher

__all__ = ["UsersOnDemand", "keep_users"]

log = logging.getLogger("ramplab.plugin")


class UsersOnDemand:
    """Starts a user on ``runner`` for an arrival no parked user could take, below ``cap()``."""

    def __init__(self, runner: Any, dispatcher: Dispatcher, cap: Callable[[], int]) -> None:
        self.runner = runner
        self.dispatcher = dispatcher
        self.cap = cap
        # The class of the users to start: the ramp user's own, learnt from the first one made.
        self.user_class: str | None = None
        self.started = 0  # users started on demand
        self._handed: dict[object, Arrival] = {}  # new user → the arrival it was started for

    def start_for(self, arrival: Arrival) -> bool:
        """Start a user for ``arrival``; ``False`` at the cap (the arrival is then dropped)."""
        if self.user_class is None or self.runner.user_count >= self.cap():
            return False
        # Locust builds the user and spawns its greenlet without yielding: the arrival is
        # bound to it before its first task runs.
        (user,) = self.runner.spawn_users({self.user_class: 1})
        self._handed[user] = arrival
        self.dispatcher.begin()  # busy from now: the master's drain waits for it
        self.started += 1
        return True

    def take(self, user: object) -> Arrival | None:
        """The arrival ``user`` was started for, once; ``None`` for any other user."""
        return self._handed.pop(user, None)

    def leftovers(self) -> list[Arrival]:
        """The arrivals whose users were killed before they took them (the run stopped)."""
        left = list(self._handed.values())
        self._handed.clear()
        for _ in left:
            self.dispatcher.done()
        return left


def keep_users(runner: Any) -> None:
    """Let ``runner`` stop users only when Locust stops the whole test (see the docstring)."""
    stop_users = runner.stop_users

    def stop_users_at_the_end(user_classes_stop_count: dict[str, int]) -> None:
        if runner.state == STATE_CLEANUP:
            stop_users(user_classes_stop_count)
        elif any(user_classes_stop_count.values()):
            log.debug("kept %s users Locust asked to stop mid-run", user_classes_stop_count)

    runner.stop_users = stop_users_at_the_end
