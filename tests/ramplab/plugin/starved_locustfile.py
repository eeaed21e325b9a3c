"""``locustfiles/llm_ramp.py`` with a worker deliberately starved: a greenlet that keeps the CPU
busy and yields to the event loop only every ``HOG_MS`` milliseconds.

Nothing is faked: the hub's lag and the process's CPU the self-check reports are real, as a
locustfile doing heavy work in a user would make them. The hog runs on workers (and a local
runner), never on a master, from the test's start.
"""

from __future__ import annotations

import os
import time
from typing import Any

import gevent
from locust import events
from locust.runners import MasterRunner

from ramplab.plugin.ramp_user import RampUser
from ramplab.plugin.shape import RampShape

__all__ = ["RampShape", "RampUser"]

HOG_MS = float(os.environ.get("RAMPLAB_TEST_HOG_MS", "200"))


def _hog() -> None:
    while True:
        until = time.perf_counter() + HOG_MS / 1000.0
        while time.perf_counter() < until:
            pass
        # A real (non-zero) sleep: gevent.sleep(0) only runs ready callbacks, and a loop that
        # never polls its sockets starves the worker of everything, messages to the master too.
        gevent.sleep(0.002)


@events.test_start.add_listener
def _start_hog(environment: Any, **_: Any) -> None:
    if not isinstance(environment.runner, MasterRunner):
        gevent.spawn(_hog)
