"""Redis killed (SIGKILL) under steady traffic and restarted on the same port (issue 16).

The target runs with the rate limiter on, so Redis is on every request's path. Four client
threads send short requests back to back through the whole test; each answer is kept with
its send and arrival time. Redis is killed ``HEALTHY_S`` in, restarted ``OUTAGE_S`` later.
What must hold: only 200 and 503 (with ``Retry-After`` and the ``redis_unavailable`` code) are
ever answered; the first 503 arrives within 1 s of the kill and every outage answer within 1 s
of its send; every request sent 2 s after Redis answers again succeeds; the same target
process serves throughout. Bounds of 1 s and 2 s are the issue's; on an idle machine the
answers come in milliseconds (a refused connect, then the pool's reconnect), so the margin is
wide, and the test runs in the serial ``timing`` phase.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest

from target_service.embedded_redis import EmbeddedRedis
from tests.support.processes import TargetProcess
from tests.target.stress_helpers import chat_body, target_env

pytestmark = pytest.mark.timing

CLIENTS = 4
HEALTHY_S = 1.5
OUTAGE_S = 2.0
AFTER_S = 3.5
FIRST_503_S = 1.0  # the bound: 503 within 1 s of the kill
RECOVERY_S = 2.0  # the bound: recovered 2 s after Redis is back


@dataclass(frozen=True)
class Answer:
    sent: float
    done: float
    status: int
    retry_after: str | None
    code: str | None


@pytest.fixture
def target(private_redis: EmbeddedRedis, tmp_path: Path) -> Iterator[TargetProcess]:
    env = target_env(private_redis, ratelimit__client_limit=1_000_000, ratelimit__period_s=1)
    with TargetProcess(env, log_path=tmp_path / "target.log") as process:
        yield process


def drive(url: str, stop: threading.Event, answers: list[Answer]) -> None:
    with httpx.Client(base_url=url, timeout=10.0) as client:
        while not stop.is_set():
            sent = time.monotonic()
            response = client.post("/v1/chat/completions", json=chat_body(max_tokens=1))
            code = None
            if response.status_code != 200:
                code = response.json().get("error", {}).get("code")
            answers.append(
                Answer(
                    sent,
                    time.monotonic(),
                    response.status_code,
                    response.headers.get("retry-after"),
                    code,
                )
            )


def test_redis_killed_and_restarted(target: TargetProcess, private_redis: EmbeddedRedis) -> None:
    pid = target.pid
    answers: list[Answer] = []
    stop = threading.Event()
    threads = [
        threading.Thread(target=drive, args=(target.url, stop, answers)) for _ in range(CLIENTS)
    ]
    for thread in threads:
        thread.start()
    try:
        time.sleep(HEALTHY_S)
        kill_sent = time.monotonic()  # answers that ended before this saw a live Redis
        private_redis.kill()
        killed = time.monotonic()  # the server is gone (reaped) from here on
        time.sleep(OUTAGE_S)
        restart_sent = time.monotonic()  # Redis may answer before start() returns
        private_redis.start()
        back = time.monotonic()
        time.sleep(AFTER_S)
    finally:
        stop.set()
        for thread in threads:
            thread.join(15)

    statuses = {a.status for a in answers}
    assert statuses <= {200, 503}, f"unexpected statuses {statuses}"
    refused = [a for a in answers if a.status == 503]
    assert refused, "no 503 during the outage"
    assert all(a.retry_after == "1" and a.code == "redis_unavailable" for a in refused), {
        (a.retry_after, a.code) for a in refused
    }

    # Between the SIGKILL and its reaping a request may already be refused: that is the
    # outage, not the healthy phase (a 503 there failed one CI run).
    before = [a for a in answers if a.done < kill_sent]
    assert before
    assert all(a.status == 200 for a in before), [
        (round(a.sent - kill_sent, 4), round(a.done - kill_sent, 4), a.status)
        for a in before
        if a.status != 200
    ]
    first_503 = min(a.done for a in refused)
    assert first_503 - kill_sent <= FIRST_503_S, (
        f"first 503 {first_503 - kill_sent:.3f} s after the kill"
    )
    during = [a for a in answers if killed <= a.sent and a.done <= restart_sent]
    assert during
    assert all(a.status == 503 for a in during)
    slowest = max(a.done - a.sent for a in during)
    assert slowest <= FIRST_503_S, f"an outage answer took {slowest:.3f} s"

    first_ok = min((a.done for a in answers if a.status == 200 and a.sent >= back), default=None)
    print(
        f"redis kill: {len(answers)} answers, first 503 {1000 * (first_503 - kill_sent):.1f} ms"
        f" after the kill, slowest outage answer {1000 * slowest:.1f} ms, first 200"
        f" {'none' if first_ok is None else f'{1000 * (first_ok - back):.1f} ms'} after Redis"
        " answered again"
    )
    recovered = [a for a in answers if a.sent >= back + RECOVERY_S]
    assert recovered, "no request in the recovered window"
    failed = [a for a in recovered if a.status != 200]
    assert not failed, f"{len(failed)} failures after recovery, first at {failed[0]}"

    assert target.running()
    assert target.pid == pid
    assert httpx.get(target.url + "/readyz").status_code == 200
    assert target.log_path is not None
    assert "Traceback" not in target.log_path.read_text()
