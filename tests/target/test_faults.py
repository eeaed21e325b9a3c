"""Injected faults on a real target: exact counts under a seed, headers, windows, mid-stream.

Every test configures the faults it needs with ``PUT /admin/config``, which restarts the fault
counters and the outage clock, so the n-th request after the PUT meets ``draw(seed, …, n)``.
"""

from __future__ import annotations

import math
import threading
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from target_service.embedded_redis import EmbeddedRedis
from target_service.faults import draw
from tests.support.processes import TargetProcess
from tests.target.stress_helpers import (
    ADMIN_TOKEN,
    chat_body,
    metric,
    parse_sse,
    target_env,
    wait_until,
)

ADMIN = {"authorization": f"Bearer {ADMIN_TOKEN}"}
NO_FAULTS = {
    "ratio_429": 0.0,
    "ratio_503": 0.0,
    "outages": [],
    "midstream_ratio": 0.0,
    "midstream_mode": "error_event",
    "shed_waiting_above": 0,
    "retry_after_s": 1.0,
}


@pytest.fixture(scope="module")
def target(
    redis_server: EmbeddedRedis, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[TargetProcess]:
    env = target_env(
        redis_server,
        admin_token=ADMIN_TOKEN,
        signing__mode="off",
        # Prefill 0 and ITL 0: requests cost only their HTTP round trip, so 400 of them are quick.
        latency__prefill_overhead_ms=0,
        latency__itl_ms=0,
        scheduler__max_num_seqs=1,
    )
    log = tmp_path_factory.mktemp("faults") / "target.log"
    with TargetProcess(env, log_path=log) as process:
        yield process


def set_faults(url: str, **fields: object) -> None:
    response = httpx.put(
        url + "/admin/config", json={"faults": {**NO_FAULTS, **fields}}, headers=ADMIN
    )
    assert response.status_code == 200, response.text


def binomial_bounds(n: int, p: float) -> tuple[float, float]:
    # ±4.5 σ: a correct injector falls outside with probability < 1e-5 for any seed.
    sigma = math.sqrt(n * p * (1 - p))
    return n * p - 4.5 * sigma, n * p + 4.5 * sigma


def test_ratios_are_exact_under_the_seed_and_within_binomial_bounds(target: TargetProcess) -> None:
    n, seed, p429, p503 = 400, 1234, 0.2, 0.1
    set_faults(target.url, seed=seed, ratio_429=p429, ratio_503=p503, retry_after_s=2.5)
    statuses: list[int] = []
    with httpx.Client(base_url=target.url) as client:
        for _ in range(n):
            response = client.post("/v1/chat/completions", json=chat_body(max_tokens=1))
            statuses.append(response.status_code)
            if response.status_code in (429, 503):
                assert response.headers["retry-after"] == "3"
                assert response.headers["retry-after-ms"] == "2500"
                assert response.json()["error"]["type"] in (
                    "rate_limit_error",
                    "service_unavailable",
                )
            if response.status_code == 429:
                assert response.headers["x-ratelimit-remaining-requests"] == "0"
    draws = [draw(seed, "before", i) for i in range(n)]
    expected = [429 if u < p429 else 503 if u < p429 + p503 else 200 for u in draws]
    assert statuses == expected
    for status, p in ((429, p429), (503, p503)):
        low, high = binomial_bounds(n, p)
        assert low <= statuses.count(status) <= high


def test_outage_window_then_recovery(target: TargetProcess) -> None:
    set_faults(target.url, outages=[{"start_s": 0, "duration_s": 1.0}])
    first = httpx.post(target.url + "/v1/chat/completions", json=chat_body(max_tokens=1))
    assert first.status_code == 503
    # Retry-After is the time left in the window, never more than the window.
    assert 0 < int(first.headers["retry-after-ms"]) <= 1000
    assert first.headers["retry-after"] == "1"
    ok = wait_until(
        lambda: (
            httpx.post(
                target.url + "/v1/chat/completions", json=chat_body(max_tokens=1)
            ).status_code
            == 200
        ),
        10,
        "the outage window to end",
    )
    assert ok


def test_outage_window_starting_later(target: TargetProcess) -> None:
    set_faults(target.url, outages=[{"start_s": 30, "duration_s": 5}])
    assert (
        httpx.post(target.url + "/v1/chat/completions", json=chat_body(max_tokens=1)).status_code
        == 200
    )


def test_midstream_error_event_then_done(target: TargetProcess) -> None:
    set_faults(
        target.url, midstream_ratio=1.0, midstream_mode="error_event", midstream_after_tokens=2
    )
    response = httpx.post(
        target.url + "/v1/chat/completions", json=chat_body(stream=True, max_tokens=6)
    )
    assert response.status_code == 200
    parsed = parse_sse(response.text)
    content_chunks = [
        c for c in parsed.chunks if c["choices"] and c["choices"][0]["delta"].get("content")
    ]
    assert len(content_chunks) == 2
    assert parsed.errors[0]["error"]["type"] == "server_error"
    assert parsed.done
    assert "ramplab-timing" not in parsed.comments


def test_midstream_drop_closes_the_connection_without_a_traceback(target: TargetProcess) -> None:
    set_faults(target.url, midstream_ratio=1.0, midstream_mode="drop", midstream_after_tokens=1)
    with pytest.raises(httpx.RemoteProtocolError):
        httpx.post(target.url + "/v1/chat/completions", json=chat_body(stream=True, max_tokens=4))
    set_faults(target.url)
    assert (
        httpx.post(target.url + "/v1/chat/completions", json=chat_body(max_tokens=1)).status_code
        == 200
    )
    assert target.log_path is not None
    assert "Traceback" not in Path(target.log_path).read_text()


def test_midstream_ratio_is_exact_under_the_seed(target: TargetProcess) -> None:
    n, seed, ratio = 60, 99, 0.3
    set_faults(target.url, seed=seed, midstream_ratio=ratio, midstream_after_tokens=1)
    failed = 0
    with httpx.Client(base_url=target.url) as client:
        for _ in range(n):
            parsed = parse_sse(
                client.post("/v1/chat/completions", json=chat_body(stream=True, max_tokens=2)).text
            )
            failed += bool(parsed.errors)
    assert failed == sum(draw(seed, "mid", i) < ratio for i in range(n))


def test_overload_shedding_from_the_scheduler_queue(target: TargetProcess) -> None:
    # One slot (max_num_seqs 1): a long stream holds it, a second request waits for it, and a
    # third finds one waiter already queued and is shed.
    set_faults(target.url, shed_waiting_above=1)
    # ITL 0 in this target; 1 ms makes the holder's 4,000 tokens last seconds.
    slow = httpx.put(target.url + "/admin/config", json={"latency": {"itl_ms": 1.0}}, headers=ADMIN)
    assert slow.status_code == 200
    waiting_result: list[int] = []
    with (
        httpx.Client(base_url=target.url, timeout=30) as holder,
        httpx.Client(base_url=target.url, timeout=30) as waiter,
    ):
        long_body = chat_body(stream=True, max_tokens=4000)
        with holder.stream("POST", "/v1/chat/completions", json=long_body) as held:
            assert held.status_code == 200
            thread = threading.Thread(
                target=lambda: waiting_result.append(
                    waiter.post("/v1/chat/completions", json=chat_body(max_tokens=1)).status_code
                )
            )
            thread.start()
            wait_until(
                lambda: (
                    metric(httpx.get(target.url + "/metrics").text, "target_waiting_sequences") == 1
                ),
                10,
                "the second request to wait for the slot",
            )
            shed = httpx.post(target.url + "/v1/chat/completions", json=chat_body(max_tokens=1))
            assert shed.status_code == 503, shed.text
            assert shed.json()["error"]["code"] == "overloaded"
            assert shed.headers["retry-after"] == "1"
        # The holder went away: its slot frees and the waiter is admitted.
        thread.join(timeout=30)
    fast = httpx.put(target.url + "/admin/config", json={"latency": {"itl_ms": 0.0}}, headers=ADMIN)
    assert fast.status_code == 200
    assert waiting_result == [200]
