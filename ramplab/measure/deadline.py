"""A request's deadline, counted from its send, under every blocking socket operation.

Checked only as body bytes arrive, the request timeout (``--request-timeout``) would leave a
server that never answers to the read timeout, and let one that sends its head slowly or
trickles its body hold a request far past its budget. So every blocking operation of the
HTTP/1.1 exchange — connect, the TLS handshake, writing the request, each read of the head and
the body — gets the socket timeout ``min(its own limit, time left until the deadline)``: the
request ends at its timeout whatever the server does, and the per-operation limits keep their
meaning (the read timeout is the longest silence between two reads). The timeout raised names
the limit that fired, so a record says which one it was.

The same code runs in threads and under gevent: it only sets socket timeouts, which gevent's
cooperative sockets honour as the OS's do.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TypeVar

import httpcore

Clock = Callable[[], float]
T = TypeVar("T")
# What each operation raises when its time is up, as httpcore raises them.
_TIMEOUTS: dict[str, type[httpcore.TimeoutException]] = {
    "connect": httpcore.ConnectTimeout,
    "write": httpcore.WriteTimeout,
    "read": httpcore.ReadTimeout,
}


@dataclass(frozen=True, slots=True)
class Limit:
    """The socket timeout of one blocking operation, and which configured limit set it."""

    seconds: float | None  # None: block without a limit
    name: str  # "connect", "write", "read", or "request" (the deadline)
    configured_s: float | None  # the limit as configured (the whole request's, for "request")
    operation: str  # "connect", "write" or "read": what httpcore calls the operation

    def expired(self, doing: str) -> httpcore.TimeoutException:
        """The timeout to raise when this limit fired while ``doing`` (e.g. "reading the body")."""
        limit = "no limit" if self.configured_s is None else f"{self.configured_s:g} s"
        text = f"{self.name} timeout ({limit}) passed while {doing}"
        return _TIMEOUTS[self.operation](text)


@dataclass(frozen=True, slots=True)
class Deadline:
    """When a request must be over by (monotonic seconds), on ``clock``."""

    at: float | None  # None: no request timeout
    total_s: float | None
    clock: Clock = time.perf_counter

    @classmethod
    def after(cls, total_s: float | None, start: float, clock: Clock) -> Deadline:
        """The deadline ``total_s`` after ``start`` (a reading of ``clock``); none for None."""
        return cls(None if total_s is None else start + total_s, total_s, clock)

    def left(self) -> float | None:
        """Seconds until the deadline (negative once past); None without one."""
        return None if self.at is None else self.at - self.clock()

    def limit(self, own_s: float | None, operation: str) -> Limit:
        """The timeout for the next ``operation``: its own limit, or the time left if shorter."""
        left = self.left()
        if left is not None and (own_s is None or left < own_s):
            return Limit(max(left, 0.0), "request", self.total_s, operation)
        return Limit(own_s, operation, own_s, operation)

    def run(
        self, own_s: float | None, operation: str, doing: str, call: Callable[[float | None], T]
    ) -> T:
        """``call(timeout)`` with the timeout of :meth:`limit`; its timeout re-raised naming the
        limit that fired and what was being done."""
        # Once per read of every stream: no ``Limit`` is built unless one fires.
        left = None if self.at is None else self.at - self.clock()
        if left is None or (own_s is not None and own_s <= left):
            try:
                return call(own_s)
            except httpcore.TimeoutException as exc:
                raise Limit(own_s, operation, own_s, operation).expired(doing) from exc
        request = Limit(max(left, 0.0), "request", self.total_s, operation)
        if left <= 0.0:
            raise request.expired(doing)  # a zero socket timeout would not block, not time out
        try:
            return call(left)
        except httpcore.TimeoutException as exc:
            raise request.expired(doing) from exc

    def check(self, doing: str) -> None:
        """Raise the request timeout if the deadline has passed (between blocking operations)."""
        if self.at is not None and self.clock() >= self.at:
            raise Limit(0.0, "request", self.total_s, "read").expired(doing)


NO_DEADLINE = Deadline(None, None)
