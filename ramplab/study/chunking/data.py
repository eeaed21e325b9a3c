"""What the chunking study reads from an experiment: per-request rows and each run's settings.

A request counts when it counts in its run's summary (its stage's measured window, so the
warm-up and the cold first requests are out), succeeded, and has both TTFT and TTLT. Times are
from the actual send (``ttft_send_ms``, ``ttlt_send_ms``): the generator's own lateness is not
part of what the chunk size does, and is reported beside. The chunk size, first-event tokens and
event count come from what the target sent (``tokens_per_event``), the sleep and the configured
ITL from the run's own ``campaign.yaml`` (the variant's complete campaign).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import yaml

from ramplab.experiment.sources import expand
from ramplab.results.digest import iter_records, step_shape
from ramplab.results.steps import group_measured
from ramplab.results.summary import RunSummary
from ramplab.runs.rundir import RunDir
from ramplab.study.chunking.model import StreamRows

__all__ = ["RunSettings", "collect"]


@dataclass(frozen=True)
class RunSettings:
    """One run of the sweep, as configured and as measured."""

    index: int
    variant: str
    path: Path
    chunk: int  # workload.chunk_size (tokens per event asked for)
    sleep_ms: float  # target.settings.stream.event_sleep_ms
    itl_ms: float | None  # target.settings.latency.itl_ms, when the campaign set it
    slowdown_per_seq: float | None
    itl_jitter_ms: float | None
    ttft_slo_ms: float | None  # slo.ttft_ms, when the campaign has one
    requests: int  # rows this run gave
    lateness_p99_ms: float | None


def _setting(data: Any, path: str) -> Any:
    for part in path.split("."):
        if not isinstance(data, dict):
            return None
        data = data.get(part)
    return data


def _number(value: Any) -> float | None:
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


def collect(directory: Path, notes: list[str]) -> tuple[StreamRows, list[RunSettings]]:
    """The rows of every finished run of the experiment and each run's settings."""
    rows: list[tuple[int, float, int, int, int, float, float]] = []
    runs: list[RunSettings] = []
    skipped = 0
    for group in expand([directory], notes):
        for run in group.runs:
            campaign = yaml.safe_load((RunDir(run.path).campaign).read_text(encoding="utf-8"))
            chunk = _setting(campaign, "workload.chunk_size")
            if not isinstance(chunk, int):
                notes.append(f"{run.path.name}: no workload.chunk_size, left out")
                continue
            sleep = _number(_setting(campaign, "target.settings.stream.event_sleep_ms"))
            if sleep is None:
                notes.append(f"{run.path.name}: event_sleep_ms not set, taken as the default 0")
                sleep = 0.0
            summary = RunSummary.from_json(run.summary)
            shape = step_shape(summary)
            if shape is None:
                notes.append(f"{run.path.name}: no step in its summary, left out")
                continue
            index = len(runs)
            lateness: list[float] = []
            before = len(rows)
            measured = group_measured(
                iter_records(RunDir(run.path).records), shape, summary.run_start or 0.0
            )
            for record in (r for stage in measured for r in stage):
                counts = record.tokens_per_event
                if (
                    not record.ok
                    or record.ttft_send_ms is None
                    or record.ttlt_send_ms is None
                    or not counts
                    or not record.output_tokens
                ):
                    skipped += 1
                    continue
                lateness.append(record.lateness_ms)
                rows.append(
                    (index, sleep, counts[0], len(counts), record.output_tokens,
                     record.ttft_send_ms, record.ttlt_send_ms)
                )  # fmt: skip
            slo = _setting(campaign, "slo.ttft_ms")
            runs.append(
                RunSettings(
                    index=index,
                    variant=group.name,
                    path=run.path,
                    chunk=chunk,
                    sleep_ms=sleep,
                    itl_ms=_number(_setting(campaign, "target.settings.latency.itl_ms")),
                    slowdown_per_seq=_number(
                        _setting(campaign, "target.settings.latency.slowdown_per_seq")
                    ),
                    itl_jitter_ms=_number(
                        _setting(campaign, "target.settings.latency.itl_jitter_ms")
                    ),
                    ttft_slo_ms=_number(slo),
                    requests=len(rows) - before,
                    lateness_p99_ms=float(np.percentile(lateness, 99)) if lateness else None,
                )
            )
    if skipped:
        notes.append(f"{skipped} measured requests left out: failed, or without TTFT/TTLT")
    return StreamRows.of(rows), runs
