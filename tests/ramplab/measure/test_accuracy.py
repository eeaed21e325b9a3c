"""Measured TTFT, ITL and TTLT against the real target with a known latency model (jitter 0).

Model: prefill 40 ms flat (per-token 0), ITL 10 ms, no slowdown, one request at a time.
Tolerances, from what can move the numbers: the target paces with asyncio sleeps against absolute
deadlines (a sleep overshoots by up to ~1-2 ms on this 2-core shared machine, never undershoots;
later tokens catch up because deadlines do not drift), loopback adds well under 1 ms, and other
engineers' tests load the same cores. So medians are compared, TTFT may not come earlier than the
model (minus 0.5 ms of timer granularity) and may come at most 8 ms late (request parsing, first-
request warm-up, scheduling), and the per-token ITL median must be within 1.5 ms of 10 ms.
"""

from __future__ import annotations

import itertools
import statistics
from collections.abc import Iterator

import pytest

from ramplab.measure.chain import Endpoint, RequestChain
from ramplab.measure.client import ClientOptions, make_client
from ramplab.measure.record import RequestRecord
from tests.support.processes import TargetProcess

# Asserts on measured time: `make e2e` runs it alone, after its parallel phase.
pytestmark = pytest.mark.timing

PREFILL_MS = 40.0
ITL_MS = 10.0
TOKENS = 24
ENV = {
    "APP_LATENCY__PREFILL_OVERHEAD_MS": str(PREFILL_MS),
    "APP_LATENCY__PREFILL_PER_TOKEN_MS": "0",
    "APP_LATENCY__ITL_MS": str(ITL_MS),
    "APP_LATENCY__ITL_JITTER_MS": "0",
    "APP_LATENCY__SLOWDOWN_PER_SEQ": "0",
}


@pytest.fixture(scope="module")
def target() -> Iterator[TargetProcess]:
    with TargetProcess(ENV) as proc:
        yield proc


def measure(
    target: TargetProcess, chunk_size: int | None, n: int = 12, **extra: object
) -> list[RequestRecord]:
    body = {
        **extra,
        "model": "ramplab-sim-1",
        "messages": [{"role": "user", "content": "hello there"}],
        "max_tokens": TOKENS,
        "ignore_eos": True,
        "stream": True,
        "stream_options": {"include_usage": True},
    }
    if chunk_size is not None:
        body["chunk_size"] = chunk_size
    with make_client(ClientOptions()) as client:
        chain = RequestChain(client, Endpoint(target.url + "/v1/chat/completions"))
        records = [chain.run(body) for _ in range(n)]
    assert all(r.ok for r in records), [r.error_detail for r in records if not r.ok]
    return records


def median(values: list[float | None]) -> float:
    return statistics.median(v for v in values if v is not None)


def test_one_token_per_event(target: TargetProcess) -> None:
    records = measure(target, chunk_size=1)
    for r in records:
        assert r.output_tokens == TOKENS
        assert r.output_tokens_source == "usage"
        assert r.tokens_per_event == [1] * TOKENS
        assert len(r.itl_ms) == TOKENS - 1
        assert r.server_timing_ms["prefill"] == pytest.approx(PREFILL_MS)
    ttft = median([r.ttft_send_ms for r in records])
    assert PREFILL_MS - 0.5 <= ttft <= PREFILL_MS + 8.0
    itl = statistics.median(v for r in records for v in r.itl_ms)
    assert itl == pytest.approx(ITL_MS, abs=1.5)
    ttlt = median([r.ttlt_send_ms for r in records])
    model_ttlt = PREFILL_MS + (TOKENS - 1) * ITL_MS
    assert model_ttlt - 0.5 <= ttlt <= model_ttlt + 8.0
    assert median([r.tpot_ms for r in records]) == pytest.approx(ITL_MS, abs=1.5)
    # TTFT from the intended start equals TTFT from the send in a closed loop, minus lateness.
    for r in records:
        assert r.ttft_ms is not None
        assert r.ttft_send_ms is not None
        assert r.ttft_ms == pytest.approx(r.ttft_send_ms + r.lateness_ms, abs=0.01)


