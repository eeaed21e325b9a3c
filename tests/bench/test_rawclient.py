"""The reference client's decoding, on hand-made reads (one byte each, as it reads them)."""

from __future__ import annotations

import json

import pytest

from bench.rawclient import _decode, _Framing


def _event(text: str | None) -> bytes:
    delta = {} if text is None else {"content": text}
    return b"data: " + json.dumps({"choices": [{"index": 0, "delta": delta}]}).encode() + b"\n\n"


def _chunked(*parts: bytes) -> bytes:
    out = b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n"
    for part in parts:
        out += f"{len(part):x}\r\n".encode() + part + b"\r\n"
    return out + b"0\r\n\r\n"


def _reads(raw: bytes, times: list[tuple[int, float]]) -> list[tuple[float, bytes]]:
    """One read per byte; ``times`` gives (first byte offset, stamp) of each packet."""
    out = []
    for i in range(len(raw)):
        at = max(stamp for start, stamp in times if start <= i)
        out.append((at, raw[i : i + 1]))
    return out


def test_each_content_event_gets_the_stamp_of_the_packet_holding_its_first_byte() -> None:
    role, first, second, done = _event(None), _event("Hi"), _event(" there"), b"data: [DONE]\n\n"
    raw = _chunked(role, first, second + done)
    head = raw.index(b"\r\n\r\n") + 4
    second_packet = raw.index(first) - len(f"{len(first):x}\r\n")
    third_packet = raw.index(second) - len(f"{len(second + done):x}\r\n")
    reads = _reads(raw, [(0, 10.010), (second_packet, 10.020), (third_packet, 10.0255)])
    assert head < second_packet
    result = _decode(reads, sent=10.0)
    assert result.status == 200
    assert result.saw_done
    assert result.content_events == 2
    assert result.ttft_ms == pytest.approx(20.0)
    assert result.itl_ms == [pytest.approx(5.5)]
    assert result.ttlt_ms == pytest.approx(25.5)


def test_an_event_split_across_packets_counts_from_its_first_byte() -> None:
    first = _event("a")
    raw = _chunked(first[:10], first[10:] + b"data: [DONE]\n\n")
    split = raw.index(first[10:])
    result = _decode(_reads(raw, [(0, 1.001), (split, 1.009)]), sent=1.0)
    assert result.ttft_ms == pytest.approx(1.0)


def test_content_length_bodies_and_framing() -> None:
    body = _event("x") + b"data: [DONE]\n\n"
    raw = b"HTTP/1.1 200 OK\r\ncontent-length: " + str(len(body)).encode() + b"\r\n\r\n" + body
    framing = _Framing()
    done = [framing.complete(raw[i : i + 1]) for i in range(len(raw))]
    assert done.index(True) == len(raw) - 1
    assert _decode(_reads(raw, [(0, 2.0)]), sent=1.999).ttft_ms == pytest.approx(1.0)
    chunked = _chunked(body)
    framing = _Framing()
    done = [framing.complete(chunked[i : i + 1]) for i in range(len(chunked))]
    assert done.index(True) == len(chunked) - 1
