"""The HTTP client the streaming user sends with: httpx, plus exact connection-phase timing.

The measured request itself does not go through httpx (``MeasuredClient``): over HTTP/1.1 it
runs on ``http11.py``'s connections, over HTTP/2 on httpcore's pool; both use the network
backend below.

httpx's ``trace`` extension reports when httpcore starts and finishes TCP connect, TLS, request
write and response headers, but its ``connect_tcp`` includes name resolution. To time DNS on its
own (and to cache it when asked) the transport's connection pool gets a network backend that
resolves the host itself, times ``getaddrinfo``, and hands back a stream that carries the figure;
the trace callback picks it up from ``connection.connect_tcp.complete``.

Switches (so their effect can be measured, §4.1): DNS caching, connection reuse (keep-alive vs a
new connection per request), TLS verification (on unless turned off explicitly, custom CA bundle),
and the DNS server names are resolved with (``resolver.py``: the system's ``getaddrinfo`` unless
one is named), HTTP/2 (``http2``: h2 only, by ALPN over TLS or prior knowledge on cleartext) and
its receive window (``h2_window``, ``h2window.py``).

Phases over HTTP/2: httpcore traces the same connection events (``connection.connect_tcp``,
``connection.start_tls``: once per connection) and ``http2.*`` instead of ``http11.*`` request
events, so dns, connect, tls, send and wait keep their meaning. The h2 connection preface and
SETTINGS (``http2.send_connection_init``, new connections only) are counted in send. Not
available on h2: anything per frame — how long a response waited for a WINDOW_UPDATE shows only
as a longer stream phase.

Each streaming user gets a client of its own (one connection, like Locust's ``HttpUser``), all of
a process sharing one TLS context and one DNS cache: httpcore's pool walks every connection it
holds — and polls each idle socket — whenever a request is assigned, so one pool shared by N users
costs O(N) per request; at 100 users that was most of the generator's CPU (``bench/
stream_accuracy.py``).
"""

from __future__ import annotations

import select
import ssl
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from functools import partial
from types import TracebackType
from typing import Any, Protocol

import httpcore
import httpx

from ramplab.measure.deadline import NO_DEADLINE, Deadline
from ramplab.measure.h2window import WindowedPool
from ramplab.measure.http11 import Http11Pool, Origin, request_head
from ramplab.measure.resolver import DnsResolver
from ramplab.measure.sockets import (
    Clock,
    DnsCache,
    PollFactory,
    TimedBackend,
    TimedStream,
)


@dataclass(frozen=True, slots=True)
class ClientOptions:
    """How connections are made; one instance per user process."""

    verify_tls: bool = True
    ca_file: str | None = None
    dns_cache: bool = True
    reuse_connections: bool = True
    connect_timeout_s: float = 10.0
    read_timeout_s: float = 60.0  # longest silence between two reads
    max_connections: int = 10_000  # HTTP/2's pool; on HTTP/1.1 one per request in flight
    resolver: tuple[str, int] | None = None  # a DNS server to ask; None: the system's resolver
    # HTTP/2 only (h2 by ALPN over TLS, prior knowledge on cleartext): never a silent fallback
    # to HTTP/1.1 that would measure the wrong protocol.
    http2: bool = False
    h2_window: int | None = None  # receive window in bytes (``h2window.py``); None: httpcore's


def ssl_context(options: ClientOptions) -> ssl.SSLContext:
    """Verification on by default; ``verify_tls=False`` is the only way to turn it off."""
    if not options.verify_tls:
        ctx = ssl.create_default_context()
        ctx.check_hostname = False
        ctx.verify_mode = ssl.CERT_NONE
        return ctx
    return ssl.create_default_context(cafile=options.ca_file)


