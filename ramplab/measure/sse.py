"""An incremental Server-Sent Events parser that is fed raw bytes together with their arrival time.

Hand-written on purpose: every library parser (httpx-sse, sseclient, the openai SDK's) reads from a
line iterator, so by the time an event comes out the moment its bytes arrived is gone. Here the
caller reads the clock as soon as the connection hands over a chunk, *before* any parsing, and each
event carries the arrival time of the chunk that held its first byte (AIPerf stamps events the same
way) and of the chunk that completed it. The framing follows the WHATWG SSE spec: lines end in
``\\n``, ``\\r\\n`` or ``\\r``; a blank line dispatches; ``:`` starts a comment; multi-line ``data``
is joined with ``\\n``.
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

    _buffer: bytearray = field(default_factory=bytearray)
    _data: list[str] = field(default_factory=list)
    _event: str = ""
    _id: str | None = None
    _line_start: float = 0.0  # arrival of the first byte of the buffered partial line
    _event_start: float | None = None  # arrival of the first byte of the event being built
    _pending_cr: bool = False
    bytes_fed: int = 0

    def feed(self, chunk: bytes, arrived_at: float) -> list[SSEEvent]:
        """Parse ``chunk`` (which arrived at monotonic time ``arrived_at``)."""
        self.bytes_fed += len(chunk)
        out: list[SSEEvent] = []
        if self._pending_cr:
            # A "\r" ended the previous chunk: a "\n" right after it ends the same line.
            self._pending_cr = False
            if chunk.startswith(b"\n"):
                chunk = chunk[1:]
        if not chunk:
            return out
        if not self._buffer:
            self._line_start = arrived_at
        self._buffer += chunk
        while True:
            line = self._take_line()
            if line is None:
                break
            started = self._line_start
            self._line_start = arrived_at
            self._line(line, started, arrived_at, out)
        return out

    def _take_line(self) -> bytes | None:
        buf = self._buffer
        lf = buf.find(b"\n")
        cr = buf.find(b"\r")
        if lf < 0 and cr < 0:
            return None
        if cr >= 0 and (lf < 0 or cr < lf):
            line = bytes(buf[:cr])
            if cr + 1 < len(buf):
                del buf[: cr + (2 if buf[cr + 1] == 0x0A else 1)]
            else:
                self._pending_cr = True
                del buf[: cr + 1]
            return line
        line = bytes(buf[:lf])
        del buf[: lf + 1]
        return line

    def _line(self, raw: bytes, started: float, arrived_at: float, out: list[SSEEvent]) -> None:
        if not raw:
            if self._data or self._event:
                out.append(
                    SSEEvent(
                        data="\n".join(self._data),
                        event=self._event or "message",
                        first_byte_at=self._event_start
                        if self._event_start is not None
                        else started,
                        completed_at=arrived_at,
                        id=self._id,
                    )
                )
            self._data = []
            self._event = ""
            self._event_start = None
            return
        line = raw.decode("utf-8", errors="replace")
        if line.startswith(":"):
            out.append(
                SSEEvent(
                    data="",
                    event="comment",
                    comment=line[1:].removeprefix(" "),
                    first_byte_at=started,
                    completed_at=arrived_at,
                )
            )
            return
        if self._event_start is None:
            self._event_start = started
        name, sep, value = line.partition(":")
        if sep:
            value = value.removeprefix(" ")
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
