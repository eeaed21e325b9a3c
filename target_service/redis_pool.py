"""The process's Redis connection pool, sized like the study's §4.2 environment.

The study configures "maxIdle 16, maxActive 32" (a Jedis/go-redis style pool). redis-py has no idle
setting and its pool never shrinks, so the mapping is:

* ``maxActive 32`` → ``BlockingConnectionPool(max_connections=32)``: at most 32 sockets; a caller
  that finds all 32 busy *waits* up to ``wait_timeout_s`` for one (the plain pool would raise);
* ``maxIdle 16`` → 16 connections opened at start-up (``prewarm``), so the first requests do not
  pay for connects. Connections opened later under load stay open until the process ends.

Short socket and connect timeouts (``redis_timeout_s``) and no redis-py retries: a blackholed
Redis would otherwise hold a request for about a minute (``run`` tries once more only after a
connection error, for the stale sockets a restarted Redis leaves in the pool). Every operation is
additionally bounded by ``asyncio.timeout`` so that *no* Redis state can make a request hang; any
failure becomes ``RedisUnavailable``, which handlers answer with a 503 and ``Retry-After``.

Capacity rule (§5 checklist): ``max_connections × processes ≤ capacity_ratio × maxclients``, with
Redis' ``maxclients`` read by ``CONFIG GET`` at start-up; ``capacity_check`` decides whether a
violation is a warning or stops the process.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

from redis.asyncio import BlockingConnectionPool, Redis
from redis.asyncio.connection import AbstractConnection
from redis.asyncio.retry import Retry
from redis.backoff import NoBackoff
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import RedisError

from target_service.errors import CapacityError, RedisUnavailable
from target_service.metrics import TargetMetrics
from target_service.settings import RedisPoolSettings

log = logging.getLogger("target_service.redis")
T = TypeVar("T")
REDIS_FAILURES = (RedisError, OSError, TimeoutError)


class _MeteredPool(BlockingConnectionPool):
    """Counts waiting callers, connections in use and the wait for a slot."""

    def __init__(self, metrics: TargetMetrics, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._metrics = metrics
        self.in_use = 0
        self.waiting = 0
        self._handed: set[int] = set()

    async def get_connection(self, *args: Any, **kwargs: Any) -> AbstractConnection:
        start = time.perf_counter()
        self.waiting += 1
        self._metrics.redis_pool_waiting.inc()
        try:
            connection: AbstractConnection = await super().get_connection(  # type: ignore[no-untyped-call]
                *args, **kwargs
            )
        finally:
            self.waiting -= 1
            self._metrics.redis_pool_waiting.dec()
            self._metrics.redis_pool_wait.observe(time.perf_counter() - start)
        self._handed.add(id(connection))
        self.in_use += 1
        self._metrics.redis_pool_in_use.inc()
        return connection

    async def release(self, connection: AbstractConnection) -> None:
        # The base class also releases connections it never handed out (a failed connect).
        if id(connection) in self._handed:
            self._handed.discard(id(connection))
            self.in_use -= 1
            self._metrics.redis_pool_in_use.dec()
        await super().release(connection)


def _raise_lost_cancel(task: asyncio.Task[Any] | None, cancels_before: int) -> None:
    # asyncio.timeout takes back its own cancel (uncancel) when it fires: a count still above
    # the one at the start is a cancel from outside that never arrived as CancelledError.
    if task is not None and task.cancelling() > cancels_before:
        raise asyncio.CancelledError


class RedisPool:
    """A Redis client over the metered pool, with every call bounded in time."""

    def __init__(
        self, url: str, settings: RedisPoolSettings, op_timeout_s: float, metrics: TargetMetrics
    ) -> None:
        self.settings = settings
        self.op_timeout_s = op_timeout_s
        self._metrics = metrics
        self.pool = _MeteredPool.from_url(
            url,
            metrics=metrics,
            max_connections=settings.max_connections,
            timeout=settings.wait_timeout_s,
            socket_timeout=op_timeout_s,
            socket_connect_timeout=op_timeout_s,
            retry=Retry(NoBackoff(), 0),
        )
        self.client = Redis(connection_pool=self.pool)

    async def run(self, operation: str, call: Callable[[Redis], Awaitable[T]]) -> T:
        """Run one operation; any failure or a wait past the bound raises ``RedisUnavailable``.

        A cancellation that reaches the caller while the operation runs always ends it with
        ``CancelledError``, even when redis-py lost it: redis-py writes each command through
        ``asyncio.wait_for``, which on Python 3.11 returns the write's result and drops the
        cancellation when both land in the same loop iteration (CPython gh-86296, fixed in
        3.12). A background loop cancelled at that instant went back to sleep and was never
        cancelled again, and the lifespan's shutdown waited for it forever.
        """
        task = asyncio.current_task()
        cancels_before = task.cancelling() if task is not None else 0
        # Bound = waiting for a pooled connection + one socket round trip (connect or read).
        bound = self.settings.wait_timeout_s + 2 * self.op_timeout_s
        try:
            async with asyncio.timeout(bound):
                try:
                    result = await call(self.client)
                except RedisConnectionError:
                    # A pooled connection to a Redis that went away (restarted) fails once, and
                    # redis-py then drops it: one more try gets a fresh connection, so a Redis that
                    # is back is not answered with a 503 per stale connection. A command that
                    # failed so was never seen by the new server; a Redis still down refuses the
                    # second connect at once.
                    result = await call(self.client)
        except REDIS_FAILURES as exc:
            _raise_lost_cancel(task, cancels_before)
            self._metrics.redis_errors_total.labels(operation).inc()
            raise RedisUnavailable(operation, exc) from None
        _raise_lost_cancel(task, cancels_before)
        return result

    async def prewarm(self) -> int:
        """Open ``prewarm`` connections now; returns how many opened (0 if Redis is down)."""
        wanted = self.settings.prewarm
        held: list[AbstractConnection] = []
        try:
            for _ in range(wanted):
                held.append(await self.pool.get_connection())
        except REDIS_FAILURES as exc:
            log.warning("redis pre-warm stopped after %d connections: %s", len(held), exc)
        finally:
            for connection in held:
                await self.pool.release(connection)
        return len(held)

    async def check_capacity(self, processes: int) -> str | None:
        """Apply the capacity rule; returns the warning text, raises ``CapacityError`` to refuse."""
        if self.settings.capacity_check == "off":
            return None
        config = await self.run("config_get", lambda r: r.config_get("maxclients"))
        maxclients = int(str(config["maxclients"]))
        need = self.settings.max_connections * processes
        allowed = self.settings.capacity_ratio * maxclients
        if need <= allowed:
            return None
        message = (
            f"redis pool capacity rule violated: max_connections {self.settings.max_connections}"
            f" × {processes} processes = {need} > {self.settings.capacity_ratio} × maxclients"
            f" {maxclients} = {allowed:g}"
        )
        if self.settings.capacity_check == "refuse":
            log.error("%s; refusing to start (redis_pool.capacity_check = refuse)", message)
            raise CapacityError(message)
        log.warning("%s", message)
        return message

    async def aclose(self) -> None:
        await self.client.aclose()
        await self.pool.disconnect()