def test_several_tokens_per_event_gives_per_token_itl(target: TargetProcess) -> None:
    chunk = 4
    records = measure(target, chunk_size=chunk)
    for r in records:
        assert r.tokens_per_event == [chunk] * (TOKENS // chunk)
        assert len(r.itl_ms) == TOKENS - chunk  # the first event's tokens are in TTFT
    # Per token, not per event: a naive per-chunk ITL would read 40 ms here.
    itl = statistics.median(v for r in records for v in r.itl_ms)
    assert itl == pytest.approx(ITL_MS, abs=1.5)
    # The first event holds tokens 1..4, sent when the 4th is due: prefill + 3 ITL.
    ttft = median([r.ttft_send_ms for r in records])
    model = PREFILL_MS + (chunk - 1) * ITL_MS
    assert model - 0.5 <= ttft <= model + 8.0


def test_timestamps_agree_with_the_servers_own(target: TargetProcess) -> None:
    """The target discloses when it sent each event (``timing_detail``); compare per request.

    Both sides read CLOCK_MONOTONIC-based clocks, but only differences are compared: a client gap
    minus the server's gap for the same two events, and the client's TTFT (send → first token
    arrived) minus the server's (request arrival → first token handed to the socket). The TTFT
    difference is the request's trip into the server plus the token's trip back, so it is
    positive; on loopback both trips are well under a millisecond when the CPU is free, but with
    the other engineers' suites on the same two cores single requests were seen at 5.6 ms, so the
    median may reach 10 ms. A gap's error is the difference of two
    stamping delays; the median over ~280 gaps stays under 1 ms even on a busy machine.
    """
    records = measure(target, chunk_size=1, timing_detail=True)
    gap_errors: list[float] = []
    ttft_errors: list[float] = []
    for r in records:
        assert len(r.server_events_ms) == TOKENS
        server_gaps = [b - a for a, b in itertools.pairwise(r.server_events_ms)]
        assert len(server_gaps) == len(r.itl_ms)
        gap_errors += [abs(c - s) for c, s in zip(r.itl_ms, server_gaps, strict=True)]
        assert r.ttft_send_ms is not None
        assert r.server_timing_ms["ttft"] == pytest.approx(r.server_events_ms[0])
        ttft_errors.append(r.ttft_send_ms - r.server_timing_ms["ttft"])
    assert 0.0 < statistics.median(ttft_errors) < 10.0
    assert statistics.median(gap_errors) < 1.0
    # Without the extension the list stays empty: nothing depends on it.
    (plain,) = measure(target, chunk_size=1, n=1)
    assert plain.server_events_ms == []
    assert "ttft" in plain.server_timing_ms


def test_phases_add_up_on_plain_http(target: TargetProcess) -> None:
    (first, second) = measure(target, chunk_size=None, n=2)
    for name in ("dns", "connect", "tls", "send", "wait", "first_token", "stream"):
        assert name in first.phases_ms
    assert first.phases_ms["connect"] > 0
    assert first.phases_ms["tls"] == 0.0
    assert second.phases_ms["connect"] == 0.0  # keep-alive reused the connection
    total = sum(
        first.phases_ms[p]
        for p in ("dns", "connect", "stall", "send", "wait", "first_token", "stream")
    )
    assert first.ttlt_send_ms is not None
    assert total == pytest.approx(first.ttlt_send_ms, abs=2.0)


def test_non_streaming_request(target: TargetProcess) -> None:
    body = {
        "model": "ramplab-sim-1",
        "messages": [{"role": "user", "content": "hello"}],
        "max_tokens": 8,
        "ignore_eos": True,
    }
    with make_client(ClientOptions()) as client:
        record = RequestChain(client, Endpoint(target.url + "/v1/chat/completions")).run(body)
    assert record.ok, record.error_detail
    assert record.output_tokens == 8
    assert record.output_tokens_source == "usage"
    assert record.ttft_ms == record.ttlt_ms  # one body: the first token arrives with the last
    assert record.ttlt_send_ms is not None
    assert record.ttlt_send_ms >= PREFILL_MS + 7 * ITL_MS - 0.5
    assert "decode" in record.server_timing_ms