class TimedTransport(httpx.HTTPTransport):
    """``httpx.HTTPTransport`` whose pool uses ``TimedBackend`` and the reuse switch."""

    def __init__(
        self,
        options: ClientOptions,
        clock: Clock = time.perf_counter,
        tls: ssl.SSLContext | None = None,
        dns: DnsCache | None = None,
        poll: PollFactory = select.poll,
    ) -> None:
        if tls is None:
            tls = ssl_context(options)
        # Handing httpx the context stops it from building (and loading CAs into) one of its own.
        super().__init__(verify=tls)
        if dns is None and options.dns_cache:
            dns = DnsCache()
        self.backend = TimedBackend(
            dns if options.dns_cache else None, clock, poll, _resolver(options)
        )
        # The measured request's own HTTP/1.1 connections (``http11.py``); h2 stays on httpcore.
        self.http11 = (
            None if options.http2 else Http11Pool(self.backend, tls, options.reuse_connections)
        )
        # Replacing the pool is the one way to give httpx's own transport a network backend;
        # httpx is pinned below 0.29, where ``_pool`` is what ``handle_request`` uses.
        pool: Callable[..., httpcore.ConnectionPool] = httpcore.ConnectionPool
        if options.http2:  # h2window.py: the window, and idle connections the server closed
            pool = partial(WindowedPool, options.h2_window)
        self.pool = self._pool = pool(
            ssl_context=tls,
            http1=not options.http2,
            http2=options.http2,
            max_connections=options.max_connections,
            max_keepalive_connections=None if options.reuse_connections else 0,
            keepalive_expiry=None if options.reuse_connections else 0.0,
            network_backend=self.backend,
        )

    def close(self) -> None:
        if self.http11 is not None:
            self.http11.close()
        super().close()

    def __exit__(
        self,
        exc_type: type[BaseException] | None = None,
        exc_value: BaseException | None = None,
        traceback: TracebackType | None = None,
    ) -> None:
        self.close()  # what httpx's __exit__ does too: close the pool


def _resolver(options: ClientOptions) -> DnsResolver | None:
    if options.resolver is None:
        return None
    return DnsResolver(options.resolver)


def make_client(
    options: ClientOptions,
    clock: Clock = time.perf_counter,
    tls: ssl.SSLContext | None = None,
    dns: DnsCache | None = None,
    poll: PollFactory = select.poll,
) -> MeasuredClient:
    """A client; pass ``tls`` and ``dns`` to share a TLS context and DNS cache between clients,
    ``poll`` to check idle connections with an OS poll other than ``select.poll`` (under gevent,
    the original one)."""
    timeout = httpx.Timeout(
        connect=options.connect_timeout_s,
        read=options.read_timeout_s,
        write=options.read_timeout_s,
        pool=options.connect_timeout_s,
    )
    return MeasuredClient(TimedTransport(options, clock, tls, dns, poll), timeout)


class OpenResponse(Protocol):
    """A measured request's response: its head, and its body as the connection hands it over."""

    @property
    def status(self) -> int: ...

    @property
    def headers(self) -> list[tuple[bytes, bytes]]: ...

    @property
    def network_stream(self) -> httpcore.NetworkStream | None: ...

    def __iter__(self) -> Iterator[bytes]: ...

    def read(self) -> bytes: ...

    def close(self) -> None: ...


@dataclass(slots=True)
class _CoreResponse:
    """An httpcore response (HTTP/2) as an ``OpenResponse``."""

    inner: httpcore.Response
    status: int
    headers: list[tuple[bytes, bytes]]
    network_stream: httpcore.NetworkStream | None

    def __iter__(self) -> Iterator[bytes]:
        stream = self.inner.stream
        assert isinstance(stream, Iterable)  # a sync pool's
        yield from stream

    def read(self) -> bytes:
        return self.inner.read()

    def close(self) -> None:
        self.inner.close()


@dataclass(frozen=True, slots=True)
class _Target:
    """A URL parsed once per client."""

    url: httpcore.URL
    origin: Origin
    host: bytes  # the Host header
    path: bytes


