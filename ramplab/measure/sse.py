"""An incremental Server-Sent Events parser that is fed raw bytes together with their arrival time.

Hand-written on purpose: every library parser (httpx-sse, sseclient, the openai SDK's) reads from a
line iterator, so by the time an event comes out the moment its bytes arrived is gone. Here the
caller reads the clock as soon as the connection hands over a chunk, *before* any parsing, and each
event carries the arrival time of the chunk that held its first byte (AIPerf stamps events the same
way) and of the chunk that completed it. The framing follows the WHATWG SSE spec: lines end in
``\\n``, ``\\r\\n`` or ``\\r``; a blank line dispatches; ``:`` starts a comment; multi-line ``data``
is joined with ``\\n``. Bytes that are not UTF-8 are read as U+FFFD, as the spec says, and
counted (``invalid_utf8``, the first such line kept): the caller decides what they mean.
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(slots=True)
class SSEEvent:
    """One dispatched event (or one comment line, with ``comment`` set and no data)."""

    data: str
    event: str = "message"
    comment: str | None = None
    first_byte_at: float = (
        0.0  # monotonic seconds: arrival of the chunk with the event's first byte
    )
    completed_at: float = 0.0  # monotonic seconds: arrival of the chunk that completed it
    id: str | None = None


@dataclass(slots=True)
class SSEParser:
    """Feed it ``(bytes, arrival_time)``; it returns the events those bytes completed."""

    # The partial line held back from earlier chunks: never holds a "\r" or a "\n".
    _buffer: bytearray = field(default_factory=bytearray)
    _data: list[str] = field(default_factory=list)
    _event: str = ""
    _id: str | None = None
    _line_start: float = 0.0  # arrival of the first byte of the buffered partial line
    _event_start: float | None = None  # arrival of the first byte of the event being built
    _pending_cr: bool = False
    bytes_fed: int = 0
    invalid_utf8: int = 0  # lines that were not valid UTF-8
    first_invalid: bytes = b""  # the first of them, as received

    def _decode(self, raw: bytes) -> str:
        try:
            return raw.decode("utf-8")
        except UnicodeDecodeError:
            self.invalid_utf8 += 1
            if self.invalid_utf8 == 1:
                self.first_invalid = raw
            return raw.decode("utf-8", errors="replace")

    def feed(self, chunk: bytes, arrived_at: float) -> list[SSEEvent]:
        """Parse ``chunk`` (which arrived at monotonic time ``arrived_at``)."""
        self.bytes_fed += len(chunk)
        if self._pending_cr:
            # A "\r" ended the previous chunk: a "\n" right after it ends the same line.
            self._pending_cr = False
            if chunk.startswith(b"\n"):
                chunk = chunk[1:]
        if not chunk:
            return []
        buffer = self._buffer
        if chunk.startswith(b"data: ") and not buffer and self._event_start is None:
            # The usual read: one whole ``data:`` event, on a parser with no event half-built
            # (``_event_start`` is set by any field line). What the general path below would
            # make of it, without splitting and field parsing.
            if chunk.endswith(b"\n\n"):
                payload = chunk[6:-2]
            elif chunk.endswith(b"\r\n\r\n"):  # sse-starlette's line ends
                payload = chunk[6:-4]
            else:
                payload = None
            # Ints: a memchr each, where b"\r" would be a substring search.
            if payload is not None and 0x0A not in payload and 0x0D not in payload:
                text = self._decode(payload)
                return [SSEEvent(text, "message", None, arrived_at, arrived_at, self._id)]
        out: list[SSEEvent] = []
        if buffer:
            if 0x0A not in chunk and 0x0D not in chunk:
                buffer += chunk  # still inside the same line: nothing to split
                return out
            started = self._line_start
            buffer += chunk
            data = bytes(buffer)
            buffer.clear()
        else:
            started = arrived_at
            data = chunk
        # bytes.splitlines() ends lines at exactly "\r\n", "\r" and "\n", as the spec does, and
        # (unlike str's) at nothing else; it does the work of a find-and-cut loop in one C call.
        lines = data.splitlines()
        last = data[-1]
        if last == 0x0D:
            self._pending_cr = True
        elif last != 0x0A:
            buffer += lines.pop()
            self._line_start = arrived_at if lines else started
        for line in lines:
            self._line(line, started, arrived_at, out)
            started = arrived_at
        return out

    def _line(self, raw: bytes, started: float, arrived_at: float, out: list[SSEEvent]) -> None:
        if not raw:
            data = self._data
            if data or self._event:
                # Positional arguments: (data, event, comment, first_byte_at, completed_at, id).
                out.append(
                    SSEEvent(
                        "\n".join(data),
                        self._event or "message",
                        None,
                        started if self._event_start is None else self._event_start,
                        arrived_at,
                        self._id,
                    )
                )
                self._data = []
                self._event = ""
            self._event_start = None
            return
        line = self._decode(raw)
        if line.startswith("data: "):  # nearly every line: skip the generic field split
            value = line[6:]
            name = "data"
        elif line.startswith(":"):
            out.append(SSEEvent("", "comment", line[1:].removeprefix(" "), started, arrived_at))
            return
        else:
            name, sep, value = line.partition(":")
            if sep:
                value = value.removeprefix(" ")
        if self._event_start is None:
            self._event_start = started
        if name == "data":
            self._data.append(value)
        elif name == "event":
            self._event = value
        elif name == "id":
            self._id = value
        # "retry" and unknown fields are ignored, as the spec says.

    @property
    def has_partial(self) -> bool:
        """True when bytes of an unfinished event are buffered (a stream cut mid-event)."""
        return bool(self._buffer or self._data or self._event)
