"""The measured request's HTTP/1.1 exchange: request out, response head in, body chunk by chunk.

Hand-written on purpose, for speed: a streamed response is read one small network read per
event, and under httpcore each read went through h11's state machine and httpcore's layers —
two ``next_event`` calls, a receive buffer, a chunked-body reader and an event object per read,
~20 µs an event and the largest share of the generator's CPU above the socket itself (py-spy at
300 streams, ``bench/stream_accuracy.py``). Here a read costs a ``find``, a hex parse and two
slices. The request is written in one ``send`` (httpcore wrote its head and body separately).

What it does, as httpcore does it: connections come from ``TimedBackend`` (timed DNS, kernel
receive stamps) and are kept alive per origin unless the client was told not to reuse them, the
server closes or the response did not end cleanly; a kept-alive connection the server has closed
(its socket readable while idle) is dropped before use; the trace callback gets the events
``PhaseTrace`` times phases from (``connection.connect_tcp``, ``connection.start_tls``,
``http11.send_request_headers``, ``http11.send_request_body``, ``http11.receive_response_headers``:
``.started``/``.complete``); failures raise httpcore's exceptions (``ConnectError``,
``ReadTimeout``, ``RemoteProtocolError`` …) so callers map them to the same error kinds — but a
response that breaks HTTP/1.1's syntax or framing raises ``ramplab.errors.MalformedResponse``, so
that a server speaking bad HTTP is told apart from a connection that broke. Every blocking
operation is bounded by the request's deadline as well as its own limit (``deadline.py``). Bodies
are framed by ``Transfer-Encoding: chunked``, ``Content-Length`` or the connection's close; 1xx
responses before the final one are skipped. Not here: HTTP/2 (the client keeps httpcore's pool
for it), proxies, upgrades.
"""

from __future__ import annotations

import contextlib
import re
import ssl
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from functools import partial
from typing import TYPE_CHECKING, Any, cast

import httpcore

from ramplab.errors import MalformedResponse
from ramplab.measure.deadline import Deadline

if TYPE_CHECKING:
    from ramplab.measure.sockets import TimedBackend, TimedStream

Trace = Callable[[str, dict[str, Any]], None]
READ_BYTES = 64 * 1024  # httpcore's read size
MAX_HEAD_BYTES = 100 * 1024  # h11's largest incomplete event, as httpcore configures it
MAX_SIZE_LINE = 1024

_TOKEN = re.compile(rb"[-!#$%&'*+.^_`|~0-9A-Za-z]+")
_HEX = re.compile(rb"[0-9A-Fa-f]+")
_STATUS_LINE = re.compile(rb"HTTP/(1\.[01]) ([0-9]{3})(?: (.*))?")
_HEAD_END = re.compile(rb"\r?\n\r?\n")
_LINE_END = re.compile(rb"\r?\n")
_BAD_VALUE = re.compile(rb"[\r\n\x00]")


@dataclass(frozen=True, slots=True)
class Origin:
    scheme: bytes
    host: str
    port: int


def request_head(target: bytes, headers: list[tuple[bytes, bytes]]) -> bytes:
    """``POST target HTTP/1.1`` and the header lines; a header that could split the request
    (a name that is not a token, a value with CR, LF or NUL) is refused as h11 refuses it."""
    lines = [b"POST ", target, b" HTTP/1.1\r\n"]
    for name, value in headers:
        if not _TOKEN.fullmatch(name) or _BAD_VALUE.search(value):
            raise httpcore.LocalProtocolError(f"illegal header {name!r}: {value!r}")
        lines += (name, b": ", value, b"\r\n")
    lines.append(b"\r\n")
    return b"".join(lines)


def _trace_write(trace: Trace, stream: TimedStream) -> None:
    """The request's write, stamped by the stream right around the system call that handed it
    to the kernel (``TimedStream.write``), not before the Python calls that lead to it. The
    call's end is no later than the response's first packet: a server on the same host can
    answer before the call has returned."""
    start, end, arrived = stream.write_from, stream.write_until, stream.arrived_at
    if start is not None and end is not None and arrived is not None and start <= arrived < end:
        end = arrived
    written = {"at": end}
    trace("http11.send_request_headers.started", {"at": start})
    trace("http11.send_request_headers.complete", written)
    trace("http11.send_request_body.started", written)
    trace("http11.send_request_body.complete", written)


