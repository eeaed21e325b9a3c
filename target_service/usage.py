"""Per-client request and token counters, kept in Redis so every worker process adds to one total.

One pipelined round trip per completion (``HINCRBY`` × 3 on ``ramplab:usage:<client>``).
"""

from __future__ import annotations

from redis.asyncio import Redis
from redis.exceptions import RedisError

from target_service.metrics import TargetMetrics

KEY_PREFIX = "ramplab:usage:"


class UsageStore:
    def __init__(self, redis: Redis, metrics: TargetMetrics) -> None:
        self._redis = redis
        self._metrics = metrics

    async def record(self, client: str, prompt_tokens: int, completion_tokens: int) -> None:
        key = KEY_PREFIX + client
        try:
            async with self._redis.pipeline(transaction=False) as pipe:
                pipe.hincrby(key, "requests", 1)
                pipe.hincrby(key, "prompt_tokens", prompt_tokens)
                pipe.hincrby(key, "completion_tokens", completion_tokens)
                await pipe.execute()
        except (RedisError, OSError, TimeoutError):
            self._metrics.redis_errors_total.labels("usage").inc()

    async def totals(self, client: str) -> dict[str, int]:
        raw = await self._redis.hgetall(KEY_PREFIX + client)
        return {(k.decode() if isinstance(k, bytes) else str(k)): int(v) for k, v in raw.items()}
