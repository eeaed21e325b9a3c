from __future__ import annotations

from collections.abc import Callable, Iterator

import pytest

from target_service.embedded_redis import EmbeddedRedis
from tests.support.processes import TargetProcess
from tests.support.targets import ThreadTarget, settings_from_env

# A fast, jitter-free model whose timings tests can predict.
FAST_MODEL = {
    "APP_LATENCY__PREFILL_OVERHEAD_MS": "10",
    "APP_LATENCY__PREFILL_PER_TOKEN_MS": "0",
    "APP_LATENCY__ITL_MS": "5",
    "APP_LATENCY__ITL_JITTER_MS": "0",
    "APP_LATENCY__SLOWDOWN_PER_SEQ": "0",
}

StartTarget = Callable[..., TargetProcess]
StartThreadTarget = Callable[[dict[str, str]], ThreadTarget]


@pytest.fixture
def private_redis() -> Iterator[EmbeddedRedis]:
    """A Redis of the test's own, for tests that kill or stop it."""
    with EmbeddedRedis() as server:
        yield server


@pytest.fixture
def start_target(redis_server: EmbeddedRedis) -> Iterator[StartTarget]:
    """Start real target processes sharing the session's Redis; all are stopped after the test."""
    started: list[TargetProcess] = []

    def start(env: dict[str, str] | None = None, workers: int = 1) -> TargetProcess:
        target = TargetProcess(
            env={"APP_REDIS_URL": redis_server.url, **FAST_MODEL, **(env or {})}, workers=workers
        )
        started.append(target)
        return target.start()

    yield start
    for target in started:
        target.stop()


@pytest.fixture(scope="module")
def fast_target(redis_server: EmbeddedRedis) -> Iterator[TargetProcess]:
    """One shared target with the fast model, for tests that do not change settings."""
    with TargetProcess(env={"APP_REDIS_URL": redis_server.url, **FAST_MODEL}) as target:
        yield target


@pytest.fixture
def start_thread_target(redis_server: EmbeddedRedis) -> Iterator[StartThreadTarget]:
    """Serve the real app in a thread of this process (same settings as ``start_target``, as
    ``APP_*`` names), for tests where a subprocess adds nothing; all are stopped afterwards."""
    started: list[ThreadTarget] = []

    def start(env: dict[str, str]) -> ThreadTarget:
        settings = settings_from_env({"APP_REDIS_URL": redis_server.url, **FAST_MODEL, **env})
        target = ThreadTarget(settings)
        started.append(target)
        return target.start()

    yield start
    for target in started:
        target.stop()