class Http11Pool:
    """Kept-alive connections by origin, handed to one request at a time."""

    def __init__(self, backend: TimedBackend, tls: ssl.SSLContext, keep_alive: bool) -> None:
        self._backend = backend
        self._tls = tls
        self._keep_alive = keep_alive
        self._idle: dict[Origin, list[TimedStream]] = {}
        self._alpn_set = False

    def send(
        self,
        origin: Origin,
        head: bytes,
        content: bytes,
        timeouts: Mapping[str, float | None],
        trace: Trace,
        deadline: Deadline,
    ) -> Http11Response:
        """Write the request; return once the final response's head has arrived."""
        stream = self._take(origin)
        if stream is None:
            stream = self._connect(origin, timeouts.get("connect"), trace, deadline)
        try:
            stream.write_from = stream.write_until = None
            # As httpcore: a server may answer (an error) and close before reading the whole
            # request; what it said is read below.
            with contextlib.suppress(httpcore.WriteError):
                deadline.run(
                    timeouts.get("write"),
                    "write",
                    "writing the request",
                    partial(stream.write, head + content),
                )
            trace("http11.receive_response_headers.started", {})
            response = Http11Response(self, origin, stream, timeouts.get("read"), deadline)
            try:
                response.read_head()
            finally:
                _trace_write(trace, stream)
            # The head's arrival: the kernel's stamp of its packet, where there is one.
            trace("http11.receive_response_headers.complete", {"at": stream.arrived_at})
            return response
        except BaseException:
            stream.close()
            raise

    def _take(self, origin: Origin) -> TimedStream | None:
        idle = self._idle.get(origin)
        while idle:
            stream = idle.pop()
            if not stream.get_extra_info("is_readable"):
                return stream
            stream.close()  # readable while idle: the server closed it (or sent junk)
        return None

    def _connect(
        self, origin: Origin, timeout: float | None, trace: Trace, deadline: Deadline
    ) -> TimedStream:
        trace("connection.connect_tcp.started", {})
        connect = partial(self._backend.connect_tcp, origin.host, origin.port)
        stream = cast("TimedStream", deadline.run(timeout, "connect", "connecting", connect))
        trace("connection.connect_tcp.complete", {"return_value": stream})
        if origin.scheme == b"https":
            if not self._alpn_set:
                self._tls.set_alpn_protocols(["http/1.1"])
                self._alpn_set = True
            trace("connection.start_tls.started", {})
            try:
                handshake = partial(stream.start_tls, self._tls, origin.host)
                tls = deadline.run(timeout, "connect", "in the TLS handshake", handshake)
            except BaseException:
                stream.close()
                raise
            stream = cast("TimedStream", tls)  # TimedStream.start_tls wraps what it returns
            trace("connection.start_tls.complete", {"return_value": stream})
        return stream

    def release(self, origin: Origin, stream: TimedStream, reusable: bool) -> None:
        if reusable and self._keep_alive:
            self._idle.setdefault(origin, []).append(stream)
        else:
            stream.close()

    def close(self) -> None:
        for streams in self._idle.values():
            for stream in streams:
                stream.close()
        self._idle.clear()