class MeasuredClient(httpx.Client):
    """An ``httpx.Client`` whose measured requests bypass httpx.

    The measured request is the generator's hot path, and httpx's layer over httpcore cost more
    than it gave there: ``Client.send`` wraps each response's stream in a ``BoundSyncStream``
    that refers back to the response — a reference cycle that kept every finished request's
    objects alive until the next full garbage collection (at 100 requests/s the generator's RSS
    grew ~16 KiB per request between two, ``bench/generator_load.py``) — and building the
    ``httpx.Request`` (URL parsing, header normalising and validating) and the ``httpx.Response``
    took ~8 % of the generator's CPU at 300 streams (py-spy, ``bench/stream_accuracy.py``'s
    load). :meth:`open` sends with the headers ``send`` would have sent (the client's defaults —
    but ``Accept-Encoding: identity`` —, ``Host``, ``Content-Length``), its timeouts and the
    trace callback, over HTTP/1.1 on ``http11.py``'s connections (h11's per-read state machine
    was the largest share of the CPU left) and over HTTP/2 on httpcore's pool; the URL is parsed
    once per client. Everything else
    (the JWT token fetch, ``/v1/models``) goes through httpx as usual.
    """

    def __init__(self, transport: TimedTransport, timeout: httpx.Timeout) -> None:
        super().__init__(transport=transport, timeout=timeout)
        self.pool = transport.pool
        self.http11 = transport.http11
        self._timeouts = timeout.as_dict()
        self._targets: dict[str, _Target] = {}
        # The client's default headers with their lower-case names: once, not per request.
        # ``Accept-Encoding: identity`` instead of httpx's ``gzip, deflate``: the body is read
        # as it arrives, uncompressed, so a server that compressed its stream would break the
        # SSE parser (a caller's own Accept-Encoding still replaces it).
        self._defaults = [
            (name, k, b"identity" if name == "accept-encoding" else v)
            for k, v in self.headers.raw
            if (name := k.decode("ascii").lower())
        ]

    def _target(self, url: str) -> _Target:
        target = self._targets.get(url)
        if target is None:
            parsed = httpx.URL(url)
            port = parsed.port or (443 if parsed.scheme == "https" else 80)
            target = self._targets[url] = _Target(
                httpcore.URL(
                    scheme=parsed.raw_scheme,
                    host=parsed.raw_host,
                    port=parsed.port,
                    target=parsed.raw_path,
                ),
                Origin(parsed.raw_scheme, parsed.raw_host.decode("ascii"), port),
                parsed.netloc,
                parsed.raw_path,
            )
        return target

    def open(
        self,
        url: str,
        headers: Mapping[str, str],
        content: bytes,
        trace: PhaseTrace,
        deadline: Deadline = NO_DEADLINE,
    ) -> OpenResponse:
        """POST ``content`` to ``url``; the response's body is still to be read (httpcore's
        exceptions, not httpx's, for what fails). Over HTTP/1.1 every blocking operation, the
        body's reads included, ends by ``deadline``; over HTTP/2 httpcore takes its timeouts
        once per request, so they are cut to the time left when it is sent."""
        target = self._target(url)
        own = {name.lower() for name in headers}
        raw = [(b"Host", target.host)]
        raw += [(k, v) for name, k, v in self._defaults if name not in own]
        raw += [(k.encode("ascii"), v.encode("utf-8")) for k, v in headers.items()]
        raw.append((b"Content-Length", str(len(content)).encode("ascii")))
        if self.http11 is not None:
            head = request_head(target.path, raw)
            return self.http11.send(target.origin, head, content, self._timeouts, trace, deadline)
        timeouts = self._timeouts
        left = deadline.left()
        if left is not None:
            left = max(left, 0.001)  # a zero timeout would make httpcore's socket non-blocking
            timeouts = {
                key: left if own is None else min(own, left) for key, own in timeouts.items()
            }
        request = httpcore.Request(
            "POST",
            target.url,
            headers=raw,
            content=content,
            extensions={"timeout": timeouts, "trace": trace},
        )
        response = self.pool.handle_request(request)
        stream = response.extensions.get("network_stream")
        return _CoreResponse(response, response.status, response.headers, stream)


