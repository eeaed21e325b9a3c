"""A run's summary read back, or rebuilt when the master could not write it.

When ``summary.json`` is missing (a run killed before the master wrote it, an interrupted run)
the summary is rebuilt from the records by the same producer the master uses
(``ramplab.results.producer``), with the facts saved in the run directory: the campaign (shape,
mode, arrivals, seed, retry, SLO) and ``progress.json`` (plan start, the workers' dispatched and
dropped counts and self-check at the last snapshot). Only what the master alone knew — which
worker sent what, the membership epochs — is missing, and the summary says ``"rebuilt": true``.
It lives in ``stack`` because it reads the campaign file, which ``results`` never imports.
"""

from __future__ import annotations

import dataclasses
import json
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from ramplab.campaign.schema import Campaign, load_campaign
from ramplab.errors import CampaignError, UsageError
from ramplab.load.shapes import Shape, custom
from ramplab.records.files import RecordFiles
from ramplab.results.producer import EngineCounts, RunFacts, scheduled_counts, summarize
from ramplab.results.selfcheck import health_from_reports
from ramplab.results.slo import Gate, parse_request_slo
from ramplab.results.summary import RunSummary
from ramplab.runs.rundir import RunDir

__all__ = [
    "CAMPAIGN_FILE",
    "interrupted_summary",
    "last_record_end_s",
    "load_summary",
    "rebuild_facts",
    "rebuild_summary",
    "truncated",
]

CAMPAIGN_FILE = RunDir.CAMPAIGN


def truncated(shape: Shape, stop_s: float) -> Shape | None:
    """The stages run before ``stop_s``: later ones dropped, the one cut short ending there
    (dropped too when the cut falls in its warm-up: it has no measured window); ``None`` when
    no measured window ran."""
    kept = []
    for st in shape.stages:
        end = min(st.end_s, stop_s)
        if end - st.start_s > st.warmup_s:
            kept.append((st.rate, end - st.start_s, st.warmup_s))
        if st.end_s >= stop_s:
            break
    return custom(kept) if kept else None


def _progress(run_dir: Path) -> dict[str, Any]:
    data = json.loads((RunDir(run_dir).progress).read_text(encoding="utf-8"))
    if not isinstance(data, dict):
        raise ValueError("progress.json is not an object")
    return data


def _counts(progress: Mapping[str, Any], key: str, stages: int) -> list[int] | None:
    # The engine counts per stage up to its end; a cut stage's counts are up to the stop.
    values = progress.get(key)
    if not isinstance(values, list) or len(values) < stages:
        return None
    return [int(v) for v in values[:stages]]


def rebuild_facts(
    campaign: Campaign,
    progress: Mapping[str, Any],
    stopped_at_s: float | None = None,
    gates: Sequence[Gate] = (),
) -> RunFacts | None:
    """The facts the master had, from the saved campaign and progress snapshot; with
    ``stopped_at_s`` over the measured windows that ran before it (``None``: none ran)."""
    plan = campaign.load_shape
    shape = truncated(plan, stopped_at_s) if stopped_at_s is not None else plan
    if shape is None:
        return None
    stages = len(shape.stages)
    # The engine counts per stage up to its end; a cut stage's counts are up to the stop.
    dispatched, dropped = (
        _counts(progress, "dispatched", stages),
        _counts(progress, "dropped", stages),
    )
    peak_users = _counts(progress, "peak_users", stages)
    counts = EngineCounts(dispatched, dropped, (), peak_users) if dispatched and dropped else None
    saved = progress.get("health")
    health = None
    if isinstance(saved, Mapping):
        health = health_from_reports(
            {str(w): {"health": rows} for w, rows in saved.items()}, stages
        )
    scheduled = None
    if campaign.mode == "open":
        scheduled = scheduled_counts(plan, campaign.arrival_spec, campaign.seed, shape)
    retry = campaign.retry.strip() if isinstance(campaign.retry, str) else campaign.retry
    return RunFacts(
        shape=shape,
        run_start=float(progress["run_start"]),
        mode=campaign.mode,
        shape_text=campaign.shape_text(),
        arrivals=campaign.arrival_spec,
        seed=campaign.seed,
        model=campaign.workload.model,
        retry=retry,
        slo=parse_request_slo(campaign.slo),
        scheduled=scheduled,
        counts=counts,
        health=health,
        gates=gates,
        stopped_at_s=stopped_at_s,
        rebuilt=True,
        # From the snapshot, beside the peaks it is compared with (an older one has neither).
        max_users=int(progress["max_users"]) if progress.get("max_users") else None,
    )


