"""GCRA limits on a real target and Redis: exact counts and the predicted ``Retry-After``.

Each test uses its own client identity (with ``auth.mode = off`` the identity is a hash of the
``Authorization`` header), so tests share the target without sharing a bucket.
"""

from __future__ import annotations

import math
import time
import uuid
from collections.abc import Iterator

import httpx
import pytest
import redis

from target_service.auth import anonymous_identity
from target_service.embedded_redis import EmbeddedRedis
from target_service.ratelimit import reset_text
from tests.support.processes import TargetProcess
from tests.target.stress_helpers import chat_body, metric, target_env, wait_until

LIMIT = 4
PERIOD_S = 2.0
INTERVAL_MS = PERIOD_S * 1000 / LIMIT  # GCRA emission interval T


@pytest.fixture(scope="module")
def client_only(redis_server: EmbeddedRedis) -> Iterator[str]:
    env = target_env(redis_server, ratelimit__client_limit=LIMIT, ratelimit__period_s=PERIOD_S)
    with TargetProcess(env) as process:
        yield process.url


@pytest.fixture(scope="module")
def with_global(redis_server: EmbeddedRedis) -> Iterator[str]:
    env = target_env(
        redis_server,
        ratelimit__client_limit=4,
        ratelimit__global_limit=6,
        ratelimit__period_s=60,
    )
    with TargetProcess(env) as process:
        yield process.url


def send(client: httpx.Client, who: str) -> httpx.Response:
    return client.post(
        "/v1/chat/completions",
        json=chat_body(max_tokens=1),
        headers={"authorization": f"Bearer {who}"},
    )


def test_n_allowed_then_the_next_gets_the_predicted_retry_after(client_only: str) -> None:
    who = uuid.uuid4().hex
    with httpx.Client(base_url=client_only) as client:
        started = time.monotonic()
        allowed = [send(client, who) for _ in range(LIMIT)]
        refused = send(client, who)
        elapsed_ms = (time.monotonic() - started) * 1000
        assert [r.status_code for r in allowed] == [200] * LIMIT
        assert [r.headers["x-ratelimit-remaining-requests"] for r in allowed] == [
            "3",
            "2",
            "1",
            "0",
        ]
        assert {r.headers["x-ratelimit-limit-requests"] for r in allowed} == {str(LIMIT)}
        assert refused.status_code == 429, refused.text
        assert refused.json()["error"]["type"] == "rate_limit_error"
        # The first request set the bucket at t1; the refused one at t5 may pass at t1 + T, so
        # retry_after = T − (t5 − t1), and t5 − t1 lies within what the client measured.
        retry_ms = int(refused.headers["retry-after-ms"])
        assert INTERVAL_MS - elapsed_ms - 1 <= retry_ms <= INTERVAL_MS
        assert refused.headers["retry-after"] == str(math.ceil(retry_ms / 1000))
        assert refused.headers["x-ratelimit-remaining-requests"] == "0"
        # Waiting exactly the announced time is what the header promises; the margin covers
        # rounding to whole milliseconds and the time the sleep overshoots.
        time.sleep(retry_ms / 1000 + 0.005)
        after = send(client, who)
        assert after.status_code == 200, after.text
        assert after.headers["x-ratelimit-remaining-requests"] == "0"
        assert send(client, who).status_code == 429


def test_reset_header_counts_down_to_a_full_bucket(client_only: str) -> None:
    who = uuid.uuid4().hex
    with httpx.Client(base_url=client_only) as client:
        first = send(client, who)
    assert first.status_code == 200
    assert first.headers["x-ratelimit-remaining-requests"] == str(LIMIT - 1)
    # One request consumed one interval: the bucket is full again after T = 500 ms at most.
    reset = first.headers["x-ratelimit-reset-requests"]
    assert reset.endswith("ms")
    assert 0 < int(reset.removesuffix("ms")) <= INTERVAL_MS


def test_global_limit_counts_every_client_and_refusals_consume_nothing(with_global: str) -> None:
    a, b = uuid.uuid4().hex, uuid.uuid4().hex
    with httpx.Client(base_url=with_global) as client:
        assert [send(client, a).status_code for _ in range(4)] == [200] * 4
        refused_a = send(client, a)
        assert refused_a.status_code == 429
        assert "client limit" in refused_a.json()["error"]["message"]
        # A's refused request did not take a global slot: B still gets 6 − 4 = 2.
        assert [send(client, b).status_code for _ in range(2)] == [200, 200]
        refused_b = send(client, b)
        assert refused_b.status_code == 429
        assert "global limit" in refused_b.json()["error"]["message"]
        assert refused_b.headers["x-ratelimit-limit-requests"] == "6"
        # Global T = 10 s: the next global slot is 10 s after the first request, at most.
        assert 0 < int(refused_b.headers["retry-after-ms"]) <= 10_000
        text = client.get("/metrics").text
    assert metric(text, "target_ratelimited_requests_total", scope="client") == 1
    assert metric(text, "target_ratelimited_requests_total", scope="global") == 1


@pytest.mark.parametrize(
    ("seconds", "text"),
    [(0.25, "250ms"), (0.0004, "1ms"), (1.5, "1.5s"), (59.0, "59s"), (360.0, "6m0s")],
)
def test_reset_text_matches_openai_style(seconds: float, text: str) -> None:
    assert reset_text(seconds) == text


def test_one_redis_round_trip_per_request_for_both_limits() -> None:
    # A private Redis, so its command counters see this target alone.
    with EmbeddedRedis() as server:
        env = target_env(
            server, ratelimit__client_limit=1000, ratelimit__global_limit=1000, signing__mode="off"
        )
        control = redis.Redis(host=server.host, port=server.port)
        with TargetProcess(env) as process, httpx.Client(base_url=process.url) as client:
            who = uuid.uuid4().hex
            assert send(client, who).status_code == 200  # loads the script (EVALSHA, SCRIPT)
            control.config_resetstat()
            n = 10
            assert [send(client, who).status_code for _ in range(n)] == [200] * n
            stats = control.info("commandstats")
            usage_key = f"{env['APP_REDIS_PREFIX']}usage:{anonymous_identity('Bearer ' + who)}"
            # Usage is recorded in the background after each answer: poll for the last one.
            wait_until(
                lambda: control.hget(usage_key, "requests") == str(n + 1).encode(),
                10,
                "usage of every request recorded under the target's prefix",
            )
        control.close()
    # Client and global limits are checked and updated by one script call per request.
    assert stats["cmdstat_evalsha"]["calls"] == n
    assert "cmdstat_eval" not in stats
    assert "cmdstat_script" not in stats
