"""A new directory under ``--results-dir`` for a run, an experiment or a search.

One rule for all three: the name is ``--run-name`` or ``<campaign>-<UTC stamp>`` (with a kind
between them for a search), a plain name that cannot climb out of the results directory, never
an existing directory (results are not appended to), and a problem creating it names the
option to change.
"""

from __future__ import annotations

import shutil
from datetime import UTC, datetime
from pathlib import Path

import yaml

from ramplab.campaign.schema import NAME_RULE, Campaign, is_valid_name
from ramplab.errors import UsageError

__all__ = ["keep_trace", "new_results_dir"]


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


def keep_trace(run_dir: Path, campaign: Campaign, campaign_text: str) -> Path | None:
    """Copy a replayed trace into ``run_dir`` where the saved ``campaign.yaml`` names it.

    The saved campaign's relative paths count from the run directory, so without the copy a
    summary rebuilt after an interrupted replay (``rebuild.py``) could not rebuild its schedule;
    with it, the results also carry the trace they replayed. A path that would leave the run
    directory (``../x``) or an absolute one is left as it is."""
    source = campaign.trace.file
    data = yaml.safe_load(campaign_text)
    given = data.get("trace", {}).get("file") if isinstance(data, dict) else None
    if source is None or not isinstance(given, str) or Path(given).is_absolute():
        return None
    target = (run_dir / given).resolve()
    if not target.is_relative_to(run_dir.resolve()):
        return None
    target.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(source, target)
    return target
