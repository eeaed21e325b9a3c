"""An independent check of ramplab's stream stamps against the wire (issue 26, part 5).

Method. ``Capture`` records the loopback traffic to the target's port with ``tcpdump`` at
nanosecond precision while ramplab runs; ``rebuild`` reads the capture back and rebuilds every
HTTP/1.1 exchange from the packets alone; ``match`` joins each of ramplab's records
(``requests.parquet``) with its exchange, and ``compare`` puts ramplab's offsets beside the wire's,
request by request (those two in ``bench/wire_compare.py``). Nothing of ramplab's code is used
on the wire side: the framing (TCP, HTTP chunked bodies, SSE) and the token rule are written
again here.

Definitions (they follow ramplab's own, ``docs/metrics.md``):

* **A byte's wire time** is the capture stamp of the first packet, in capture order, that
  carried it. A retransmitted or duplicated segment adds nothing: its bytes were already
  carried. Each direction of a connection is rebuilt in sequence order from its SYN.
* **An event's wire time** is the wire time of its **first byte** — the first byte of its first
  field line (``data:``), the bytes ramplab stamps an event by. SSE framing is WHATWG's:
  lines end in ``\\r\\n``, ``\\r`` or ``\\n``; a blank line dispatches; ``:`` lines are
  comments, not events.
* **A token event** is one whose JSON has non-empty ``choices[].delta.content`` (or
  ``delta.reasoning_content`` / ``delta.reasoning``), or legacy ``choices[].text``: ramplab's rule
  (``ramplab/measure/attempt.py``), so the two sides count the same events.
* **The wire's start** of a request is the SYN when the request opened its connection (the first
  request on it: ramplab's send is then the moment the connect started), else the first packet
  of the request's bytes (ramplab's send is its first header byte written).

Joining the exchanges with ramplab's records and the comparison: ``bench/wire_compare.py``.
"""

from __future__ import annotations

import bisect
import json
import re
import signal
import subprocess
import threading
from collections import defaultdict
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import Any, Self

import dpkt

# Kernel buffer for the capture, KiB: a few seconds of the busiest cell fit in it, so a tcpdump
# that is itself starved of CPU for a moment still loses nothing.
BUFFER_KIB = 262144
_SEQ_MOD = 1 << 32


class CaptureError(RuntimeError):
    """The capture could not start, was cut by its time bound, or the kernel dropped packets."""


