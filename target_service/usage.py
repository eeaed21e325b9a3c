"""Per-client request and token counters, kept in Redis so every worker process adds to one total.

Off the response path: a completion only adds to counters in this process's memory
(:meth:`UsageStore.add`); :meth:`UsageStore.maintain` writes what accumulated every
``flush_s`` (0.25 s) in one pipelined round trip (``HINCRBY`` × 3 per client seen, on
``<redis_prefix>usage:<client>``), and :meth:`UsageStore.flush` writes the rest at shutdown.
A Redis round trip and a task per completion cost ~15 % of a short stream's CPU
(``bench/target_stream.py``); batching makes them one per interval whatever the request rate.
Best effort: when Redis is down the counts wait in memory for the next flush.
"""

from __future__ import annotations

import asyncio

from redis.asyncio import Redis

from target_service.errors import RedisUnavailable
from target_service.metrics import TargetMetrics
from target_service.redis_pool import RedisPool

FLUSH_S = 0.25
_FIELDS = ("requests", "prompt_tokens", "completion_tokens")


class UsageStore:
    def __init__(
        self, redis: RedisPool, prefix: str, metrics: TargetMetrics, flush_s: float = FLUSH_S
    ) -> None:
        self._redis = redis
        self._prefix = prefix + "usage:"
        self._metrics = metrics
        self._flush_s = flush_s
        self._pending: dict[str, list[int]] = {}  # client -> [requests, prompt, completion]

    def add(self, client: str, prompt_tokens: int, completion_tokens: int) -> None:
        """Count one completion; it reaches Redis with the next flush."""
        self._merge(client, (1, prompt_tokens, completion_tokens))

    def _merge(self, client: str, counts: tuple[int, ...] | list[int]) -> None:
        pending = self._pending.get(client)
        if pending is None:
            self._pending[client] = list(counts)
        else:
            for index, value in enumerate(counts):
                pending[index] += value

    async def flush(self) -> None:
        """Write everything counted so far; on failure keep it for the next attempt."""
        if not self._pending:
            return
        batch, self._pending = self._pending, {}

        async def write(redis: Redis) -> None:
            async with redis.pipeline(transaction=False) as pipe:
                for client, counts in batch.items():
                    for name, value in zip(_FIELDS, counts, strict=True):
                        pipe.hincrby(self._prefix + client, name, value)
                await pipe.execute()

        try:
            await self._redis.run("usage", write)
        except RedisUnavailable:
            # Counted in target_redis_errors_total by the pool; merged back, written later.
            for client, counts in batch.items():
                self._merge(client, counts)

    async def maintain(self) -> None:
        """Flush every ``flush_s`` until cancelled; the owner calls :meth:`flush` at shutdown."""
        while True:
            await asyncio.sleep(self._flush_s)
            await self.flush()

    async def totals(self, client: str) -> dict[str, int]:
        raw = await self._redis.run("usage", lambda r: r.hgetall(self._prefix + client))
        return {(k.decode() if isinstance(k, bytes) else str(k)): int(v) for k, v in raw.items()}
