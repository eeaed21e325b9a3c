"""The network layer under the measured request: name resolution and connected sockets, timed.

``TimedBackend`` resolves names itself (timed, cached when given a cache, through a named DNS
server when asked) and connects; ``TimedStream`` hands each read back with its arrival stamp —
the kernel's (``SO_TIMESTAMPNS``) where it can give one. Both the HTTP/1.1 exchange
(``http11.py``) and httpcore's HTTP/2 pool (``client.py``) run on them.
"""

from __future__ import annotations

import errno
import ipaddress
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
from httpcore._backends.sync import SyncStream

from ramplab.errors import ResolveError
from ramplab.measure.resolver import DnsResolver
from ramplab.measure.timebase import Timebase, process_timebase

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


# struct tcp_info (linux/tcp.h): eight one-byte fields, then 32-bit ones; tcpi_rtt (µs) is the
# sixteenth of those. Right after the handshake it is the SYN → SYN-ACK round trip.
_TCP_INFO_RTT = struct.Struct("=68xI")


def handshake_s(sock: socket.socket) -> float | None:
    """The kernel's SYN → SYN-ACK round trip of a just-connected socket (``TCP_INFO``)."""
    if sys.platform != "linux":
        return None
    try:
        info = sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_INFO, _TCP_INFO_RTT.size)
    except (OSError, AttributeError):
        return None
    if len(info) < _TCP_INFO_RTT.size:
        return None
    (rtt_us,) = _TCP_INFO_RTT.unpack(info[: _TCP_INFO_RTT.size])
    return float(rtt_us) * 1e-6


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
    """A network stream that knows how its connection was made and when bytes arrived.

    ``arrived_at`` is the arrival of the newest bytes of the last read, on the transport's
    monotonic clock. On plain TCP under Linux it comes from the kernel's receive stamp of the
    packet (``SO_TIMESTAMPNS``, wall clock, mapped through the process's ``Timebase``: one
    clock read), so a reader that is busy elsewhere — another user's greenlet, a garbage
    collection, a CPU taken by other processes — does not delay the stamp; elsewhere it is the
    clock read right after ``recv`` returns. ``read_at`` is that clock read in both cases, so
    ``read_at − arrived_at`` is how far behind the reader was.

    A read hands back everything queued with one stamp, its *newest* packet's — and reading in
    smaller pieces does not help: TCP merges segments that wait in the receive queue into one,
    keeping the newest stamp (``tcp_try_coalesce``), so what a late reader finds has lost the
    older packets' stamps before it reads (``attempt.py`` marks such events coalesced).

    Connection marks, on the monotonic clock: ``connect_from``/``connect_until`` bracket the
    ``connect`` system call that sent the SYN; ``handshake_s`` is the kernel's SYN → SYN-ACK
    time; ``connected_at`` when the generator saw the connection up. ``write_from``/
    ``write_until`` bracket the system call that handed the last request's first bytes to the
    kernel.
    """

    def __init__(
        self,
        inner: httpcore.NetworkStream,
        dns_s: float,
        clock: Clock = time.perf_counter,
        stamped: socket.socket | None = None,
        poll: PollFactory = select.poll,
        timebase: Timebase | None = None,
    ) -> None:
        self.inner = inner
        self.dns_s = dns_s
        self.clock = clock
        self.timebase = timebase or _timebase_of(clock)
        self.arrived_at: float | None = None
        self.read_at = 0.0
        self.connect_from: float | None = None
        self.connect_until: float | None = None
        self.handshake_s: float | None = None
        self.connected_at: float | None = None
        self.write_from: float | None = None
        self.write_until: float | None = None
        self._sock = stamped  # the socket with kernel stamps on; None: stamp in user space
        self._poll = poll
        self.local_port = _local_port(inner.get_extra_info("socket"))

    @property
    def kernel_stamps(self) -> bool:
        return self._sock is not None

    def read(self, max_bytes: int, timeout: float | None = None) -> bytes:
        if self._sock is None:
            data = self.inner.read(max_bytes, timeout)
            self.arrived_at = self.read_at = self.clock()
            return data
        return self._receive(max_bytes, timeout)

    def _receive(self, max_bytes: int, timeout: float | None) -> bytes:
        assert self._sock is not None
        try:
            self._sock.settimeout(timeout)
            data, ancillary, _, _ = self._sock.recvmsg(max_bytes, _CMSG_SIZE)
        except TimeoutError as exc:
            raise httpcore.ReadTimeout(exc) from exc
        except OSError as exc:
            raise httpcore.ReadError(exc) from exc
        now = self.read_at = self.clock()
        arrived = now
        for level, kind, payload in ancillary:
            if level == socket.SOL_SOCKET and kind == _SO_TIMESTAMPNS and len(payload) >= 16:
                seconds, nanoseconds = struct.unpack("qq", payload[:16])
                arrived = min(self.timebase.monotonic(seconds + nanoseconds * 1e-9), now)
        self.arrived_at = arrived
        return bytes(data)

    def write(self, buffer: bytes, timeout: float | None = None) -> None:
        sock = self._sock
        if sock is None:
            self.write_from = self.clock()
            self.inner.write(buffer, timeout)
            self.write_until = self.clock()
            return
        try:
            sock.settimeout(timeout)
            # The first send is bracketed on its own: its bytes leave during the call, and a
            # large body's later sends wait on the server's reading, not on the generator.
            self.write_from = self.clock()
            sent = sock.send(buffer)
            self.write_until = self.clock()
            if sent < len(buffer):
                sock.sendall(memoryview(buffer)[sent:])
        except TimeoutError as exc:
            raise httpcore.WriteTimeout(exc) from exc
        except OSError as exc:
            raise httpcore.WriteError(exc) from exc

    def close(self) -> None:
        self.inner.close()

    def start_tls(
        self,
        ssl_context: ssl.SSLContext,
        server_hostname: str | None = None,
        timeout: float | None = None,
    ) -> httpcore.NetworkStream:
        tls = self.inner.start_tls(ssl_context, server_hostname, timeout)
        # TLS records hide the kernel's stamps: user-space stamps from here on.
        wrapped = TimedStream(tls, self.dns_s, self.clock, poll=self._poll, timebase=self.timebase)
        for mark in ("local_port", "connect_from", "connect_until", "handshake_s", "connected_at"):
            setattr(wrapped, mark, getattr(self, mark))
        return wrapped

    def get_extra_info(self, info: str) -> Any:
        if info == "is_readable":
            return _readable_now(self.inner.get_extra_info("socket"), self._poll)
        return self.inner.get_extra_info(info)


