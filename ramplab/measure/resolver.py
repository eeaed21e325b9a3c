"""Name resolution through a DNS server named by the user, over UDP, timed like any phase.

``getaddrinfo`` asks whatever ``/etc/resolv.conf`` names, which a load test should not have to
change; with ``--resolver HOST:PORT`` the client sends its own A query to that server instead
(one UDP round trip, dnslib's wire format), so a resolver's latency — a slow one the local stack
starts on purpose (``stack.dns``) or a real one — shows in the request's ``dns`` phase. Under
Locust the socket is gevent's, so a user waiting for an answer lets the others run.
"""

from __future__ import annotations

import ipaddress
import itertools
import os
import socket
import threading

from dnslib import QTYPE, RCODE, DNSRecord

from ramplab.errors import ResolveError

__all__ = ["DnsResolver"]


class DnsResolver:
    """A's of a name from one DNS server; safe to share between threads and greenlets."""

    def __init__(self, server: tuple[str, int]) -> None:
        self.server = server
        self._ids = itertools.count(os.getpid() % 65536)
        self._lock = threading.Lock()

    def _next_id(self) -> int:
        with self._lock:
            return next(self._ids) % 65536

    def resolve(self, name: str, timeout_s: float | None = 5.0) -> str:
        """The first IPv4 address of ``name``; an address literal is returned as it is."""
        try:
            return str(ipaddress.ip_address(name))
        except ValueError:
            pass
        query = DNSRecord.question(name, "A")
        query.header.id = self._next_id()
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
            sock.settimeout(timeout_s)
            try:
                sock.sendto(query.pack(), self.server)
                while True:
                    data, _ = sock.recvfrom(4096)
                    reply = DNSRecord.parse(data)
                    if reply.header.id == query.header.id:
                        break  # anything else is a stray late answer: keep waiting
            except TimeoutError:
                raise ResolveError(f"{self._where(name)}: no answer in {timeout_s} s") from None
            except OSError as exc:  # e.g. refused: nothing listens on that port
                raise ResolveError(f"{self._where(name)}: {exc.strerror or exc}") from None
        if reply.header.rcode != RCODE.NOERROR:
            raise ResolveError(f"{self._where(name)}: {RCODE.get(reply.header.rcode)}")
        for record in reply.rr:
            if record.rtype == QTYPE.A:
                return str(record.rdata)
        raise ResolveError(f"{self._where(name)}: no A record")

    def _where(self, name: str) -> str:
        return f"{name!r} at {self.server[0]}:{self.server[1]}"
