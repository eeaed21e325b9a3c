"""A new directory under ``--results-dir`` for a run, an experiment or a search.

One rule for all three: the name is ``--run-name`` or ``<campaign>-<UTC stamp>`` (with a kind
between them for a search), a plain name that cannot climb out of the results directory, never
an existing directory (results are not appended to), and a problem creating it names the
option to change.
"""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

from ramplab.errors import UsageError
from ramplab.stack.campaign import NAME_RULE, is_valid_name

__all__ = ["new_results_dir"]


def new_results_dir(
    results_dir: Path, run_name: str | None, campaign_name: str, kind: str = ""
) -> Path:
    """Create and return ``results_dir / (run_name or <campaign>[-kind]-<stamp>)``."""
    if run_name is not None and not is_valid_name(run_name):
        raise UsageError("--run-name", f"{run_name!r}: {NAME_RULE}")
    stamp = datetime.now(UTC).strftime("%Y%m%d-%H%M%S")
    prefix = f"{campaign_name}-{kind}" if kind else campaign_name
    directory = results_dir / (run_name or f"{prefix}-{stamp}")
    if directory.exists():
        raise UsageError("--run-name", f"{directory} already exists")
    try:
        directory.mkdir(parents=True)
    except OSError as exc:
        raise UsageError("--results-dir", f"{results_dir}: {exc.strerror}") from None
    return directory