class Capture:
    """``tcpdump`` on loopback for the TCP traffic of one port, as a context manager.

    Entering returns once tcpdump says it is listening; leaving stops it with SIGINT (so it
    flushes the file and prints its counts) and raises ``CaptureError`` when the kernel dropped
    any packet or the time bound cut it: a check with holes is no check. ``timeout_s`` bounds
    tcpdump even if this process dies (GNU ``timeout`` sends it SIGINT). ``cpus`` pins it.
    """

    def __init__(
        self,
        path: Path,
        port: int,
        *,
        timeout_s: float,
        cpus: Sequence[int] | None = None,
        ready_timeout_s: float = 10.0,
    ) -> None:
        self.path = path
        self.port = port
        self.timeout_s = timeout_s
        self.cpus = cpus
        self.ready_timeout_s = ready_timeout_s
        self.captured: int | None = None
        self.dropped: int | None = None
        self._process: subprocess.Popen[bytes] | None = None
        self._stderr: list[str] = []
        self._listening = threading.Event()
        self._reader: threading.Thread | None = None

    def command(self) -> list[str]:
        # -Z root: tcpdump otherwise drops to its own user before opening -w, and cannot write
        # into a private temporary directory.
        command = ["timeout", "-s", "INT", "-k", "5", f"{self.timeout_s:g}", "tcpdump"]
        command += ["-i", "lo", "-nn", "-s", "0", "-B", str(BUFFER_KIB), "-Z", "root"]
        command += ["--time-stamp-precision=nano", "-w", str(self.path), f"tcp port {self.port}"]
        if self.cpus is not None:
            command = ["taskset", "-c", ",".join(map(str, self.cpus)), *command]
        return command

    def _read_stderr(self, stream: Iterable[bytes]) -> None:
        for raw in stream:
            line = raw.decode(errors="replace").rstrip()
            self._stderr.append(line)
            if "listening on" in line:
                self._listening.set()

    def __enter__(self) -> Self:
        process = subprocess.Popen(
            self.command(), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE
        )
        self._process = process
        assert process.stderr is not None
        self._reader = threading.Thread(target=self._read_stderr, args=(process.stderr,))
        self._reader.start()
        if not self._listening.wait(self.ready_timeout_s):
            self._stop()
            raise CaptureError(f"tcpdump did not start: {' | '.join(self._stderr)}")
        return self

    def _stop(self) -> int:
        process = self._process
        assert process is not None
        if process.poll() is None:
            process.send_signal(signal.SIGINT)  # `timeout` passes it on to tcpdump
        try:
            code = process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            process.kill()
            code = process.wait()
        if self._reader is not None:
            self._reader.join(timeout=5)
        if process.stderr is not None:
            process.stderr.close()
        return code

    def __exit__(
        self,
        kind: type[BaseException] | None,
        value: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        code = self._stop()
        text = "\n".join(self._stderr)
        captured = re.search(r"(\d+) packets? captured", text)
        dropped = re.search(r"(\d+) packets? dropped by kernel", text)
        self.captured = int(captured.group(1)) if captured else None
        self.dropped = int(dropped.group(1)) if dropped else None
        if kind is not None:
            return  # the caller's own error says more than ours would
        if code == 124:
            raise CaptureError(
                f"the capture hit its {self.timeout_s:g} s bound before the run ended"
            )
        if self.dropped is None:
            raise CaptureError(f"tcpdump gave no drop count (exit {code}): {text}")
        if self.dropped:
            raise CaptureError(f"the kernel dropped {self.dropped} packets of the capture")


@dataclass(frozen=True, slots=True)
class WireEvent:
    """One SSE event (comments excluded) as the wire carried it."""

    at_ns: int  # capture stamp of the packet carrying the event's first byte, epoch ns
    data: str
    completion_id: str | None  # the JSON's ``id``
    token: bool  # carries output text by ramplab's rule


@dataclass(slots=True)
class Exchange:
    """One HTTP/1.1 request and its response, rebuilt from the packets."""

    local_port: int
    connection: int  # which connection from this port, in order (ports get reused)
    position: int  # 0: the first request on its connection
    syn_ns: int | None  # the connection's SYN, when captured
    request_first_ns: int
    request_last_ns: int
    request_line: str
    status: int | None = None
    events: list[WireEvent] = field(default_factory=list)
    complete: bool = False  # the response ended where its framing says it does

    @property
    def completion_id(self) -> str | None:
        return next((e.completion_id for e in self.events if e.completion_id), None)

    @property
    def start_ns(self) -> int:
        if self.position == 0 and self.syn_ns is not None:
            return self.syn_ns
        return self.request_first_ns

    @property
    def token_events(self) -> list[WireEvent]:
        return [event for event in self.events if event.token]


class _Direction:
    """One direction of a TCP connection: byte ranges, each with the stamp that first carried it."""

    def __init__(self) -> None:
        self.base: int | None = None  # sequence number of byte 0
        self.pieces: list[tuple[int, int, int, bytes]] = []  # (start, end, ns, bytes), disjoint

    def add(self, seq: int, payload: bytes, ns: int) -> None:
        if self.base is None:
            self.base = seq
        offset = (seq - self.base) % _SEQ_MOD
        if not payload or offset >= _SEQ_MOD // 2:  # before byte 0: a stale retransmit
            return
        end = offset + len(payload)
        pieces = self.pieces
        if not pieces or offset >= pieces[-1][1]:
            pieces.append((offset, end, ns, payload))
            return
        # Overlaps what earlier packets carried: keep only the bytes none of them did.
        fresh: list[tuple[int, int]] = []
        cursor = offset
        first = max(bisect.bisect_right(pieces, offset, key=lambda p: p[0]) - 1, 0)
        for start, stop, _, _ in pieces[first:]:
            if start >= end:
                break
            if stop <= cursor:
                continue
            if start > cursor:
                fresh.append((cursor, start))
            cursor = max(cursor, stop)
        if cursor < end:
            fresh.append((cursor, end))
        for start, stop in fresh:
            piece = (start, stop, ns, payload[start - offset : stop - offset])
            bisect.insort(pieces, piece, key=lambda p: p[0])

    def assemble(self) -> _Bytes:
        """The bytes from 0 up to the first hole, with their stamps."""
        data = bytearray()
        starts: list[int] = []
        stamps: list[int] = []
        for start, _, ns, payload in self.pieces:
            if start != len(data):
                break
            starts.append(start)
            stamps.append(ns)
            data += payload
        return _Bytes(bytes(data), starts, stamps)


@dataclass(frozen=True, slots=True)
class _Bytes:
    data: bytes
    starts: list[int]
    stamps: list[int]

    def at(self, offset: int) -> int:
        return self.stamps[bisect.bisect_right(self.starts, offset) - 1]


@dataclass(slots=True)
class _Connection:
    port: int
    index: int
    syn_ns: int | None = None
    up: _Direction = field(default_factory=_Direction)  # client → server
    down: _Direction = field(default_factory=_Direction)  # server → client


def _frames(path: Path) -> Iterator[tuple[int, dpkt.tcp.TCP]]:
    """(capture stamp in epoch ns, TCP segment) of every IPv4/IPv6 TCP packet of a pcap."""
    with path.open("rb") as handle:
        magic = int.from_bytes(handle.read(4), "little")
        handle.seek(0)
        # A nanosecond file's stamps come as exact Decimals, a microsecond file's as floats.
        nano = magic in (dpkt.pcap.TCPDUMP_MAGIC_NANO, dpkt.pcap.PMUDPCT_MAGIC_NANO)
        reader = dpkt.pcap.Reader(handle)
        link = reader.datalink()
        for stamp, buf in reader:
            ns = int(stamp * 10**9) if nano else round(stamp * 1e6) * 1000
            if link == dpkt.pcap.DLT_EN10MB:
                ip = dpkt.ethernet.Ethernet(buf).data
            elif link == dpkt.pcap.DLT_LINUX_SLL:
                ip = dpkt.sll.SLL(buf).data
            elif link == dpkt.pcap.DLT_NULL:
                ip = dpkt.loopback.Loopback(buf).data
            else:
                ip = dpkt.ip.IP(buf)
            if isinstance(ip, dpkt.ip.IP | dpkt.ip6.IP6) and isinstance(ip.data, dpkt.tcp.TCP):
                yield ns, ip.data


def _connections(path: Path, server_port: int) -> list[_Connection]:
    open_: dict[int, _Connection] = {}
    every: list[_Connection] = []
    per_port: dict[int, int] = defaultdict(int)
    for ns, tcp in _frames(path):
        upward = tcp.dport == server_port
        port = tcp.sport if upward else tcp.dport
        syn = bool(tcp.flags & dpkt.tcp.TH_SYN)
        ack = bool(tcp.flags & dpkt.tcp.TH_ACK)
        connection = open_.get(port)
        if upward and syn and not ack:
            isn = (tcp.seq + 1) % _SEQ_MOD
            if connection is None or connection.up.base != isn:  # else a repeated SYN
                connection = _Connection(port, per_port[port], syn_ns=ns)
                connection.up.base = isn
                per_port[port] += 1
                open_[port] = connection
                every.append(connection)
            continue
        if connection is None:  # opened before the capture began
            connection = _Connection(port, per_port[port])
            per_port[port] += 1
            open_[port] = connection
            every.append(connection)
        direction = connection.up if upward else connection.down
        if syn:
            direction.base = (tcp.seq + 1) % _SEQ_MOD
            continue
        direction.add(tcp.seq, bytes(tcp.data), ns)
    return every


def _headers(head: bytes) -> tuple[str, dict[str, str]]:
    first, *lines = head.decode("latin-1").split("\r\n")
    headers: dict[str, str] = {}
    for line in lines:
        name, _, value = line.partition(":")
        headers[name.strip().lower()] = value.strip()
    return first, headers


def _requests(up: _Bytes) -> list[tuple[int, int, str]]:
    """(first byte, end, request line) of each whole request on the client's side."""
    out = []
    pos = 0
    data = up.data
    while (head_end := data.find(b"\r\n\r\n", pos)) >= 0:
        line, headers = _headers(data[pos:head_end])
        end = head_end + 4 + int(headers.get("content-length", "0"))
        if end > len(data):
            break
        out.append((pos, end, line))
        pos = end
    return out


def _body(data: bytes, pos: int, headers: dict[str, str]) -> tuple[list[tuple[int, bytes]], int]:
    """The body's pieces (offset in the stream, bytes) and where the next response begins
    (-1: the stream ended before the body did)."""
    if "chunked" in headers.get("transfer-encoding", "").lower():
        pieces: list[tuple[int, bytes]] = []
        while True:
            line_end = data.find(b"\r\n", pos)
            if line_end < 0:
                return pieces, -1
            size = int(data[pos:line_end].split(b";")[0].strip() or b"0", 16)
            pos = line_end + 2
            if size == 0:
                trailer_end = data.find(b"\r\n", pos)
                while trailer_end > pos:  # trailer fields, up to the blank line
                    pos = trailer_end + 2
                    trailer_end = data.find(b"\r\n", pos)
                return pieces, (trailer_end + 2 if trailer_end >= 0 else -1)
            if pos + size > len(data):
                pieces.append((pos, data[pos:]))
                return pieces, -1
            pieces.append((pos, data[pos : pos + size]))
            pos += size + 2
    if "content-length" in headers:
        end = pos + int(headers["content-length"])
        return [(pos, data[pos:end])], (end if end <= len(data) else -1)
    return [(pos, data[pos:])], len(data)  # delimited by the connection's close


def is_token_event(payload: Any) -> bool:
    """ramplab's rule (``_take_content`` in ``ramplab/measure/attempt.py``), written again."""
    if not isinstance(payload, dict):
        return False
    choices = payload.get("choices")
    for choice in choices if isinstance(choices, list) else ():
        if not isinstance(choice, dict):
            continue
        delta = choice.get("delta") or {}
        if isinstance(delta, dict):
            content = delta.get("content")
            if isinstance(content, str) and content:
                return True
            if content is None or len(delta) > 1:
                for key in ("reasoning_content", "reasoning"):
                    value = delta.get(key)
                    if isinstance(value, str) and value:
                        return True
        text = choice.get("text")
        if isinstance(text, str) and text:
            return True
    return False


_LINE_END = re.compile(rb"\r\n|\r|\n")


def _events(pieces: list[tuple[int, bytes]], down: _Bytes) -> list[WireEvent]:
    body = b"".join(chunk for _, chunk in pieces)
    body_starts: list[int] = []
    raw_starts: list[int] = []
    at = 0
    for raw, chunk in pieces:
        body_starts.append(at)
        raw_starts.append(raw)
        at += len(chunk)

    def stamp(offset: int) -> int:
        i = bisect.bisect_right(body_starts, offset) - 1
        return down.at(raw_starts[i] + offset - body_starts[i])

    out: list[WireEvent] = []
    data: list[str] = []
    named = False
    event_start: int | None = None
    pos = 0
    for end in _LINE_END.finditer(body):
        line = body[pos : end.start()].decode("utf-8", errors="replace")
        line_start, pos = pos, end.end()
        if not line:
            if data or named:
                text = "\n".join(data)
                try:
                    payload = json.loads(text)
                except ValueError:
                    payload = None
                ident = payload.get("id") if isinstance(payload, dict) else None
                assert event_start is not None
                out.append(
                    WireEvent(
                        stamp(event_start),
                        text,
                        ident if isinstance(ident, str) else None,
                        is_token_event(payload),
                    )
                )
            data, named, event_start = [], False, None
            continue
        if line.startswith(":"):
            continue
        name, colon, value = line.partition(":")
        if colon:
            value = value.removeprefix(" ")
        if event_start is None:
            event_start = line_start
        if name == "data":
            data.append(value)
        elif name == "event":
            named = bool(value)
    return out


def rebuild(path: Path, server_port: int) -> list[Exchange]:
    """Every HTTP/1.1 exchange with ``server_port`` in the capture at ``path``, in order."""
    exchanges: list[Exchange] = []
    for connection in _connections(path, server_port):
        up, down = connection.up.assemble(), connection.down.assemble()
        pos = 0
        for position, (first, end, line) in enumerate(_requests(up)):
            exchange = Exchange(
                connection.port,
                connection.index,
                position,
                connection.syn_ns,
                up.at(first),
                up.at(end - 1),
                line,
            )
            exchanges.append(exchange)
            while pos >= 0 and (head_end := down.data.find(b"\r\n\r\n", pos)) >= 0:
                status_line, headers = _headers(down.data[pos:head_end])
                status = int(status_line.split()[1])
                if 100 <= status < 200:  # an interim response: the final one follows
                    pos = head_end + 4
                    continue
                exchange.status = status
                pieces, pos = _body(down.data, head_end + 4, headers)
                exchange.events = _events(pieces, down)
                exchange.complete = pos >= 0
                break
            else:
                pos = -1
    return exchanges
