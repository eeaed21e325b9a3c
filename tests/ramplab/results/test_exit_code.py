"""The run's exit code: one pure function for the master process and the CLI."""

from __future__ import annotations

import pytest

from ramplab.exitcodes import ExitCode
from ramplab.results.outcome import exit_code
from ramplab.results.producer import RunFacts, summarize
from ramplab.results.summary import GateStatus, GateVerdict, RunSummary


def summary(requests: int, *statuses: GateStatus) -> RunSummary:
    empty = summarize([], RunFacts())
    verdicts = tuple(GateVerdict(gate=f"g{i}", status=s) for i, s in enumerate(statuses))
    return empty.model_copy(update={"requests": requests, "gates": verdicts})


OK = summary(10)
PASSED = summary(10, "pass", "pass")
MISSED = summary(10, "pass", "fail")
TYPO = summary(10, "fail", "invalid")
EMPTY = summary(0, "pass")
BOUND = summary(10, "untrusted").model_copy(update={"generator_bound": True})
BOUND_MISSED = summary(10, "untrusted", "fail").model_copy(update={"generator_bound": True})
UNCHECKED = PASSED.model_copy(update={"generator_bound": None})  # a plain run: no self-check

# (summary, interrupted, usage error, run failed) → exit code
TABLE: list[tuple[RunSummary | None, bool, bool, bool, ExitCode]] = [
    (OK, False, False, False, ExitCode.OK),
    (PASSED, False, False, False, ExitCode.OK),
    (MISSED, False, False, False, ExitCode.SLO_MISSED),
    (TYPO, False, False, False, ExitCode.USAGE),  # a typo outranks a miss
    (EMPTY, False, False, False, ExitCode.RUN_FAILED),  # no records: nothing was measured
    (None, False, False, False, ExitCode.RUN_FAILED),  # no summary at all
    (BOUND, False, False, False, ExitCode.RUN_FAILED),  # the generator was the bottleneck
    (BOUND_MISSED, False, False, False, ExitCode.RUN_FAILED),  # its misses do not count either
    (BOUND, True, False, False, ExitCode.INTERRUPTED),
    (BOUND, False, True, False, ExitCode.USAGE),
    (UNCHECKED, False, False, False, ExitCode.OK),
    (MISSED, False, False, True, ExitCode.RUN_FAILED),  # a failed run's gates do not count
    (TYPO, False, False, True, ExitCode.RUN_FAILED),
    (None, False, True, False, ExitCode.USAGE),  # input refused before anything ran
    (MISSED, False, True, True, ExitCode.USAGE),  # bad input explains what followed
    (None, True, False, False, ExitCode.INTERRUPTED),
    (MISSED, True, True, True, ExitCode.INTERRUPTED),  # the user asked for it
    (PASSED, True, False, False, ExitCode.INTERRUPTED),
]


@pytest.mark.parametrize(("summary", "interrupted", "usage", "failed", "expected"), TABLE)
def test_exit_code_table(
    summary: RunSummary | None, interrupted: bool, usage: bool, failed: bool, expected: ExitCode
) -> None:
    got = exit_code(summary, interrupted=interrupted, usage_error=usage, run_failed=failed)
    assert got == expected


def test_exit_code_values_are_distinct_and_stable() -> None:
    assert [int(c) for c in ExitCode] == [0, 2, 3, 4, 130]
