"""The one tailer of a running run directory: new records once each, a half-written line later."""

from __future__ import annotations

import json
from pathlib import Path

from ramplab.runs.rundir import RunDir
from ramplab.runs.tail import RunTail


def test_records_are_read_once_and_a_partial_line_waits(tmp_path: Path) -> None:
    files = RunDir(tmp_path)
    tail = RunTail(tmp_path)
    assert tail.poll() == []  # nothing written yet: no error
    assert tail.run_start is None
    with files.requests.open("wb") as out:
        out.write(b'{"index": 0}\n{"index": 1}\n{"ind')
        out.flush()
        assert [r["index"] for r in tail.poll()] == [0, 1]
        out.write(b'ex": 2}\n')
        out.flush()
        assert [r["index"] for r in tail.poll()] == [2]
        assert tail.poll() == []
    assert tail.records == 3


def test_a_line_that_is_not_json_is_skipped_not_fatal(tmp_path: Path) -> None:
    RunDir(tmp_path).requests.write_bytes(b'{"index": 0}\nnot json\n[1, 2]\n{"index": 3}\n')
    tail = RunTail(tmp_path)
    assert [r["index"] for r in tail.poll()] == [0, 3]


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
