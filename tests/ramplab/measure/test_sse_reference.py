"""The fast parser against a plain find-and-cut reference (issue 16's speed work).

``SSEParser`` splits a chunk's lines in one call and takes shortcuts for ``data: `` lines; the
reference below is the parser as it was before, one line found and cut at a time, straight from
the WHATWG framing. Random streams of SSE lines (every line ending, comments, multi-line data,
``event:``/``id:``/unknown fields, multi-byte UTF-8, stray bytes), cut at random points and fed
with rising arrival times, must give exactly the same events, chunk by chunk, with every field.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ramplab.measure.sse import SSEEvent, SSEParser


@dataclass
class ReferenceParser:
    buffer: bytearray = field(default_factory=bytearray)
    data: list[str] = field(default_factory=list)
    event: str = ""
    id: str | None = None
    line_start: float = 0.0
    event_start: float | None = None
    pending_cr: bool = False
    bytes_fed: int = 0

    def feed(self, chunk: bytes, arrived_at: float) -> list[SSEEvent]:
        self.bytes_fed += len(chunk)
        out: list[SSEEvent] = []
        if self.pending_cr:
            self.pending_cr = False
            if chunk.startswith(b"\n"):
                chunk = chunk[1:]
        if not chunk:
            return out
        if not self.buffer:
            self.line_start = arrived_at
        self.buffer += chunk
        while (line := self.take_line()) is not None:
            started, self.line_start = self.line_start, arrived_at
            self.line(line, started, arrived_at, out)
        return out

    def take_line(self) -> bytes | None:
        buf = self.buffer
        lf, cr = buf.find(b"\n"), buf.find(b"\r")
        if lf < 0 and cr < 0:
            return None
        if cr >= 0 and (lf < 0 or cr < lf):
            line = bytes(buf[:cr])
            if cr + 1 < len(buf):
                del buf[: cr + (2 if buf[cr + 1] == 0x0A else 1)]
            else:
                self.pending_cr = True
                del buf[: cr + 1]
            return line
        line = bytes(buf[:lf])
        del buf[: lf + 1]
        return line

    def line(self, raw: bytes, started: float, arrived_at: float, out: list[SSEEvent]) -> None:
        if not raw:
            if self.data or self.event:
                first = self.event_start if self.event_start is not None else started
                out.append(
                    SSEEvent(
                        data="\n".join(self.data),
                        event=self.event or "message",
                        first_byte_at=first,
                        completed_at=arrived_at,
                        id=self.id,
                    )
                )
            self.data, self.event, self.event_start = [], "", None
            return
        text = raw.decode("utf-8", errors="replace")
        if text.startswith(":"):
            comment = text[1:].removeprefix(" ")
            out.append(SSEEvent("", "comment", comment, started, arrived_at))
            return
        if self.event_start is None:
            self.event_start = started
        name, sep, value = text.partition(":")
        if sep:
            value = value.removeprefix(" ")
        if name == "data":
            self.data.append(value)
        elif name == "event":
            self.event = value
        elif name == "id":
            self.id = value

    @property
    def has_partial(self) -> bool:
        return bool(self.buffer or self.data or self.event)


LINES = st.one_of(
    st.sampled_from(
        [
            b"",
            b"",
            b'data: {"choices":[{"delta":{"content":" tok"}}]}',
            b"data: [DONE]",
            b"data:no-space",
            b"data:  two spaces",
            b"data",
            b"data: ",
            b"event: error",
            b"event:",
            b"id: 42",
            b"id",
            b"retry: 100",
            b"unknown: x",
            b": ramplab-timing {}",
            b":",
            b":no-space comment",
            "data: héllo ✓ 文字".encode(),
            b"data: \xff\xfe broken utf-8",
        ]
    ),
    st.binary(max_size=12).map(lambda b: b.replace(b"\r", b"").replace(b"\n", b"")),
)
ENDINGS = st.sampled_from([b"\n", b"\r\n", b"\r"])


@st.composite
def fed_streams(draw: st.DrawFn) -> list[tuple[bytes, float]]:
    """A stream of lines with mixed endings (and sometimes raw bytes, "\\r" and "\\n" among
    them), cut at random points, each piece with a rising arrival time."""
    lines = draw(st.lists(st.tuples(LINES, ENDINGS), max_size=30))
    stream = b"".join(line + end for line, end in lines)
    if draw(st.booleans()):
        stream += draw(st.binary(max_size=20))  # a stray tail: a stream cut mid-line
    cuts = draw(st.sets(st.integers(0, len(stream)), max_size=12))
    ends = list(itertools.accumulate(len(line) + len(end) for line, end in lines))
    if draw(st.booleans()):  # reads of whole events, as servers usually send them
        cuts |= {end for end, (line, _) in zip(ends, lines, strict=True) if not line}
    if ends and draw(st.booleans()):  # reads of whole lines, or a byte past one
        cuts |= {end + draw(st.integers(0, 1)) for end in ends if draw(st.booleans())}
    bounds = [0, *sorted(cuts), len(stream)]
    pieces = [stream[a:b] for a, b in itertools.pairwise(bounds)]
    gaps = draw(st.lists(st.floats(0.0, 1.0), min_size=len(pieces), max_size=len(pieces)))
    arrivals, now = [], 0.0
    for gap in gaps:
        now += gap
        arrivals.append(now)
    return list(zip(pieces, arrivals, strict=True))


@settings(max_examples=1500, deadline=None)
@given(fed=fed_streams())
def test_same_events_as_the_reference_for_any_stream_and_any_cuts(
    fed: list[tuple[bytes, float]],
) -> None:
    parser, reference = SSEParser(), ReferenceParser()
    for chunk, arrived_at in fed:
        assert parser.feed(chunk, arrived_at) == reference.feed(chunk, arrived_at)
        assert parser.has_partial == reference.has_partial
        assert parser.bytes_fed == reference.bytes_fed


@given(
    stream=st.binary(max_size=200).map(lambda b: b.replace(b"\r", b"\r\n")),
    size=st.integers(1, 8),
)
def test_same_events_for_crlf_streams_in_small_reads(stream: bytes, size: int) -> None:
    # Every "\r\n" is cut between its two bytes at some size: the pending-"\r" path.
    parser, reference = SSEParser(), ReferenceParser()
    for i in range(0, len(stream), size):
        chunk = stream[i : i + size]
        assert parser.feed(chunk, float(i)) == reference.feed(chunk, float(i))


@pytest.mark.parametrize(
    "pieces",
    [
        [b"event: error\n", b"data: x\n\n"],
        [b"data: a\n", b"data: b\n\n"],
        [b"retry: 1\n", b"data: x\n\n"],
        [b"id: 7\n\n", b"data: x\n\n"],
        [b"da", b"data: x\n\n"],
        [b"data: a\r", b"\ndata: x\n\n"],
        [b"data: x\ny\n\n"],
        [b"data: x\ny", b"\n\n"],
        [b"data: x\r\n\n"],
        [b"data: x\n\r\n"],
        [b"data: x\r\n\r\n", b"\ndata: y\r\n\r\n"],
        [b"data: x\ry\r\n\r\n"],
        [b"data: x\r\n\r\n\r\n"],
        [b"data: x\r\r"],
        [b"event: e\r\n", b"data: x\r\n\r\n"],
        [b"data: a\n\ndata: b\n\n"],
        [b"data: x\n\n", b"data: \xe6\x96\x87\xff\n\n"],
    ],
)
def test_same_events_where_a_read_holds_exactly_one_event(pieces: list[bytes]) -> None:
    # A whole ``data:`` event in one read takes a shortcut; each case is a way it must not.
    parser, reference = SSEParser(), ReferenceParser()
    for i, chunk in enumerate(pieces):
        assert parser.feed(chunk, float(i)) == reference.feed(chunk, float(i))
