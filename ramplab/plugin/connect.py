"""A worker that cannot reach its master stops with one line naming the address it tried.

Locust's worker connects inside its runner's constructor and retries for five minutes (60 × 5 s)
before it gives up with an empty ``ConnectionError``; ZeroMQ connects lazily, so an address no
one listens on looks the same as a master still starting, and a host name that does not resolve
is retried too (a master whose DNS entry appears later). ramplab bounds that wait with
``--master-timeout``: a watchdog greenlet, started as soon as Locust has parsed the options (the
runner does not exist yet), stops the process with ``RUN_FAILED`` unless the master acknowledged
the worker (Locust then fires ``init``) in time. The connect wait is a gevent wait, so the
watchdog runs while Locust's own loop retries.
"""

from __future__ import annotations

import os
import socket
import sys
from typing import Any, NoReturn

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
        try:
            timeout_s = float(schema.value(parsed, schema.option(OPTION)))
        except UsageError as exc:
            _stop(str(exc), ExitCode.USAGE)
        host, port = str(parsed.master_host), int(parsed.master_port)
        # spawn_later counts from the loop's cached "now", which is as old as the hub (made
        # before Locust's and the locustfile's imports): on a busy machine the watchdog fired
        # at once and ended a worker that was connecting in time. Counted from now instead.
        gevent.get_hub().loop.update_now()
        self._greenlet = gevent.spawn_later(timeout_s, _give_up, host, port, timeout_s)

    def connected(self) -> None:
        """The master acknowledged this worker (Locust's ``init``)."""
        if self._greenlet is not None:
            self._greenlet.kill(block=False)


def _give_up(host: str, port: int, timeout_s: float) -> None:
    # Locust keeps retrying a name it cannot resolve (a master whose DNS entry is not there
    # yet); by now the name is the likelier mistake, so say which of the two it was.
    try:
        socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
        why = "no answer from"
    except (OSError, UnicodeError):
        why = "cannot resolve the host of"
    _stop(
        f"worker: {why} the Locust master at tcp://{host}:{port} within {timeout_s:g} s "
        f"({OPTION}); is the master running, and are --master-host/--master-port right?"
    )


def _stop(message: str, code: ExitCode = ExitCode.RUN_FAILED) -> NoReturn:
    sys.stderr.write(f"ramplab: {message}\n")
    sys.stderr.flush()
    os._exit(
        int(code)
    )  # Locust's connect loop holds the main greenlet; SystemExit would not end it
