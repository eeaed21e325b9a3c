"""The wire rebuild (``bench/wire.py``) and the comparison (``bench/wire_compare.py``) on a
capture written here packet by packet, with exact expected times."""

from __future__ import annotations

import json
from decimal import Decimal
from pathlib import Path

import dpkt
import pytest

from bench.wire import Exchange, is_token_event, rebuild
from bench.wire_compare import Comparison, Deltas, compare, match

CLIENT, SERVER = 40000, 8000
T0 = 1_796_000_000_000_000_000  # epoch ns of the SYN
MS = 1_000_000


def _frame(sport: int, dport: int, seq: int, flags: int, payload: bytes = b"") -> bytes:
    tcp = dpkt.tcp.TCP(sport=sport, dport=dport, seq=seq, flags=flags, data=payload)
    ip = dpkt.ip.IP(src=b"\x7f\0\0\x01", dst=b"\x7f\0\0\x01", p=dpkt.ip.IP_PROTO_TCP, data=tcp)
    ip.len = len(ip)
    eth = dpkt.ethernet.Ethernet(
        src=b"\0" * 6, dst=b"\0" * 6, type=dpkt.ethernet.ETH_TYPE_IP, data=ip
    )
    return bytes(eth)


def _chunk(data: bytes) -> bytes:
    return f"{len(data):x}\r\n".encode() + data + b"\r\n"


def _delta(text: str, cid: str = "c1") -> bytes:
    return json.dumps({"id": cid, "choices": [{"delta": {"content": text}}]}).encode()


ROLE = b'data: {"id":"c1","choices":[{"delta":{"role":"assistant"}}]}\n\n'
EVENT_B = b"data: " + _delta("Hel") + b"\n\n"
EVENT_C = b"data: " + _delta("lo") + b"\r\n\r\n"
USAGE = b'data: {"id":"c1","choices":[],"usage":{"completion_tokens":2}}\n\n'
REQUEST_HEAD = b"POST /v1/chat/completions HTTP/1.1\r\nHost: t\r\nContent-Length: 2\r\n\r\n"
RESPONSE_HEAD = (
    b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n"
)
SECOND_BODY = b'data: {"id":"c2","choices":[{"text":"x"}]}\r\n\r\n'
SECOND_HEAD = f"HTTP/1.1 200 OK\r\ncontent-length: {len(SECOND_BODY)}\r\n\r\n".encode()


