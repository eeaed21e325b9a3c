"""``locustfiles/llm_ramp.py`` whose import keeps the CPU busy for ``RAMPLAB_TEST_IMPORT_S``
seconds, without yielding: what a heavy dependency does on a slow or busy machine.

Regression fixture: gevent timers count from the event loop's cached time, and the loop does not
turn during an import, so a timer armed right after one fired that much too early (the worker's
``--master-timeout`` watchdog, Locust's ``-t``).
"""

from __future__ import annotations

import os
import time

from ramplab import RampShape, RampUser

_until = time.monotonic() + float(os.environ.get("RAMPLAB_TEST_IMPORT_S", "0"))
while time.monotonic() < _until:
    pass

__all__ = ["RampShape", "RampUser"]
