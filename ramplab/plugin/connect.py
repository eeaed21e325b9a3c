"""A worker that cannot reach its master stops with one line naming the address it tried.

Locust's worker connects inside its runner's constructor and retries for five minutes (60 × 5 s)
before it gives up with an empty ``ConnectionError``; ZeroMQ connects lazily, so an address no
one listens on looks the same as a master still starting. ramplab bounds that wait with
``--master-timeout``: a watchdog greenlet, started as soon as Locust has parsed the options (the
runner does not exist yet), stops the process with ``RUN_FAILED`` unless the master acknowledged
the worker (Locust then fires ``init``) in time. The connect wait is a gevent wait, so the
watchdog runs while Locust's own loop retries.
"""

from __future__ import annotations

import os
import socket
import sys
from typing import Any

import gevent

from ramplab.errors import UsageError
from ramplab.exitcodes import ExitCode
from ramplab.options import schema

__all__ = ["OPTION", "ConnectWatch"]

OPTION = "--master-timeout"


class ConnectWatch:
    """Watches one worker process's first connection to its master."""

    def __init__(self) -> None:
        self._greenlet: gevent.Greenlet | None = None

    def wrap(self, parser: Any) -> None:
        """Start watching once ``parser`` has parsed Locust's command line (and only then: the
        options say whether this process is a worker, and where its master is)."""
        parse = parser.parse_args

        def parse_and_watch(*args: Any, **kwargs: Any) -> Any:
            parsed = parse(*args, **kwargs)
            self.start(parsed)
            return parsed

        parser.parse_args = parse_and_watch

    def start(self, parsed: Any) -> None:
        if not getattr(parsed, "worker", False) or self._greenlet is not None:
            return
        address = f"{parsed.master_host}:{parsed.master_port}"
        try:
            timeout_s = float(schema.value(parsed, schema.option(OPTION)))
            socket.getaddrinfo(parsed.master_host, parsed.master_port, type=socket.SOCK_STREAM)
        except UsageError as exc:
            _stop(str(exc), ExitCode.USAGE)
        except (OSError, UnicodeError) as exc:
            # ZeroMQ would fail on a name it cannot resolve with a traceback of its own.
            _stop(f"worker: cannot resolve the Locust master's host {address}: {exc}")
        self._greenlet = gevent.spawn_later(timeout_s, _give_up, address, timeout_s)

    def connected(self) -> None:
        """The master acknowledged this worker (Locust's ``init``)."""
        if self._greenlet is not None:
            self._greenlet.kill(block=False)


def _give_up(address: str, timeout_s: float) -> None:
    _stop(
        f"worker: no answer from the Locust master at tcp://{address} within {timeout_s:g} s "
        f"({OPTION}); is the master running, and are --master-host/--master-port right?"
    )


def _stop(message: str, code: ExitCode = ExitCode.RUN_FAILED) -> None:
    sys.stderr.write(f"ramplab: {message}\n")
    sys.stderr.flush()
    os._exit(
        int(code)
    )  # Locust's connect loop holds the main greenlet; SystemExit would not end it
