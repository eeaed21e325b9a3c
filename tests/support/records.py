"""A run directory's records as ``RequestRecord.to_dict()`` mappings, whatever their form on disk
(the journal while a run runs, Parquet after it, an old ``requests.jsonl``)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ramplab.records.files import RecordFiles
from ramplab.records.schema import dicts_of


def run_records(run_dir: Path) -> list[dict[str, Any]]:
    return [row for batch in RecordFiles.in_dir(run_dir).batches() for row in dicts_of(batch)]


def record_count(run_dir: Path) -> int:
    files = RecordFiles.in_dir(run_dir)
    return files.count() if files.exist() else 0
