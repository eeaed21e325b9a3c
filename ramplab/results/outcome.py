"""A run's exit code from its summary: the one pure function the master process and the CLI share.

It lives beside the summary, not in ``ramplab.exitcodes`` (the codes themselves, which every layer
imports and which import nothing of ramplab).
"""

from __future__ import annotations

from ramplab.exitcodes import ExitCode
from ramplab.results.failures import ceiling_verdict
from ramplab.results.summary import RunSummary

__all__ = ["exit_code"]


def exit_code(
    summary: RunSummary | None,
    *,
    interrupted: bool = False,
    usage_error: bool = False,
    run_failed: bool = False,
    max_error_ratio: float | None = None,
) -> ExitCode:
    """The run's exit code, for the master process and the CLI alike.

    ``summary`` is the run's summary, ``None`` when there is none (nothing was measured, or it
    could not be read or rebuilt); its gate verdicts were evaluated when it was produced. The
    order is the order of trust: an interruption is what the user asked for; bad input explains
    whatever followed it; a failed run makes its numbers untrustworthy, so its gates do not
    count; a run without a single record failed; so did a run where the load generator was the
    bottleneck (``generator_bound``: its figures measured the generator, exit 4 like the search's
    generator-limited probe); then a gate naming no metric (a typo) outranks a missed one; a
    run past the error ceiling (``max_error_ratio``, ``results/failures.py``; ``None``: not
    applied) exits 3 like a missed gate; a gate that passed on timing figures the run's own
    stamps cannot vouch for (``untrusted``, ``results/trust.py``) exits 4: no verdict.
    """
    if interrupted:
        return ExitCode.INTERRUPTED
    if usage_error:
        return ExitCode.USAGE
    if run_failed or summary is None or summary.requests == 0:
        return ExitCode.RUN_FAILED
    if summary.generator_bound:
        return ExitCode.RUN_FAILED
    if any(v.status == "invalid" for v in summary.gates):
        return ExitCode.USAGE
    if max_error_ratio is not None and ceiling_verdict(summary, max_error_ratio) is not None:
        return ExitCode.SLO_MISSED
    if any(v.status == "fail" for v in summary.gates):
        return ExitCode.SLO_MISSED
    if any(v.status == "untrusted" for v in summary.gates):
        return ExitCode.RUN_FAILED  # a gate that passed on stamps that cannot be trusted
    return ExitCode.OK