def _packets() -> list[tuple[int, bytes]]:
    """(ns after T0, frame): one kept-alive connection, two requests."""
    syn, ack, psh = dpkt.tcp.TH_SYN, dpkt.tcp.TH_ACK, dpkt.tcp.TH_PUSH | dpkt.tcp.TH_ACK
    up_seq, down_seq = 100, 5000  # initial sequence numbers
    up = up_seq + 1
    down = down_seq + 1
    out: list[tuple[int, bytes]] = []

    def send(at_ns: int, payload: bytes, *, upward: bool, seq: int | None = None) -> None:
        nonlocal up, down
        if upward:
            out.append((at_ns, _frame(CLIENT, SERVER, up if seq is None else seq, psh, payload)))
            up += len(payload) if seq is None else 0
        else:
            out.append((at_ns, _frame(SERVER, CLIENT, down if seq is None else seq, psh, payload)))
            down += len(payload) if seq is None else 0

    out.append((0, _frame(CLIENT, SERVER, up_seq, syn)))
    out.append((MS // 10, _frame(SERVER, CLIENT, down_seq, syn | ack)))
    send(1 * MS, REQUEST_HEAD, upward=True)  # the head, then the body in a packet of its own
    send(1 * MS + 200_000, b"{}", upward=True)
    send(10 * MS, RESPONSE_HEAD, upward=False)
    send(20 * MS, _chunk(ROLE), upward=False)
    b_chunk = _chunk(EVENT_B)
    size_line = b_chunk.index(b"\r\n") + 2
    send(29 * MS + 500_000, b_chunk[:size_line], upward=False)  # the chunk-size line alone
    b_first_seq = down
    send(30 * MS, b_chunk[size_line : size_line + 12], upward=False)  # the event spans two
    send(31 * MS, b_chunk[size_line + 12 :], upward=False)
    send(
        35 * MS, b_chunk[size_line : size_line + 12], upward=False, seq=b_first_seq
    )  # a retransmit
    # A retransmit that overlaps the last 5 bytes already sent and carries the next chunk too.
    overlap = b_chunk[-5:] + _chunk(EVENT_C)
    send(40 * MS, overlap, upward=False, seq=down - 5)
    down += len(overlap) - 5
    send(45 * MS, _chunk(b": ramplab-timing {}\n\n"), upward=False)
    send(50 * MS, _chunk(USAGE) + _chunk(b"data: [DONE]\n\n") + b"0\r\n\r\n", upward=False)
    send(100 * MS, REQUEST_HEAD + b"{}", upward=True)
    send(140 * MS, SECOND_HEAD, upward=False)
    send(150 * MS, SECOND_BODY, upward=False)
    return out


@pytest.fixture
def exchanges(tmp_path: Path) -> list[Exchange]:
    path = tmp_path / "synthetic.pcap"
    with path.open("wb") as handle:
        writer = dpkt.pcap.Writer(handle, snaplen=65535, nano=True)
        for at_ns, frame in _packets():
            writer.writepkt_time(frame, Decimal(T0 + at_ns) / Decimal(10**9))
    return rebuild(path, SERVER)


def test_rebuild_stamps_each_event_with_the_packet_of_its_first_byte(
    exchanges: list[Exchange],
) -> None:
    assert len(exchanges) == 2
    first = exchanges[0]
    assert (first.local_port, first.position, first.status, first.complete) == (
        CLIENT,
        0,
        200,
        True,
    )
    assert first.start_ns == first.syn_ns == T0
    assert first.request_first_ns == T0 + 1 * MS
    assert first.request_last_ns == T0 + 1 * MS + 200_000
    assert [(e.at_ns - T0, e.token) for e in first.events] == [
        (20 * MS, False),  # the role-only opening event
        (30 * MS, True),  # its first byte rode behind the chunk-size line, then spanned two
        (40 * MS, True),  # the overlapping retransmit's new bytes
        (50 * MS, False),  # usage
        (50 * MS, False),  # [DONE]
    ]
    assert first.events[1].data == _delta("Hel").decode()
    assert first.completion_id == "c1"


def test_a_second_request_on_a_kept_alive_connection_starts_at_its_first_packet(
    exchanges: list[Exchange],
) -> None:
    second = exchanges[1]
    assert (second.position, second.connection, second.complete) == (1, 0, True)
    assert second.start_ns == second.request_first_ns == T0 + 100 * MS
    assert [(e.at_ns - T0, e.token, e.completion_id) for e in second.events] == [
        (150 * MS, True, "c2")
    ]


def test_token_events_follow_ramplabs_rule() -> None:
    assert is_token_event({"choices": [{"delta": {"reasoning_content": "hm"}}]})
    assert is_token_event({"choices": [{"delta": {"content": None, "reasoning": "hm"}}]})
    assert is_token_event({"choices": [{"text": "x"}]})
    assert not is_token_event({"choices": [{"delta": {"content": ""}}]})
    assert not is_token_event({"choices": [{"delta": {"role": "assistant"}}]})
    assert not is_token_event("[DONE]")


def _record(
    port: int, cid: str, ttft: float, itl: list[float], counts: list[int]
) -> dict[str, object]:
    last = ttft + sum(itl)
    return {
        "request_id": cid,
        "ok": True,
        "step": 0,
        "intended_start": 0.0,
        "local_port": port,
        "completion_id": cid,
        "ttft_send_ms": ttft,
        "ttlt_send_ms": last,
        "itl_ms": itl,
        "tokens_per_event": counts,
    }


def test_records_match_and_compare_per_event(exchanges: list[Exchange]) -> None:
    # ramplab 0.5 ms late on event 0 and 0.75 ms late on event 1 (wire: 30 and 40 ms after the SYN).
    first = _record(CLIENT, "c1", 30.5, [10.25], [1, 1])
    first["coalesced_events"] = [1]
    second = _record(CLIENT, "c2", 50.0, [], [1])
    stray = _record(CLIENT + 1, "c9", 1.0, [], [1])
    matching = match([first, second, stray], exchanges)
    assert [r["completion_id"] for r, _ in matching.pairs] == ["c1", "c2"]
    assert matching.records == [stray]
    assert matching.exchanges == []
    one = compare(*matching.pairs[0])
    assert isinstance(one, Comparison)
    assert one.delta_ms == pytest.approx([0.5, 0.75])
    assert one.ttft_delta_ms == pytest.approx(0.5)
    assert one.itl_delta_ms == pytest.approx([0.25])
    assert one.clean_itl_delta_ms == []  # its only gap ends at a coalesced event
    assert one.ttlt_delta_ms == pytest.approx(0.75)
    assert one.new_connection
    two = compare(*matching.pairs[1])
    assert isinstance(two, Comparison)
    assert two.wire_ms == pytest.approx((50.0,))  # from the request's first packet
    assert not two.new_connection
    deltas = Deltas.of([one, two])
    assert deltas.ttft[2] == pytest.approx(0.5)
    assert not deltas.coalesced_known  # the second record does not say


def test_a_record_with_other_token_events_than_the_wire_is_not_compared(
    exchanges: list[Exchange],
) -> None:
    record = _record(CLIENT, "c1", 30.0, [5.0, 5.0], [1, 1, 1])
    assert compare(record, exchanges[0]) == "3 token events in the record, 2 on the wire"
