"""The reference client: HTTP/1.1 written by hand on a plain blocking socket, the ground truth that
ramplab's client is checked against (``bench/foreign_truth.py``, ``tests/bench``).

Why it is the truth: every byte is stamped with the time its packet reached this host, as the
kernel recorded it (``SO_TIMESTAMPNS``, the wall clock), and nothing in user space can move that
stamp. It reads ONE byte per ``recvmsg``, so each byte carries the stamp of its own packet even
when the reader was late and several packets were waiting (a read of many bytes reports only the
newest packet's stamp). The send time is the kernel's stamp of the request's packet leaving
(``SO_TIMESTAMPING``, software transmit stamp, the same clock). Neither end of a TTFT or an ITL
is read in user space, so the reference can run at the lowest priority and still be exact. No
library stands in between (no httpx/httpcore, no h11, no SSE library), and parsing — chunked
transfer coding, then SSE framing — happens only after the whole response is in. It uses
none of ``ramplab/measure`` (neither its parser nor its clients), so an error there cannot hide in
both. Its limits: Linux, HTTP/1.1 over plain TCP, ``Content-Length`` or chunked bodies, SSE lines
ending in LF, one request at a time per client; a byte per system call is slow (~1 µs a byte),
which does not matter for a truth that only has to be right.
"""

from __future__ import annotations

import itertools
import json
import socket
import struct
import time
from dataclasses import dataclass, field

_SO_TIMESTAMPNS = getattr(socket, "SO_TIMESTAMPNS", 35)
_CMSG = socket.CMSG_SPACE(16)
# linux/net_tstamp.h: stamp outgoing packets in software, report only the stamp (not the packet).
_SO_TIMESTAMPING = getattr(socket, "SO_TIMESTAMPING", 37)
_TX_FLAGS = (1 << 1) | (1 << 4) | (1 << 11)  # TX_SOFTWARE | SOFTWARE | OPT_TSONLY


@dataclass(slots=True)
class RawResult:
    """One streamed response as the socket saw it; times in ms from the request's ``sendall``."""

    status: int
    ttft_ms: float | None = None  # the first event carrying output text
    ttlt_ms: float | None = None  # the last one
    itl_ms: list[float] = field(default_factory=list)  # gaps between content events
    content_events: int = 0
    saw_done: bool = False


class RawClient:
    """A kept-alive connection to one server, reopened when the server closes it."""

    def __init__(self, host: str, port: int) -> None:
        self.host = host
        self.port = port
        self._sock: socket.socket | None = None

    def close(self) -> None:
        if self._sock is not None:
            self._sock.close()
            self._sock = None

    def _connect(self) -> socket.socket:
        if self._sock is None:
            sock = socket.create_connection((self.host, self.port), timeout=30.0)
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            sock.setsockopt(socket.SOL_SOCKET, _SO_TIMESTAMPNS, 1)
            sock.setsockopt(socket.SOL_SOCKET, _SO_TIMESTAMPING, _TX_FLAGS)
            self._sock = sock
        return self._sock

    def post_stream(self, path: str, body: dict[str, object]) -> RawResult:
        """Send one streamed chat completion and read it to the end."""
        payload = json.dumps(body).encode()
        head = (
            f"POST {path} HTTP/1.1\r\nHost: {self.host}:{self.port}\r\n"
            "Content-Type: application/json\r\nAccept: text/event-stream\r\n"
            f"Content-Length: {len(payload)}\r\n\r\n"
        ).encode()
        sock = self._connect()
        reads: list[tuple[float, bytes]] = []
        sock.sendall(head + payload)  # one write: the request leaves in one packet
        sent = _sent_stamp(sock)
        framing = _Framing()
        while True:
            data, ancillary, _, _ = sock.recvmsg(1, _CMSG)
            if not data:
                self.close()
                break
            reads.append((_kernel_stamp(ancillary), data))
            if framing.complete(data):
                break
        if framing.closes:
            self.close()
        return _decode(reads, sent)