@dataclass(slots=True)
class PhaseTrace:
    """Collects the trace events of one request as monotonic timestamps (seconds).

    An event may bring its own stamp (``info["at"]``: ``http11.py`` stamps the request's write
    right around the system call); otherwise it is stamped when the callback runs. A new
    connection's own marks (``TimedStream``: the SYN's system call, the kernel's handshake time)
    replace the callback's for connect."""

    clock: Clock = time.perf_counter
    marks: dict[str, float] = field(default_factory=dict)
    dns_s: float | None = None
    connection: TimedStream | None = None  # the stream of a connection made for this request

    def __call__(self, name: str, info: dict[str, Any]) -> None:
        at = info.get("at")
        # The first occurrence wins: httpcore may retry a stale keep-alive connection.
        self.marks.setdefault(name, self.clock() if at is None else at)
        if name == "connection.connect_tcp.complete":
            stream = info.get("return_value")
            if isinstance(stream, TimedStream):
                self.dns_s = stream.dns_s
                if stream.connect_from is not None:
                    self.connection = stream

    def _mark(self, name: str) -> float | None:
        """An event of the request's protocol: httpcore names them ``http11.*`` or ``http2.*``."""
        if name.startswith("http."):
            event = name.removeprefix("http.")
            found = self.marks.get("http11." + event)
            return found if found is not None else self.marks.get("http2." + event)
        return self.marks.get(name)

    def _span(self, start: str, end: str) -> float | None:
        a = self._mark(start)
        b = self._mark(end)
        return None if a is None or b is None else b - a

    def phases_ms(self) -> dict[str, float]:
        """dns, connect, tls, stall, send and wait (request written → response headers), in ms."""
        out: dict[str, float] = {}
        tcp = self._span("connection.connect_tcp.started", "connection.connect_tcp.complete")
        connection = self.connection
        if connection is not None and connection.connect_from is not None:
            out["dns"] = connection.dns_s * 1000.0
            seen = connection.connected_at or connection.connect_from
            # Connect as the kernel saw it: SYN → SYN-ACK; what came after it until the
            # request was written is the generator's (``stall``).
            handshake = connection.handshake_s
            if handshake is None:
                handshake = seen - connection.connect_from
            out["connect"] = handshake * 1000.0
        elif tcp is not None:
            dns = self.dns_s or 0.0
            out["dns"] = dns * 1000.0
            out["connect"] = max(tcp - dns, 0.0) * 1000.0
        else:
            out["dns"] = 0.0
            out["connect"] = 0.0  # a reused keep-alive connection
        tls = self._span("connection.start_tls.started", "connection.start_tls.complete")
        out["tls"] = (tls or 0.0) * 1000.0
        # h2's connection preface and SETTINGS, written once per connection before the first
        # request's headers, count as that request's send.
        send_start = (
            "http2.send_connection_init.started"
            if "http2.send_connection_init.started" in self.marks
            else "http.send_request_headers.started"
        )
        send = self._span(send_start, "http.send_request_body.complete")
        if send is not None:
            out["send"] = send * 1000.0
        written = self._mark(send_start)
        if connection is not None and connection.connect_from is not None and written is not None:
            up = connection.connect_from + out["connect"] / 1000.0 + (tls or 0.0)
            out["stall"] = max(written - up, 0.0) * 1000.0
        wait = self._span(
            "http.send_request_body.complete", "http.receive_response_headers.complete"
        )
        if wait is not None:
            out["wait"] = wait * 1000.0
        return out

    @property
    def went_out(self) -> float | None:
        """When the request reached the network: resolving its new connection's name (the SYN's
        system call less the resolving time), or its first byte written on a kept-alive one."""
        connection = self.connection
        if connection is not None and connection.connect_from is not None:
            return connection.connect_from - connection.dns_s
        marks = [
            mark
            for name in ("connection.connect_tcp.started", "http.send_request_headers.started")
            if (mark := self._mark(name)) is not None
        ]
        return min(marks) if marks else None

    @property
    def send_uncertainty_s(self) -> float:
        """How much later than ``went_out`` the request may have left: the bracket around the
        system call that sent it (the SYN's, or the request's first bytes' on a kept-alive
        connection); 0 without one."""
        connection = self.connection
        if connection is not None and connection.connect_until is not None:
            return connection.connect_until - (connection.connect_from or 0.0)
        start = self._mark("http.send_request_headers.started")
        end = self._mark("http.send_request_headers.complete")
        return 0.0 if start is None or end is None else max(end - start, 0.0)

    @property
    def headers_at(self) -> float | None:
        return self._mark("http.receive_response_headers.complete")

    @property
    def connected(self) -> bool:
        return "connection.connect_tcp.complete" in self.marks
