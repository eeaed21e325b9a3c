"""The Redis pool: pre-warmed connections, metrics, and the capacity rule checked at start-up."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
import redis

from target_service.embedded_redis import EmbeddedRedis
from tests.support.processes import TargetProcess
from tests.target.stress_helpers import chat_body, metric, target_env


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
    with TargetProcess(env) as process:
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
