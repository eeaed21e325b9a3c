"""A DNS server on loopback that answers slowly on purpose: name resolution as a measurable phase.

The study's §4.1 counts DNS in the P99 and caching it as an optimisation; on a test machine a
lookup of a local name takes microseconds, so there is nothing to cache. This server answers A
queries for the names it is given with 127.0.0.1 after ``delay_ms`` (each query in its own
thread, so a slow answer never holds up another), and everything else with NXDOMAIN. The local
stack starts it when a campaign says ``stack: {dns: {delay_ms: 20}}``, serves the target under
its name and points the load generator's ``--resolver`` at it.

    python -m ramplab.stack.dns --port 5353 --delay-ms 20 --name target.ramplab.test
"""

from __future__ import annotations

import argparse
import signal
import sys
import threading
import time
from typing import Any

from dnslib import QTYPE, RCODE, RR, A, DNSRecord
from dnslib.server import BaseResolver, DNSLogger, DNSServer

__all__ = ["DEFAULT_NAME", "SlowDns"]

DEFAULT_NAME = "target.ramplab.test"


class _Delayed(BaseResolver):  # type: ignore[misc]
    def __init__(self, names: set[str], address: str, delay_s: float, ttl: int) -> None:
        self.names = names
        self.address = address
        self.delay_s = delay_s
        self.ttl = ttl

    def resolve(self, request: DNSRecord, handler: Any) -> DNSRecord:
        time.sleep(self.delay_s)  # dnslib runs each query in a thread of its own
        reply = request.reply()
        qname = str(request.q.qname).rstrip(".").lower()
        if qname not in self.names:
            reply.header.rcode = RCODE.NXDOMAIN
        elif request.q.qtype in (QTYPE.A, QTYPE.ANY):
            reply.add_answer(RR(request.q.qname, QTYPE.A, rdata=A(self.address), ttl=self.ttl))
        return reply


class SlowDns:
    """The server on ``host:port`` (0: a free port, read back from ``port`` once started)."""

    def __init__(
        self,
        names: list[str],
        delay_ms: float,
        port: int = 0,
        host: str = "127.0.0.1",
        address: str = "127.0.0.1",
        ttl: int = 60,
    ) -> None:
        resolver = _Delayed({n.lower() for n in names}, address, delay_ms / 1000.0, ttl)
        logger = DNSLogger(log="-request,-reply,-truncated,-error,-recv,-send,-data", prefix=False)
        self._server = DNSServer(resolver, address=host, port=port, logger=logger)
        self.host = host
        self.port: int = self._server.server.server_address[1]
        self._thread: threading.Thread | None = None

    def start(self) -> SlowDns:
        self._thread = threading.Thread(target=self._server.start, name="slow-dns", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._server.stop()
        self._server.server.server_close()

    def __enter__(self) -> SlowDns:
        return self.start()

    def __exit__(self, *_: object) -> None:
        self.stop()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m ramplab.stack.dns", description=__doc__)
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--delay-ms", type=float, default=20.0)
    parser.add_argument("--name", action="append", default=[])
    args = parser.parse_args(argv)
    if args.delay_ms < 0:
        parser.error(f"--delay-ms {args.delay_ms}: must be >= 0")
    names = args.name or [DEFAULT_NAME]
    server = SlowDns(names, args.delay_ms, args.port).start()
    print(f"dns: {', '.join(names)} -> 127.0.0.1 after {args.delay_ms:g} ms on "
          f"{server.host}:{server.port}/udp", file=sys.stderr, flush=True)  # fmt: skip
    stop = threading.Event()
    for signum in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, lambda *_: stop.set())
    stop.wait()
    server.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