@dataclass(slots=True)
class Http11Response:
    """One response: its head once :meth:`read_head` returned, its body by iterating it.

    The body is handed over as it arrives: every piece is yielded before the next read blocks,
    so the transport's ``arrived_at`` belongs to the bytes just handed over.
    """

    pool: Http11Pool
    origin: Origin
    network_stream: TimedStream
    timeout: float | None  # the read timeout: the longest silence between two reads
    deadline: Deadline
    status: int = 0
    headers: list[tuple[bytes, bytes]] = field(default_factory=list)
    _buffer: bytes = b""
    _keep_alive: bool = True
    _complete: bool = False
    _closed: bool = False
    _doing: str = "waiting for the response head"

    def _read(self) -> bytes:
        return self.deadline.run(self.timeout, "read", self._doing, self._read_within)

    def _read_within(self, timeout: float | None) -> bytes:
        return self.network_stream.read(READ_BYTES, timeout)

    def _more(self, cut_short: str) -> bytes:
        """The next read; the server closing instead is a ``RemoteProtocolError``."""
        data = self._read()
        if not data:
            raise httpcore.RemoteProtocolError(cut_short)
        return data

    def read_head(self) -> None:
        buffer = self._buffer
        while True:
            end = _HEAD_END.search(buffer)
            if end is None:
                if len(buffer) > MAX_HEAD_BYTES:
                    raise MalformedResponse("response head too large")
                buffer += self._more("Server disconnected without sending a response.")
                continue
            head, buffer = buffer[: end.start()], buffer[end.end() :]
            status, version, headers = _parse_head(head)
            if 100 <= status < 200:
                if status == 101:
                    raise MalformedResponse("101 Switching Protocols is not supported")
                continue  # an interim response (100 Continue, 103 Early Hints): the final follows
            self.status, self.headers, self._buffer = status, headers, buffer
            self._doing = "reading the body"
            self._keep_alive = version == b"1.1" and not _has_token(
                headers, b"connection", b"close"
            )
            return

    def __iter__(self) -> Iterator[bytes]:
        if self._complete or self._closed:
            return  # read already, or given up: the connection holds nothing more of it
        try:
            if self.status in (204, 304):
                body: Iterator[bytes] = iter(())
            elif codings := [
                v.strip().lower() for v in _values(self.headers, b"transfer-encoding")
            ]:
                if codings != [b"chunked"]:
                    raise MalformedResponse("unsupported Transfer-Encoding")
                body = self._chunked()
            else:
                lengths = {v.strip() for v in _values(self.headers, b"content-length")}
                if len(lengths) > 1 or not all(length.isdigit() for length in lengths):
                    raise MalformedResponse(f"bad Content-Length {sorted(lengths)}")
                body = self._sized(int(lengths.pop())) if lengths else self._until_close()
            yield from body
            self._complete = True
        except BaseException:
            self.close()
            raise

    def _chunked(self) -> Iterator[bytes]:
        buffer, self._buffer = self._buffer, b""
        pieces: list[bytes] = []
        left = -1  # bytes of the current chunk's data still to come; -1: its size line is next
        while True:
            if left < 0:
                end = buffer.find(b"\r\n")
                if end >= 0:
                    left = _chunk_size(buffer[:end])
                    buffer = buffer[end + 2 :]
                    if left == 0:  # the last chunk
                        if pieces:
                            yield b"".join(pieces)
                        self._trailers(buffer)
                        return
                    continue
                if len(buffer) > MAX_SIZE_LINE:
                    raise MalformedResponse("chunk size line too long")
            elif left > 0:
                if buffer:
                    data, buffer = buffer[:left], buffer[left:]
                    pieces.append(data)
                    left -= len(data)
                    continue
            elif len(buffer) >= 2:  # the CRLF after a chunk's data
                if buffer[:2] != b"\r\n":
                    raise MalformedResponse("chunk data not followed by CRLF")
                buffer = buffer[2:]
                left = -1
                continue
            # Everything in hand is handed over before the next read can block.
            if pieces:
                yield pieces[0] if len(pieces) == 1 else b"".join(pieces)
                pieces = []
            buffer += self._more(
                "peer closed connection without sending complete message body: "
                "incomplete chunked read"
            )

    def _trailers(self, buffer: bytes) -> None:
        """Trailer fields after the last chunk, up to the blank line; their values unused."""
        while True:
            end = _LINE_END.search(buffer)
            if end is not None:
                if end.start() == 0:
                    if end.end() != len(buffer):
                        self._keep_alive = False  # bytes nobody asked for: do not reuse
                    return
                buffer = buffer[end.end() :]
                continue
            if len(buffer) > MAX_HEAD_BYTES:
                raise MalformedResponse("trailers too large")
            buffer += self._more("peer closed connection without sending complete message body")

    def _sized(self, length: int) -> Iterator[bytes]:
        buffer, self._buffer = self._buffer, b""
        while True:
            if len(buffer) > length:
                self._keep_alive = False  # bytes beyond the body: never reuse the connection
                buffer = buffer[:length]
            if buffer:
                length -= len(buffer)
                yield buffer
            if length == 0:
                return
            buffer = self._more(
                "peer closed connection without sending complete message body: "
                f"{length} bytes missing"
            )

    def _until_close(self) -> Iterator[bytes]:
        self._keep_alive = False
        buffer, self._buffer = self._buffer, b""
        while True:
            if buffer:
                yield buffer
            buffer = self._read()
            if not buffer:
                return

    def read(self) -> bytes:
        return b"".join(self)

    def close(self) -> None:
        if not self._closed:
            self._closed = True
            self.pool.release(self.origin, self.network_stream, self._complete and self._keep_alive)


def _parse_head(head: bytes) -> tuple[int, bytes, list[tuple[bytes, bytes]]]:
    lines = _LINE_END.split(head)
    match = _STATUS_LINE.fullmatch(lines[0])
    if match is None:
        raise MalformedResponse(f"bad status line {lines[0][:100]!r}")
    headers = []
    for line in lines[1:]:
        name, colon, value = line.partition(b":")
        if not colon or not _TOKEN.fullmatch(name):
            raise MalformedResponse(f"bad header line {line[:100]!r}")
        headers.append((name, value.strip(b" \t")))
    return int(match[2]), match[1], headers


def _values(headers: list[tuple[bytes, bytes]], name: bytes) -> list[bytes]:
    """Every value of a header, comma-separated lists split."""
    return [
        part
        for key, value in headers
        if key.lower() == name
        for part in value.split(b",")
        if part.strip()
    ]


def _has_token(headers: list[tuple[bytes, bytes]], name: bytes, token: bytes) -> bool:
    return any(value.strip().lower() == token for value in _values(headers, name))


def _chunk_size(line: bytes) -> int:
    size = line.split(b";", 1)[0].strip(b" \t")  # chunk extensions are ignored
    if not _HEX.fullmatch(size):
        raise MalformedResponse(f"bad chunk size line {line[:100]!r}")
    return int(size, 16)