def last_record_end_s(files: RecordFiles, run_start: float) -> float | None:
    """When the last record's request ended, in seconds from ``run_start`` (``None``: no
    records): where a crashed master stopped measuring, as far as its records tell."""
    last: float | None = None
    for batch in files.batches(["intended_start", "total_ms", "actual_start"]):
        if batch.num_rows == 0:
            continue
        total = batch.column("total_ms")
        intended = batch.column("intended_start").to_numpy(zero_copy_only=False)
        ends = np.where(
            total.is_valid().to_numpy(zero_copy_only=False),
            intended + total.fill_null(0.0).to_numpy(zero_copy_only=False) / 1000.0,
            batch.column("actual_start").to_numpy(zero_copy_only=False),
        )
        end = float(ends.max())
        last = end if last is None else max(last, end)
    return None if last is None else last - run_start


def rebuild_summary(
    run_dir: Path,
    stopped_at_s: float | None = None,
    gates: Sequence[Gate] = (),
    *,
    crashed: bool = False,
) -> RunSummary:
    """The summary from the run's records, the saved campaign and ``progress.json``; with
    ``stopped_at_s`` (an interrupted run) over the measured windows that ran before it. A
    ``crashed`` run (its master wrote no summary) that died mid-run (no final progress snapshot)
    is cut at its last record's end, the same way, when that falls before the schedule's end.
    Corrupt lines are skipped and counted. The ``gates`` are evaluated on it (the master's
    verdicts are lost with its summary)."""
    files = RunDir(run_dir).records
    if not files.exist():
        raise UsageError("RUN_DIR", f"{run_dir} has neither summary.json nor records")
    corrupt = files.corrupt()
    try:
        campaign = load_campaign(run_dir / CAMPAIGN_FILE)
        progress = _progress(run_dir)
        # A master that ended its run writes a final progress snapshot: without one it died
        # mid-run, and its records end where it did.
        if crashed and stopped_at_s is None and not progress.get("final"):
            last = last_record_end_s(files, float(progress["run_start"]))
            if last is None or last < campaign.load_shape.duration_s:
                stopped_at_s = max(0.0, last or 0.0)
        facts = rebuild_facts(campaign, progress, stopped_at_s, gates)
    except (CampaignError, OSError, ValueError, KeyError):
        raise UsageError(
            "RUN_DIR", f"{run_dir}: no summary.json, and no {CAMPAIGN_FILE} + progress.json to "
            "rebuild it from its records"
        ) from None  # fmt: skip
    if facts is None:
        # Interrupted in the first warm-up: nothing was measured, which the summary says.
        facts = RunFacts(shape=None, run_start=float(progress["run_start"]), rebuilt=True,
                         stopped_at_s=stopped_at_s, gates=gates, crashed=crashed,
                         corrupt_records=corrupt)  # fmt: skip
        return summarize([], facts).model_copy(update={"steps": ()})
    scrapes = RunDir(run_dir).engine_metrics
    facts = dataclasses.replace(
        facts,
        corrupt_records=corrupt,
        crashed=crashed,
        engine_metrics=scrapes if scrapes.is_file() else None,
    )
    return summarize(files, facts)


def interrupted_summary(
    run_dir: Path, stopped_at: float | None = None, gates: Sequence[Gate] = ()
) -> RunSummary:
    """An interrupted run's summary over what ran before ``stopped_at`` (epoch seconds; default:
    the master's last progress snapshot). The master's ``summary.json`` divides by whole planned
    windows, so it is kept as ``summary.master.json`` and replaced."""
    try:
        progress = _progress(run_dir)
        stop = (stopped_at or float(progress["time"])) - float(progress["run_start"])
    except (OSError, ValueError, KeyError):
        raise UsageError(
            "RUN_DIR", f"{run_dir}: no progress.json, cannot tell when it stopped"
        ) from None
    master = RunDir(run_dir).summary
    if master.is_file():
        os.replace(master, run_dir / "summary.master.json")
    summary = rebuild_summary(run_dir, stop, gates)
    summary.write(RunDir(run_dir).summary)
    return summary


def load_summary(
    run_dir: Path, *, rebuild_if_missing: bool = True, gates: Sequence[Gate] = ()
) -> RunSummary:
    """``summary.json`` of a run directory; rebuilt (with ``gates`` evaluated) when missing and
    possible."""
    path = RunDir(run_dir).summary
    if path.is_file():
        summary = RunSummary.read(path)
        if summary.steps or summary.stopped_at_s is not None:
            return summary
    if not rebuild_if_missing:
        raise UsageError("RUN_DIR", f"{run_dir} has no summary.json")
    # No summary.json: the master never wrote it (killed, or its disk filled up).
    return rebuild_summary(run_dir, gates=gates, crashed=not path.is_file())
