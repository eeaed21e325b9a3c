"""The one Ctrl-C guard of a run, a search and an experiment: stop cleanly, keep what ran.

While a run is watched, the first SIGINT or SIGTERM raises ``Interrupted`` in the main thread;
the code that catches it stops the processes and saves what was measured. Once the stop has
begun (``guard.stopping``), or after the first signal, further signals are only noted — a second
Ctrl-C must not leave processes behind. ``Interrupted`` derives from ``BaseException`` as
``KeyboardInterrupt`` does: no ``except Exception`` on the way can swallow it. It is a
control-flow signal, not an error, so it stays out of ``ramplab.errors``.
"""

from __future__ import annotations

import signal
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from types import FrameType

__all__ = ["Interrupted", "SignalGuard", "interruptible"]


class Interrupted(BaseException):
    """SIGINT or SIGTERM arrived; its name is the message."""


class SignalGuard:
    """Raises ``Interrupted`` once; ``received`` names the first signal (``None``: none)."""

    def __init__(self, what: str = "the stack") -> None:
        self.what = what
        self.stopping = False
        self.received: str | None = None

    def handler(self, signum: int, frame: FrameType | None) -> None:
        name = signal.Signals(signum).name
        if self.stopping or self.received is not None:
            self.received = self.received or name
            sys.stderr.write(f"ramplab: stopping {self.what}, please wait\n")
            return
        self.received = name
        raise Interrupted(name)


@contextmanager
def interruptible(what: str = "the stack") -> Iterator[SignalGuard]:
    """SIGINT and SIGTERM handled by a ``SignalGuard`` inside the block, restored after it."""
    guard = SignalGuard(what)
    previous = {s: signal.signal(s, guard.handler) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield guard
    finally:
        for signum, old in previous.items():
            signal.signal(signum, old)
