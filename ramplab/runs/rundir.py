"""The run directory and the experiment directory: every file a run writes, by name.

A run directory is what ``ramplab run`` (or one probe of a search, or one run of an experiment)
leaves behind; ``docs/summary.md`` documents each file. This is the one place their names are
spelled: everything else asks a ``RunDir`` for a path, or for the file read back. Layers below
this one (the records writer, the report's digest) take the paths as arguments.

    campaign.yaml       the campaign exactly as run (its text, not a re-serialisation)
    run.json            the run's facts: target, seed, workers, versions, options
    requests.parquet    one record per request dispatched (docs/records.md), once the run ended
    requests.arrows     the same while the run runs: the journal, written as each one ends
    requests.arrows.reserve  while the master runs: room held for its last writes on a full disk
    requests.jsonl      the records of a run directory from before Parquet (read, never written)
    progress.json       the master's last progress snapshot (live, and for a rebuild)
    summary.json        the typed summary (``ramplab.results.summary.RunSummary``)
    report.md           the report, readable on its own
    report.html         the same, with charts, in one offline file
    recommendations.json  the fired recommendation rules
    search.json         a search's probes and answer (a search directory only)
    search.md           the search's report: probes in order, the bracket, the verdict
    search.html         the same, in one offline file

An experiment directory holds its runs as run directories, plus ``experiment.json`` (the
manifest), ``comparison.json``/``.md``, ``study.json``/``.md`` and its own ``report.md``/``.html``.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ramplab.errors import StorageError
from ramplab.records.files import RecordFiles
from ramplab.results.summary import RunSummary
from ramplab.results.writer import ResultsWriter, reserve_of

__all__ = ["ExperimentDir", "RunDir", "write_atomically"]


def write_atomically(path: Path, text: str) -> None:
    """``text`` into ``path`` through a temporary file in the same directory: a reader never
    sees half a file, and a full disk leaves the old file (or none), never an empty one.
    ``StorageError`` names the path and the OS's reason."""
    tmp = path.with_name(path.name + ".tmp")
    try:
        tmp.write_text(text, encoding="utf-8")
        os.replace(tmp, path)
    except OSError as exc:
        tmp.unlink(missing_ok=True)
        raise StorageError.of(exc, path) from None


@dataclass(frozen=True, slots=True)
class RunDir:
    """One run's directory."""

    path: Path

    CAMPAIGN = "campaign.yaml"
    RUN = "run.json"
    PROGRESS = "progress.json"
    SUMMARY = "summary.json"
    REPORT_MD = "report.md"
    REPORT_HTML = "report.html"
    RECOMMENDATIONS = "recommendations.json"
    ENGINE_METRICS = "engine_metrics.jsonl"
    SEARCH = "search.json"
    SEARCH_MD = "search.md"
    SEARCH_HTML = "search.html"

    @property
    def campaign(self) -> Path:
        return self.path / self.CAMPAIGN

    @property
    def run_json(self) -> Path:
        return self.path / self.RUN

    @property
    def records(self) -> RecordFiles:
        """The run's records, whichever form they are in."""
        return RecordFiles.in_dir(self.path)

    @property
    def progress(self) -> Path:
        return self.path / self.PROGRESS

    @property
    def summary(self) -> Path:
        return self.path / self.SUMMARY

    @property
    def report_md(self) -> Path:
        return self.path / self.REPORT_MD

    @property
    def report_html(self) -> Path:
        return self.path / self.REPORT_HTML

    @property
    def recommendations(self) -> Path:
        return self.path / self.RECOMMENDATIONS

    @property
    def engine_metrics(self) -> Path:
        """The server's Prometheus figures, one scrape a line (``results/engine.py``)."""
        return self.path / self.ENGINE_METRICS

    @property
    def search(self) -> Path:
        return self.path / self.SEARCH

    @property
    def search_md(self) -> Path:
        return self.path / self.SEARCH_MD

    @property
    def search_html(self) -> Path:
        return self.path / self.SEARCH_HTML

    def open_writer(self, reserve_bytes: int = 0) -> ResultsWriter:
        """The records writer of this run (the directory is made when missing); with
        ``reserve_bytes``, a ballast the first failed write frees (``ResultsWriter``)."""
        return ResultsWriter(self.records, self.summary, reserve_bytes)

    def drop_reserve(self) -> None:
        """Delete the writer's ballast file that a killed master left behind."""
        reserve_of(self.records.journal).unlink(missing_ok=True)

    def has_records(self) -> bool:
        return self.records.exist()

    def is_run(self) -> bool:
        """A run directory: it has a summary or records."""
        return self.summary.is_file() or self.records.exist()

    def is_search(self) -> bool:
        return self.search.is_file()

    def read_summary(self) -> RunSummary:
        return RunSummary.read(self.summary)

    def write_summary(self, summary: RunSummary) -> None:
        summary.write(self.summary)

    def read_run_json(self) -> dict[str, Any]:
        """``run.json``, or an empty mapping when the run wrote none (or it is unreadable)."""
        try:
            data = json.loads(self.run_json.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return {}
        return data if isinstance(data, dict) else {}

    def write_run_json(self, meta: dict[str, Any]) -> None:
        write_atomically(self.run_json, json.dumps(meta, indent=2) + "\n")


@dataclass(frozen=True, slots=True)
class ExperimentDir:
    """An experiment's (or a search's) directory: its runs are run directories inside it."""

    path: Path

    MANIFEST = "experiment.json"
    COMPARISON_JSON = "comparison.json"
    COMPARISON_MD = "comparison.md"
    STUDY_JSON = "study.json"
    STUDY_MD = "study.md"
    REPORT_MD = "report.md"
    REPORT_HTML = "report.html"
    CAMPAIGN = RunDir.CAMPAIGN

    def run(self, name: str) -> RunDir:
        return RunDir(self.path / name)

    @property
    def manifest(self) -> Path:
        return self.path / self.MANIFEST

    @property
    def report_md(self) -> Path:
        return self.path / self.REPORT_MD

    @property
    def report_html(self) -> Path:
        return self.path / self.REPORT_HTML

    @property
    def campaign(self) -> Path:
        return self.path / self.CAMPAIGN
