"""Per-client request and token counters, kept in Redis so every worker process adds to one total.

One pipelined round trip per completion (``HINCRBY`` × 3 on ``<redis_prefix>usage:<client>``).
"""

from __future__ import annotations

import contextlib

from redis.asyncio import Redis

from target_service.metrics import TargetMetrics
from target_service.redis_pool import RedisPool, RedisUnavailable


class UsageStore:
    def __init__(self, redis: RedisPool, prefix: str, metrics: TargetMetrics) -> None:
        self._redis = redis
        self._prefix = prefix + "usage:"
        self._metrics = metrics

    async def record(self, client: str, prompt_tokens: int, completion_tokens: int) -> None:
        key = self._prefix + client

        async def add(redis: Redis) -> None:
            async with redis.pipeline(transaction=False) as pipe:
                pipe.hincrby(key, "requests", 1)
                pipe.hincrby(key, "prompt_tokens", prompt_tokens)
                pipe.hincrby(key, "completion_tokens", completion_tokens)
                await pipe.execute()

        # Best effort: a failure is counted in target_redis_errors_total by the pool.
        with contextlib.suppress(RedisUnavailable):
            await self._redis.run("usage", add)

    async def totals(self, client: str) -> dict[str, int]:
        raw = await self._redis.run("usage", lambda r: r.hgetall(self._prefix + client))
        return {(k.decode() if isinstance(k, bytes) else str(k)): int(v) for k, v in raw.items()}