def _timebase_of(clock: Clock) -> Timebase:
    return process_timebase() if clock is time.perf_counter else Timebase(clock)


def _is_address(host: str) -> bool:
    try:
        ipaddress.ip_address(host)
    except ValueError:
        return False
    return True


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
        self._timebase = _timebase_of(clock)
        self._poll = poll
        self._resolver = resolver

    def _resolve(self, host: str, port: int, timeout: float | None) -> str:
        if _is_address(host):
            # Nothing to resolve, and nothing goes out on the network: no ``getaddrinfo`` (under
            # gevent a trip through the resolver's thread pool, milliseconds on a busy worker).
            return host
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
        stream = self._connect(address, port, timeout, local_address, socket_options)
        stream.dns_s = dns_s
        return stream

    def _connect(
        self,
        address: str,
        port: int,
        timeout: float | None,
        local_address: str | None,
        socket_options: Iterable[Any] | None,
    ) -> TimedStream:
        """Connect, stamping right around the system call that sends the SYN.

        Not ``socket.create_connection`` (httpcore's way): it resolves the address again, and
        under gevent that goes through the resolver's thread pool even for an IP literal — a
        hub switch between the clock read and the SYN that put up to a second of the
        generator's time into "connect" on a busy worker. The socket (gevent's, where patched)
        connects without blocking; the handshake is waited for with ``select.poll`` looked up
        at call time: gevent's cooperative one under monkey-patching (``select.select`` would
        fail past descriptor 1024)."""
        family = socket.AF_INET6 if ":" in address else socket.AF_INET
        sock = socket.socket(family, socket.SOCK_STREAM)
        try:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            for option in socket_options or ():
                sock.setsockopt(*option)
            if local_address is not None:
                sock.bind((local_address, 0))
            sock.setblocking(False)
            clock = self._clock
            started = clock()
            code = sock.connect_ex((address, port))
            returned = clock()
            if code in (errno.EINPROGRESS, errno.EWOULDBLOCK, errno.EALREADY):
                waiting = select.poll()  # looked up now: gevent's cooperative one when patched
                waiting.register(sock.fileno(), select.POLLOUT)
                if not waiting.poll(None if timeout is None else timeout * 1000.0):
                    raise httpcore.ConnectTimeout(f"connecting to {address}:{port} timed out")
                code = sock.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR)
            if code not in (0, errno.EISCONN):
                raise httpcore.ConnectError(f"[Errno {code}] {errno.errorcode.get(code, code)}")
            seen = clock()
            sock.settimeout(timeout)
        except OSError as exc:
            sock.close()
            raise httpcore.ConnectError(exc) from exc
        except BaseException:
            sock.close()
            raise
        stamped = sock if enable_kernel_stamps(sock) else None
        stream = TimedStream(
            SyncStream(sock), 0.0, clock, stamped, self._poll, timebase=self._timebase
        )
        stream.connect_from, stream.connect_until = started, returned
        stream.handshake_s = handshake_s(sock)
        stream.connected_at = seen
        return stream

    def connect_unix_socket(
        self,
        path: str,
        timeout: float | None = None,
        socket_options: Iterable[Any] | None = None,
    ) -> httpcore.NetworkStream:
        return self._inner.connect_unix_socket(path, timeout, socket_options)

    def sleep(self, seconds: float) -> None:
        self._inner.sleep(seconds)