def _sent_stamp(sock: socket.socket, timeout_s: float = 1.0) -> float:
    """When the request's packet went out, as the kernel stamped it (from the error queue)."""
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            _, ancillary, _, _ = sock.recvmsg(1, 512, socket.MSG_ERRQUEUE | socket.MSG_DONTWAIT)
        except BlockingIOError:
            if time.monotonic() > deadline:
                raise RuntimeError("the kernel gave no send stamp (SO_TIMESTAMPING)") from None
            time.sleep(0.0001)
            continue
        for level, kind, payload in ancillary:
            if level == socket.SOL_SOCKET and kind == _SO_TIMESTAMPING and len(payload) >= 16:
                seconds, nanoseconds = struct.unpack("qq", payload[:16])
                return seconds + nanoseconds * 1e-9


def _kernel_stamp(ancillary: list[tuple[int, int, bytes]]) -> float:
    for level, kind, payload in ancillary:
        if level == socket.SOL_SOCKET and kind == _SO_TIMESTAMPNS and len(payload) >= 16:
            seconds, nanoseconds = struct.unpack("qq", payload[:16])
            return seconds + nanoseconds * 1e-9
    raise RuntimeError("the kernel gave no receive stamp (SO_TIMESTAMPNS): Linux only")


class _Framing:
    """Tells, from the bytes seen so far, when the response is complete."""

    def __init__(self) -> None:
        self._seen = bytearray()
        self._head_end = -1
        self._chunked = False
        self._length: int | None = None
        self.closes = False

    def complete(self, data: bytes) -> bool:
        self._seen += data
        if self._head_end < 0:
            if not self._seen.endswith(b"\r\n\r\n"):
                return False
            self._head_end = len(self._seen)
            head = bytes(self._seen).lower()
            self.closes = b"connection: close" in head
            self._chunked = b"transfer-encoding: chunked" in head
            for line in head.split(b"\r\n"):
                if line.startswith(b"content-length:"):
                    self._length = int(line.split(b":", 1)[1])
        if self._chunked:
            return self._seen.endswith(b"\n0\r\n\r\n")
        if self._length is not None:
            return len(self._seen) - self._head_end >= self._length
        return False


def _decode(reads: list[tuple[float, bytes]], sent: float) -> RawResult:
    """Status, body bytes with the arrival time of each, then SSE events: after the fact."""
    raw = b"".join(data for _, data in reads)
    stamps = [at for at, data in reads for _ in data]  # the arrival of every byte

    def arrival(position: int) -> float:
        return stamps[min(position, len(stamps) - 1)]

    head_end = raw.index(b"\r\n\r\n")
    head = raw[:head_end].decode("latin-1")
    status = int(head.split(" ", 2)[1])
    chunked = "transfer-encoding: chunked" in head.lower()
    body = bytearray()
    runs: list[tuple[int, int]] = []  # (body offset, raw offset) where a run of body bytes starts
    position = head_end + 4
    if chunked:
        while position < len(raw):
            line_end = raw.index(b"\r\n", position)
            size = int(raw[position:line_end].split(b";")[0], 16)
            if size == 0:
                break
            start = line_end + 2
            runs.append((len(body), start))
            body += raw[start : start + size]
            position = start + size + 2
    else:
        runs.append((0, position))
        body += raw[position:]

    def body_arrival(body_offset: int) -> float:
        raw_offset = 0
        for run_body, run_raw in runs:
            if run_body > body_offset:
                break
            raw_offset = run_raw + (body_offset - run_body)
        return arrival(raw_offset)

    result = RawResult(status=status)
    content_at: list[float] = []
    text = bytes(body)  # events end in a blank line of LFs, as every OpenAI-style server sends
    cursor = 0
    for block in text.split(b"\n\n"):
        begins = cursor
        cursor += len(block) + 2
        data = [
            line[5:].removeprefix(b" ") for line in block.split(b"\n") if line.startswith(b"data:")
        ]
        if not data:
            continue
        joined = b"\n".join(data)
        if joined.strip() == b"[DONE]":
            result.saw_done = True
            continue
        chunk = json.loads(joined)
        pieces = [
            (choice.get("delta") or {}).get("content") or ""
            for choice in chunk.get("choices") or ()
        ]
        if any(pieces):
            content_at.append(body_arrival(begins))
    ms = 1000.0
    if content_at:
        result.ttft_ms = (content_at[0] - sent) * ms
        result.ttlt_ms = (content_at[-1] - sent) * ms
        result.itl_ms = [(b - a) * ms for a, b in itertools.pairwise(content_at)]
    result.content_events = len(content_at)
    return result
