"""The network layer under the measured request: name resolution and connected sockets, timed.

``TimedBackend`` resolves names itself (timed, cached when given a cache, through a named DNS
server when asked) and connects; ``TimedStream`` hands each read back with its arrival stamp —
the kernel's (``SO_TIMESTAMPNS``) where it can give one. Both the HTTP/1.1 exchange
(``http11.py``) and httpcore's HTTP/2 pool (``client.py``) run on them.
"""

from __future__ import annotations

import select
import socket
import ssl
import struct
import sys
import threading
import time
from collections.abc import Callable, Iterable
from typing import Any, Protocol

import httpcore

from ramplab.errors import ResolveError
from ramplab.measure.resolver import DnsResolver

__all__ = [
    "Clock",
    "DnsCache",
    "PollFactory",
    "Poller",
    "TimedBackend",
    "TimedStream",
    "enable_kernel_stamps",
]

Clock = Callable[[], float]


class Poller(Protocol):
    """What ``select.poll()`` returns."""

    def register(self, fd: int, eventmask: int = ..., /) -> None: ...

    def poll(self, timeout: float | None = ..., /) -> list[tuple[int, int]]: ...


# Makes an OS poll object. Under gevent, ``select.poll`` is gevent's cooperative one, which is what
# ``_readable_now`` must not use; the Locust plugin passes the original (``gevent.monkey.
# get_original``), everyone else gets the OS's own by default.
PollFactory = Callable[[], Poller]


# SO_TIMESTAMPNS (asm-generic/socket.h; Python's socket module does not export it): the kernel
# stamps every received packet, and recvmsg() hands the newest stamp of a read back.
_SO_TIMESTAMPNS = getattr(socket, "SO_TIMESTAMPNS", 35)
_CMSG_SIZE = socket.CMSG_SPACE(16) if hasattr(socket, "CMSG_SPACE") else 0


def enable_kernel_stamps(sock: socket.socket) -> bool:
    """Ask the kernel to stamp received packets; False where it cannot (non-Linux, TLS)."""
    if sys.platform != "linux" or not _CMSG_SIZE:
        return False
    try:
        sock.setsockopt(socket.SOL_SOCKET, _SO_TIMESTAMPNS, 1)
    except OSError:
        return False
    return True


class TimedStream(httpcore.NetworkStream):
    """A network stream that knows how long resolving its host took, and when bytes arrived.

    ``arrived_at`` is the arrival of the newest bytes of the last read, on the transport's
    clock. On plain TCP under Linux it comes from the kernel's receive stamp of the packet
    (``SO_TIMESTAMPNS``, wall clock, converted by reading both clocks at once), so a reader that
    is busy elsewhere — another user's greenlet, a garbage collection — does not delay the
    stamp; elsewhere it is the clock read right after ``recv`` returns.
    """

    def __init__(
        self,
        inner: httpcore.NetworkStream,
        dns_s: float,
        clock: Clock = time.perf_counter,
        stamped: socket.socket | None = None,
        poll: PollFactory = select.poll,
    ) -> None:
        self.inner = inner
        self.dns_s = dns_s
        self.clock = clock
        self.arrived_at: float | None = None
        self._sock = stamped  # the socket with kernel stamps on; None: stamp in user space
        self._poll = poll
        self.local_port = _local_port(inner.get_extra_info("socket"))

    def read(self, max_bytes: int, timeout: float | None = None) -> bytes:
        if self._sock is None:
            data = self.inner.read(max_bytes, timeout)
            self.arrived_at = self.clock()
            return data
        try:
            self._sock.settimeout(timeout)
            data, ancillary, _, _ = self._sock.recvmsg(max_bytes, _CMSG_SIZE)
        except TimeoutError as exc:
            raise httpcore.ReadTimeout(exc) from exc
        except OSError as exc:
            raise httpcore.ReadError(exc) from exc
        now, wall = self.clock(), time.time()
        arrived = now
        for level, kind, payload in ancillary:
            if level == socket.SOL_SOCKET and kind == _SO_TIMESTAMPNS and len(payload) >= 16:
                seconds, nanoseconds = struct.unpack("qq", payload[:16])
                arrived = now - max(wall - (seconds + nanoseconds * 1e-9), 0.0)
        self.arrived_at = arrived
        return data

    def write(self, buffer: bytes, timeout: float | None = None) -> None:
        self.inner.write(buffer, timeout)

    def close(self) -> None:
        self.inner.close()

    def start_tls(
        self,
        ssl_context: ssl.SSLContext,
        server_hostname: str | None = None,
        timeout: float | None = None,
    ) -> httpcore.NetworkStream:
        tls = self.inner.start_tls(ssl_context, server_hostname, timeout)
        wrapped = TimedStream(tls, 0.0, self.clock, poll=self._poll)  # TLS records hide stamps
        wrapped.local_port = self.local_port
        return wrapped

    def get_extra_info(self, info: str) -> Any:
        if info == "is_readable":
            return _readable_now(self.inner.get_extra_info("socket"), self._poll)
        return self.inner.get_extra_info(info)


