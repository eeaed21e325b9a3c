from __future__ import annotations

import pytest

from ramplab.measure.sse import SSEParser

STREAM = (
    b'data: {"a":1}\n\n'
    b'event: error\ndata: {"error":{}}\n\n'
    b': ramplab-timing {"x":1}\n\n'
    b"data: line1\ndata: line2\n\n"
    b"data: [DONE]\n\n"
)


def _all(parser: SSEParser, pieces: list[bytes]) -> list[tuple[str, str, str | None]]:
    out = []
    for i, piece in enumerate(pieces):
        out += [(e.event, e.data, e.comment) for e in parser.feed(piece, float(i))]
    return out


EXPECTED = [
    ("message", '{"a":1}', None),
    ("error", '{"error":{}}', None),
    ("comment", "", 'ramplab-timing {"x":1}'),
    ("message", "line1\nline2", None),
    ("message", "[DONE]", None),
]


@pytest.mark.parametrize("size", [1, 2, 3, 7, 16, len(STREAM)])
def test_any_split_gives_the_same_events(size: int) -> None:
    pieces = [STREAM[i : i + size] for i in range(0, len(STREAM), size)]
    assert _all(SSEParser(), pieces) == EXPECTED


@pytest.mark.parametrize("newline", [b"\r\n", b"\r"])
def test_crlf_and_cr_line_ends(newline: bytes) -> None:
    data = STREAM.replace(b"\n", newline)
    for size in (1, 5, len(data)):
        pieces = [data[i : i + size] for i in range(0, len(data), size)]
        assert _all(SSEParser(), pieces) == EXPECTED


def test_event_stamped_with_arrival_of_its_first_byte() -> None:
    parser = SSEParser()
    assert parser.feed(b'data: {"a"', 1.0) == []
    assert parser.has_partial
    (event,) = parser.feed(b":1}\n\ndata: x", 2.0)
    assert (event.first_byte_at, event.completed_at) == (1.0, 2.0)
    (second,) = parser.feed(b"\n\n", 3.0)
    assert (second.first_byte_at, second.completed_at, second.data) == (2.0, 3.0, "x")
    assert not parser.has_partial
