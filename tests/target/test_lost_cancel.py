"""Regression: a cancelled ``UsageStore.maintain`` that never ended (the lifespan hang).

Under CPU load about one in-thread target in 15 hung at shutdown: the usage loop, cancelled
while it flushed, stayed "cancelling" at its next ``asyncio.sleep``. redis-py sends each command
through ``asyncio.wait_for``, which on Python 3.11 returns the result and drops the caller's
cancellation when the two land in one loop iteration (CPython gh-86296); the loop went on as if
never cancelled. ``RedisPool.run`` now raises a cancellation redis-py lost, and the lifespan
waits for its tasks at most ``TASKS_STOP_S``, logging the ones left behind.

The race needs the cancel to land exactly when a write completes; cancelling the loop a few
hundred times at random instants while it flushes every millisecond hit it about once in seven
before the fix, without any CPU load.
"""

from __future__ import annotations

import asyncio
import logging
import random

import pytest
from prometheus_client import CollectorRegistry

from target_service.embedded_redis import EmbeddedRedis
from target_service.metrics import TargetMetrics
from target_service.redis_pool import RedisPool
from target_service.settings import RedisPoolSettings
from target_service.shutdown import stop_tasks
from target_service.usage import UsageStore

ROUNDS = 300


async def cancel_while_flushing(url: str, rounds: int, seed: int) -> list[str]:
    """Cancel a fast-flushing usage loop ``rounds`` times; the tasks that outlived their cancel."""
    rng = random.Random(seed)
    metrics = TargetMetrics(CollectorRegistry())
    pool = RedisPool(url, RedisPoolSettings(prewarm=1), 0.5, metrics)
    survivors: list[str] = []
    try:
        for _ in range(rounds):
            store = UsageStore(pool, "lost-cancel:", metrics, flush_s=0.001)
            task = asyncio.create_task(store.maintain())
            for _ in range(rng.randint(0, 20)):
                store.add("client", 1, 1)
                await asyncio.sleep(rng.random() * 0.002)
            task.cancel()
            done, _ = await asyncio.wait([task], timeout=1.0)
            if not done:
                survivors.append(repr(task))
                task.cancel()  # once more, so the test itself can end
                await asyncio.wait([task], timeout=1.0)
    finally:
        await pool.aclose()
    return survivors


def test_cancelled_usage_loop_always_ends(redis_server: EmbeddedRedis) -> None:
    survivors = asyncio.run(cancel_while_flushing(redis_server.url, ROUNDS, seed=16))
    assert survivors == []


def test_stop_tasks_gives_up_and_names_what_it_waited_on(
    caplog: pytest.LogCaptureFixture,
) -> None:
    released = asyncio.Event()

    async def ignores_cancel() -> None:
        while not released.is_set():
            try:
                await asyncio.sleep(10)
            except asyncio.CancelledError:
                continue  # what a lost cancellation looks like from outside

    async def main() -> tuple[bool, bool]:
        stuck = asyncio.create_task(ignores_cancel(), name="stuck-loop")
        fine = asyncio.create_task(asyncio.sleep(10), name="fine")
        await asyncio.sleep(0)
        ended = await stop_tasks([stuck, fine], timeout_s=0.2)
        fine_done = fine.done()
        released.set()
        stuck.cancel()
        await asyncio.wait([stuck])
        return ended, fine_done

    with caplog.at_level(logging.ERROR, logger="target_service"):
        ended, fine_done = asyncio.run(main())
    assert not ended
    assert fine_done
    (message,) = [r.getMessage() for r in caplog.records if r.name == "target_service"]
    assert "stuck-loop" in message
    assert "ignores_cancel" in message
    assert "sleep" in message
