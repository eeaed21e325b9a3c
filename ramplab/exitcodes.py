"""Process exit codes of the ramplab CLI, in one place so CI scripts can rely on them.

``SLO_MISSED`` and ``RUN_FAILED`` are distinct on purpose: a missed SLO is a finding about the
target (the run itself is trustworthy), a failed run means the numbers cannot be trusted at all
(a worker died, the target never became healthy, the generator crashed). CI usually wants to
fail on both but report them differently.
"""

from __future__ import annotations

from enum import IntEnum

from ramplab.results.summary import RunSummary


class ExitCode(IntEnum):
    OK = 0
    USAGE = 2  # bad arguments, shape, retry config or gate expression (argparse's convention)
    SLO_MISSED = 3  # the run completed and at least one gate failed
    RUN_FAILED = 4  # the run could not complete or its measurements cannot be trusted
    INTERRUPTED = 130  # Ctrl-C, results kept (128 + SIGINT, the shell's convention)


def exit_code(
    summary: RunSummary | None,
    *,
    interrupted: bool = False,
    usage_error: bool = False,
    run_failed: bool = False,
) -> ExitCode:
    """The run's exit code, for the master process and the CLI alike.

    ``summary`` is the run's summary, ``None`` when there is none (nothing was measured, or it
    could not be read or rebuilt); its gate verdicts were evaluated when it was produced. The
    order is the order of trust: an interruption is what the user asked for; bad input explains
    whatever followed it; a failed run makes its numbers untrustworthy, so its gates do not
    count; a run without a single record failed; then a gate naming no metric (a typo) outranks
    a missed one.
    """
    if interrupted:
        return ExitCode.INTERRUPTED
    if usage_error:
        return ExitCode.USAGE
    if run_failed or summary is None or summary.requests == 0:
        return ExitCode.RUN_FAILED
    if any(v.status == "invalid" for v in summary.gates):
        return ExitCode.USAGE
    if any(v.status == "fail" for v in summary.gates):
        return ExitCode.SLO_MISSED
    return ExitCode.OK
