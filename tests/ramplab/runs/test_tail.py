"""The one tailer of a running run directory: new records once each, a half-written batch
later."""

from __future__ import annotations

import json
from pathlib import Path

from ramplab.measure.record import RequestRecord
from ramplab.records.journal import HEADER
from ramplab.records.schema import batch_of
from ramplab.runs.rundir import RunDir
from ramplab.runs.tail import RunTail


def message(*ids: str) -> bytes:
    records = [RequestRecord(i, "w", 1.0, 1.0, True, 200, None) for i in ids]
    return batch_of(records).serialize().to_pybytes()


def test_records_are_read_once_and_a_partial_batch_waits(tmp_path: Path) -> None:
    files = RunDir(tmp_path)
    tail = RunTail(tmp_path)
    assert tail.poll() == []  # nothing written yet: no error
    assert tail.run_start is None
    third = message("2")
    with files.records.journal.open("wb", buffering=0) as out:
        assert tail.poll() == []  # an empty journal, not even its schema yet
        out.write(HEADER)
        assert tail.poll() == []
        out.write(message("0", "1") + third[:10])
        assert [r["request_id"] for r in tail.poll()] == ["0", "1"]
        out.write(third[10:])
        assert [r["request_id"] for r in tail.poll()] == ["2"]
        assert tail.poll() == []
    assert tail.records == 3


def test_the_progress_snapshot_is_refreshed_and_kept_when_unreadable(tmp_path: Path) -> None:
    files = RunDir(tmp_path)
    tail = RunTail(tmp_path)
    files.progress.write_text(json.dumps({"run_start": 100.5, "users": 3}))
    tail.poll()
    assert tail.run_start == 100.5
    assert tail.progress["users"] == 3
    files.progress.write_text('{"run_start": 1')  # being replaced: the last good one stays
    tail.poll()
    assert tail.run_start == 100.5
