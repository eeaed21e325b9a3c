"""Redis taken away mid-test (stopped, then paused): 503 with Retry-After, not ready, recovery.

The target runs with the rate limiter on, so Redis is on every request's path. A private
``EmbeddedRedis`` (not the session one) is stopped and restarted on the same port.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
import redis

from target_service.embedded_redis import EmbeddedRedis
from tests.support.processes import TargetProcess
from tests.target.stress_helpers import chat_body, metric, target_env, wait_until

# A bound far above the target's own (pool wait 0.25 s + 2 × 0.5 s socket timeout): the request
# must come back with an answer, not hang; the client timeout only catches a hang.
CLIENT_TIMEOUT_S = 10.0


@pytest.fixture
def target(private_redis: EmbeddedRedis, tmp_path: Path) -> Iterator[TargetProcess]:
    env = target_env(private_redis, ratelimit__client_limit=100_000, ratelimit__period_s=1)
    with TargetProcess(env, log_path=tmp_path / "target.log") as process:
        yield process


def post(url: str) -> httpx.Response:
    return httpx.post(
        url + "/v1/chat/completions", json=chat_body(max_tokens=1), timeout=CLIENT_TIMEOUT_S
    )


def assert_unavailable(response: httpx.Response) -> None:
    assert response.status_code == 503, response.text
    assert response.json()["error"]["code"] == "redis_unavailable"
    assert response.headers["retry-after"] == "1"
    assert response.headers["retry-after-ms"] == "1000"


def test_redis_stopped_then_restarted(target: TargetProcess, private_redis: EmbeddedRedis) -> None:
    assert post(target.url).status_code == 200
    assert httpx.get(target.url + "/readyz").status_code == 200

    private_redis.stop()
    for _ in range(3):
        assert_unavailable(post(target.url))
    ready = httpx.get(target.url + "/readyz", timeout=CLIENT_TIMEOUT_S)
    assert ready.status_code == 503
    assert ready.json()["status"] == "not ready"
    assert httpx.get(target.url + "/healthz").status_code == 200  # alive, just not ready

    private_redis.start()
    wait_until(lambda: post(target.url).status_code == 200, 20, "requests to succeed again")
    assert httpx.get(target.url + "/readyz").status_code == 200
    text = httpx.get(target.url + "/metrics").text
    assert metric(text, "target_redis_errors_total", operation="ratelimit") >= 3
    assert target.log_path is not None
    assert "Traceback" not in target.log_path.read_text()


def test_redis_paused_is_slow_redis(target: TargetProcess, private_redis: EmbeddedRedis) -> None:
    assert post(target.url).status_code == 200
    control = redis.Redis(host=private_redis.host, port=private_redis.port)
    # CLIENT PAUSE holds every client's commands for 3 s: a Redis that accepts and never answers.
    control.client_pause(3000, all=True)
    try:
        assert_unavailable(post(target.url))
        assert httpx.get(target.url + "/readyz", timeout=CLIENT_TIMEOUT_S).status_code == 503
    finally:
        control.client_unpause()
        control.close()
    wait_until(lambda: post(target.url).status_code == 200, 20, "requests to succeed again")
