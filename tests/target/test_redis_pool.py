"""The Redis pool: pre-warmed connections, metrics, and the capacity rule checked at start-up.

The pool itself runs in an in-process target; the capacity rule, which stops or warns at a
process's start-up and counts worker processes, keeps real target processes.
"""

from __future__ import annotations

import concurrent.futures
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
import redis

from target_service.embedded_redis import EmbeddedRedis
from tests.support.processes import TargetProcess
from tests.support.targets import ThreadTarget, settings_from_env
from tests.target.stress_helpers import chat_body, metric, target_env, wait_until


@pytest.fixture
def small_redis() -> Iterator[EmbeddedRedis]:
    # 0.7 × 40 = 28 < 32: the default pool of 32 for one process breaks the rule.
    with EmbeddedRedis(maxclients=40) as server:
        yield server


def client_count(server: EmbeddedRedis) -> int:
    control = redis.Redis(host=server.host, port=server.port)
    try:
        return len(control.client_list()) - 1  # minus this control connection
    finally:
        control.close()


def test_pool_is_prewarmed_and_metered(small_redis: EmbeddedRedis) -> None:
    before = client_count(small_redis)
    env = target_env(small_redis, redis_pool__capacity_check="off", ratelimit__client_limit=1000)
    with ThreadTarget(settings_from_env(env)) as process:
        # 16 connections opened at start ("maxIdle 16"); the key ring may add a few more.
        assert client_count(small_redis) - before >= 16
        for _ in range(5):
            assert (
                httpx.post(
                    process.url + "/v1/chat/completions", json=chat_body(max_tokens=1)
                ).status_code
                == 200
            )
        text = httpx.get(process.url + "/metrics").text
    assert metric(text, "target_redis_pool_wait_seconds_count") >= 16 + 5
    assert "target_redis_pool_connections_in_use" in text
    assert "target_redis_pool_waiting_callers" in text


def test_pool_caps_connections_and_meters_waiting_callers(small_redis: EmbeddedRedis) -> None:
    # A pool of 2 and a paused Redis: 6 requests (each needs Redis for the rate limiter) must hold
    # both connections and leave the others waiting for a slot — visible in the metrics while
    # it lasts — then all succeed once Redis answers again. Timeouts are far above the pause.
    env = target_env(
        small_redis,
        ratelimit__client_limit=100_000,
        ratelimit__period_s=1,
        redis_pool__max_connections=2,
        redis_pool__prewarm=2,
        redis_pool__wait_timeout_s=20,
        redis_timeout_s=20,
        redis_pool__capacity_check="off",
    )
    requests = 6
    with ThreadTarget(settings_from_env(env)) as process:

        def gauges() -> tuple[float, float]:
            text = httpx.get(process.url + "/metrics").text
            return (
                metric(text, "target_redis_pool_connections_in_use"),
                metric(text, "target_redis_pool_waiting_callers"),
            )

        assert httpx.post(process.url + "/v1/chat/completions", json=chat_body()).status_code == 200
        waits_before = metric(
            httpx.get(process.url + "/metrics").text, "target_redis_pool_wait_seconds_count"
        )
        control = redis.Redis(host=small_redis.host, port=small_redis.port)
        # WRITE mode holds scripts (the limiter's EVALSHA) but lets CLIENT UNPAUSE through, so
        # the pause lasts exactly as long as the test needs, not a guessed duration.
        control.client_pause(60_000, all=False)
        try:
            with concurrent.futures.ThreadPoolExecutor(requests) as pool:
                futures = [
                    pool.submit(
                        httpx.post,
                        process.url + "/v1/chat/completions",
                        json=chat_body(max_tokens=1),
                        timeout=60,
                    )
                    for _ in range(requests)
                ]
                # The key ring's background refresh may add a waiter of its own.
                in_use, waiting = wait_until(
                    lambda: (g := gauges())[0] == 2 and g[1] >= requests - 2 and g,
                    30,
                    "both connections in use and the other callers waiting",
                )
                control.client_unpause()
                statuses = [f.result().status_code for f in futures]
        finally:
            control.client_unpause()
            control.close()
        assert (in_use, waiting) >= (2, requests - 2)
        assert statuses == [200] * requests
        assert wait_until(lambda: gauges() == (0, 0) or None, 20, "the pool to be idle again")
        text = httpx.get(process.url + "/metrics").text
        # Every request asked the pool at least once (rate limit; usage records add more).
        assert metric(text, "target_redis_pool_wait_seconds_count") - waits_before >= requests
        assert metric(text, "target_redis_errors_total") == 0


def test_capacity_rule_refuses_with_the_numbers(small_redis: EmbeddedRedis, tmp_path: Path) -> None:
    log = tmp_path / "target.log"
    env = target_env(small_redis, redis_pool__capacity_check="refuse")
    target = TargetProcess(env, log_path=log)
    with pytest.raises(RuntimeError, match="exited"):
        target.start(timeout_s=30)
    target.stop()
    text = log.read_text()
    assert "max_connections 32 × 1 processes = 32 > 0.7 × maxclients 40 = 28" in text


def test_capacity_rule_warns_and_serves(small_redis: EmbeddedRedis, tmp_path: Path) -> None:
    log = tmp_path / "target.log"
    env = target_env(small_redis, redis_pool__capacity_check="warn", redis_pool__prewarm=4)
    with TargetProcess(env, log_path=log) as process:
        assert (
            httpx.post(
                process.url + "/v1/chat/completions", json=chat_body(max_tokens=1)
            ).status_code
            == 200
        )
    assert "capacity rule violated" in log.read_text()


def test_capacity_rule_counts_worker_processes(redis_server: EmbeddedRedis, tmp_path: Path) -> None:
    # 0.7 × 10000 = 7000 ≥ 32 × 2: the default Redis passes, so nothing is logged.
    log = tmp_path / "target.log"
    env = target_env(redis_server, redis_pool__capacity_check="refuse", redis_pool__prewarm=2)
    with TargetProcess(env, workers=2, log_path=log) as process:
        assert httpx.get(process.url + "/readyz").status_code == 200
        text = httpx.get(process.url + "/metrics").text
    assert metric(text, "target_worker_processes") == 2
    assert "capacity rule violated" not in log.read_text()
