"""Scheduler behaviour seen from outside: queue limits, head-of-line blocking, freed slots."""

from __future__ import annotations

import socket
from collections.abc import Iterator
from contextlib import contextmanager

import httpx
import pytest

from tests.support.scrape import metric, wait_for
from tests.target.conftest import StartThreadTarget

MODEL = "ramplab-sim-1"


def body(tokens: int, **extra: object) -> dict[str, object]:
    return {
        "model": MODEL,
        "messages": [{"role": "user", "content": "hello"}],
        "stream": True,
        "max_tokens": tokens,
        "ignore_eos": True,
        **extra,
    }


@contextmanager
def open_stream(client: httpx.Client, url: str, tokens: int) -> Iterator[httpx.Response]:
    """A stream that holds its scheduler slot: headers come only after admission and prefill."""
    with client.stream("POST", url + "/v1/chat/completions", json=body(tokens)) as response:
        assert response.status_code == 200
        yield response


def queue_ms(response: httpx.Response) -> float:
    timing = dict(
        part.strip().split(";dur=") for part in response.headers["server-timing"].split(",")
    )
    return float(timing["queue"])


def test_full_queue_answers_503_with_retry_after(start_thread_target: StartThreadTarget) -> None:
    target = start_thread_target(
        {"APP_SCHEDULER__MAX_NUM_SEQS": "1", "APP_SCHEDULER__MAX_WAITING": "0"}
    )
    with httpx.Client(timeout=30) as client, open_stream(client, target.url, 400):
        refused = client.post(target.url + "/v1/chat/completions", json=body(5))
    assert refused.status_code == 503
    assert refused.headers["retry-after"] == "1"
    assert refused.headers["retry-after-ms"] == "1000"
    assert refused.json()["error"]["code"] == "overloaded"
    assert (
        metric(target.url + "/metrics", "target_rejected_requests_total", reason="queue_full") == 1
    )


def test_waiting_request_times_out_with_503(start_thread_target: StartThreadTarget) -> None:
    target = start_thread_target(
        {
            "APP_SCHEDULER__MAX_NUM_SEQS": "1",
            "APP_SCHEDULER__MAX_WAITING": "1",
            "APP_SCHEDULER__QUEUE_TIMEOUT_S": "0.2",
        }
    )
    with httpx.Client(timeout=30) as client, open_stream(client, target.url, 400):
        waited = client.post(target.url + "/v1/chat/completions", json=body(5))
    assert waited.status_code == 503
    assert waited.json()["error"]["code"] == "queue_timeout"


@pytest.mark.timing  # asserts on measured time: run alone, after the rest
def test_static_batches_make_short_requests_wait_behind_long_ones(
    start_thread_target: StartThreadTarget,
) -> None:
    long_tokens, itl_s = 200, 0.005  # the long request decodes for ~1 s
    waits = {}
    for kind in ("continuous", "static"):
        target = start_thread_target(
            {"APP_SCHEDULER__KIND": kind, "APP_SCHEDULER__MAX_NUM_SEQS": "4"}
        )
        with httpx.Client(timeout=30) as client:
            with open_stream(client, target.url, long_tokens):
                # The long stream is admitted and past prefill (and the 5 ms batch window).
                short = client.post(target.url + "/v1/chat/completions", json=body(3))
            assert short.status_code == 200
            waits[kind] = queue_ms(short)
    # Continuous batching admits the short request at once; the static batch makes it wait
    # for the long one, which still had most of its ~1,000 ms of decode ahead of it.
    assert waits["continuous"] < 50
    assert waits["static"] > 0.5 * long_tokens * itl_s * 1000


def test_disconnect_frees_the_slot_at_once(start_thread_target: StartThreadTarget) -> None:
    target = start_thread_target(
        {"APP_SCHEDULER__MAX_NUM_SEQS": "1", "APP_SCHEDULER__MAX_WAITING": "0"}
    )
    metrics_url = target.url + "/metrics"
    with httpx.Client(timeout=30) as client:
        with open_stream(client, target.url, 100_000) as stream:
            chunks = stream.iter_raw()  # kept referenced: a dropped iterator closes the stream
            next(chunks)
            assert metric(metrics_url, "target_running_sequences") == 1
        # Leaving the block closes the connection mid-stream.
        wait_for(lambda: metric(metrics_url, "target_running_sequences") == 0, what="slot freed")
        assert metric(metrics_url, "target_client_disconnects_total", kind="disconnect") == 1
        # The single slot is free again: the next request is admitted, not refused.
        again = client.post(target.url + "/v1/chat/completions", json=body(3))
        assert again.status_code == 200


def test_client_that_stops_reading_is_cut_off_after_send_timeout(
    start_thread_target: StartThreadTarget,
) -> None:
    target = start_thread_target({"APP_STREAM__SEND_TIMEOUT_S": "0.5", "APP_LATENCY__ITL_MS": "0"})
    payload = httpx.Request("POST", target.url + "/v1/chat/completions", json=body(120_000))
    request_bytes = (
        f"POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\n"
        f"Content-Type: application/json\r\nContent-Length: {len(payload.content)}\r\n\r\n"
    ).encode() + payload.content
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        # A tiny receive window so the server's writes block soon after we stop reading.
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        sock.connect(("127.0.0.1", target.port))
        sock.sendall(request_bytes)
        metrics_url = target.url + "/metrics"
        wait_for(
            lambda: metric(metrics_url, "target_client_disconnects_total", kind="send_failed") == 1,
            timeout_s=30,
            what="send timeout",
        )
        assert metric(metrics_url, "target_running_sequences") == 0