def _local_port(sock: Any) -> int | None:
    """The port a TCP connection left from; None for anything else."""
    try:
        address = sock.getsockname()
    except (AttributeError, OSError):
        return None
    return address[1] if isinstance(address, tuple) and len(address) >= 2 else None


def _readable_now(sock: Any, poll: PollFactory) -> bool:
    """httpcore's idle-connection check, without ever yielding to gevent's hub.

    Before reusing a kept-alive connection httpcore polls its socket with timeout 0; with gevent's
    patched ``select`` that is a hub switch that can wait for the next event of any other user —
    ~6 ms before each request went out at 10 users. The OS's own ``poll`` answers at once.
    """
    if sock is None:
        return True
    fd = sock.fileno()
    if fd == -1:
        return True
    poller = poll()
    poller.register(fd, select.POLLIN)
    return bool(poller.poll(0))


class DnsCache:
    """Resolved addresses by ``(host, port)``, shared by every client of a process."""

    def __init__(self) -> None:
        self._entries: dict[tuple[str, int], str] = {}
        self._lock = threading.Lock()

    def get(self, key: tuple[str, int]) -> str | None:
        with self._lock:
            return self._entries.get(key)

    def put(self, key: tuple[str, int], address: str) -> None:
        with self._lock:
            self._entries[key] = address


class TimedBackend(httpcore.NetworkBackend):
    """Resolves names itself (timed, cached when given a cache), then connects to the address."""

    def __init__(
        self,
        cache: DnsCache | None,
        clock: Clock = time.perf_counter,
        poll: PollFactory = select.poll,
        resolver: DnsResolver | None = None,
    ) -> None:
        self._inner = httpcore.SyncBackend()
        self._cache = cache
        self._clock = clock
        self._poll = poll
        self._resolver = resolver

    def _resolve(self, host: str, port: int, timeout: float | None) -> str:
        key = (host, port)
        if self._cache is not None:
            cached = self._cache.get(key)
            if cached is not None:
                return cached
        try:
            if self._resolver is not None:
                address = self._resolver.resolve(host, timeout)
            else:
                infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
                address = str(infos[0][4][0])
        except (OSError, ResolveError) as exc:
            raise httpcore.ConnectError(f"cannot resolve {host!r}: {exc}") from exc
        if self._cache is not None:
            self._cache.put(key, address)
        return address

    def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,
        local_address: str | None = None,
        socket_options: Iterable[Any] | None = None,
    ) -> httpcore.NetworkStream:
        started = self._clock()
        address = self._resolve(host, port, timeout)
        dns_s = self._clock() - started
        if timeout is not None:
            # One limit for resolving and connecting, as httpcore's own backend has it: a slow
            # resolver leaves the connect less time, never a second full timeout (1 ms at least:
            # a zero timeout would make the connect non-blocking).
            timeout = max(timeout - dns_s, 0.001)
        stream = self._inner.connect_tcp(address, port, timeout, local_address, socket_options)
        sock = stream.get_extra_info("socket")
        stamped = sock if isinstance(sock, socket.socket) and enable_kernel_stamps(sock) else None
        return TimedStream(stream, dns_s, self._clock, stamped, self._poll)

    def connect_unix_socket(
        self,
        path: str,
        timeout: float | None = None,
        socket_options: Iterable[Any] | None = None,
    ) -> httpcore.NetworkStream:
        return self._inner.connect_unix_socket(path, timeout, socket_options)

    def sleep(self, seconds: float) -> None:
        self._inner.sleep(seconds)
