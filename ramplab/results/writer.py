"""Run results: ``requests.jsonl`` written as requests finish, and ``summary.json`` at the end.

Each record is appended and flushed the moment its request completes, so a killed run loses
nothing it measured (at worst the one line being written). A write that fails (a full disk) is
not raised into whoever handed in the record: the writer keeps the first ``StorageError``, calls
``on_failure`` once (the master stops the run) and refuses later records, counting them. The
summary is not accumulated
here: ``ramplab.results.producer`` builds it from this file, the same way for a plain run, the
ramp master and a rebuild.
"""

from __future__ import annotations

import contextlib
import os
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, BinaryIO

import orjson

from ramplab.errors import StorageError
from ramplab.measure.record import AttemptRecord, RequestRecord
from ramplab.results.summary import RunSummary

RESERVE_BYTES = 256 * 1024


def reserve_of(requests_path: Path) -> Path:
    """The ballast file beside a records file (left behind when the master was killed)."""
    return requests_path.with_name(requests_path.name + ".reserve")


class ResultsWriter:
    """Appends records to the requests file (written through per record) and writes the summary
    file; ``ramplab.runs.rundir.RunDir.open_writer`` names them.

    With ``reserve_bytes`` a ballast file (``<requests>.reserve``) holds that much of the disk
    from the start and is deleted at the first failed write: the room it frees is what lets the
    master's last words, its log and the summary be written on a disk the records filled."""

    def __init__(self, requests_path: Path, summary_path: Path, reserve_bytes: int = 0) -> None:
        requests_path.parent.mkdir(parents=True, exist_ok=True)
        self.requests_path = requests_path
        self.summary_path = summary_path
        self.reserve_path = reserve_of(requests_path)
        # Unbuffered: a record is on disk (or not) when ``write`` returns, and a failed write
        # leaves no half line in a buffer for ``close`` to append later.
        self._file: BinaryIO = self.requests_path.open("ab", buffering=0)
        self._size = self._file.seek(0, os.SEEK_END)  # bytes of whole records in the file
        self._lock = threading.Lock()
        self.written = 0
        self.refused = 0  # records not written: the write failed, or came after a failure
        self.failure: StorageError | None = None
        self.on_failure: Callable[[StorageError], None] | None = None
        if reserve_bytes > 0:
            self._reserve(reserve_bytes)

    def _reserve(self, size: int) -> None:
        try:
            with self.reserve_path.open("wb") as ballast:
                ballast.write(b"\0" * size)  # zeros written, not a sparse file: real blocks
        except OSError:  # no room for it: the run goes on without
            self.release()

    def release(self) -> None:
        """Delete the ballast file (at the first failure, and at the end)."""
        self.reserve_path.unlink(missing_ok=True)

    def write(self, record: RequestRecord | dict[str, Any]) -> None:
        data = record.to_dict() if isinstance(record, RequestRecord) else record
        encoded = orjson.dumps(data) + b"\n"
        line = memoryview(encoded)
        with self._lock:
            if self.failure is not None:
                self.refused += 1
                return
            try:
                while line:
                    line = line[self._file.write(line) or 0 :]
            except OSError as exc:
                self.refused += 1
                self.failure = StorageError.of(exc, self.requests_path)
                self.release()
                # What was written stays; the failed record's part is cut, no torn line left.
                with contextlib.suppress(OSError):
                    os.truncate(self.requests_path, self._size)
            else:
                self.written += 1
                self._size += len(encoded)
                return
        if self.on_failure is not None:
            self.on_failure(self.failure)

    def write_summary(self, summary: RunSummary) -> None:
        summary.write(self.summary_path)

    def close(self) -> None:
        with self._lock:
            if not self._file.closed:
                self._file.close()
        self.release()


def record_from_dict(data: dict[str, Any]) -> RequestRecord:
    """The inverse of ``RequestRecord.to_dict()``; unknown keys (newer writers) are ignored."""
    known = set(RequestRecord.__dataclass_fields__)
    fields = {key: value for key, value in data.items() if key in known}
    fields["attempt_log"] = [
        AttemptRecord(
            **{k: v for k, v in attempt.items() if k in AttemptRecord.__dataclass_fields__}
        )
        for attempt in data.get("attempt_log", [])
    ]
    return RequestRecord(**fields)


def load_records(path: Path) -> list[RequestRecord]:
    """Every complete record of a ``requests.jsonl``; a torn last line (a crash) and corrupt
    lines are skipped (``read_records`` counts them)."""
    return read_records(path)[0]


def read_records(path: Path) -> tuple[list[RequestRecord], int]:
    """Every complete record of a ``requests.jsonl`` and the number of corrupt lines skipped (a
    line that is not a record: a disk that filled mid-line, a crash, a hand edit). A torn last
    line is not counted: a killed writer leaves one, and it was never a whole record."""
    records = []
    corrupt = 0
    for record in scan_records(path):
        if record is None:
            corrupt += 1
        else:
            records.append(record)
    return records, corrupt


def scan_records(path: Path) -> Iterator[RequestRecord | None]:
    """Each line of a ``requests.jsonl`` as a record, ``None`` for a corrupt one; a torn last
    line (a crash) and blank lines are passed over."""
    with Path(path).open("rb") as handle:
        for line in handle:
            if not line.endswith(b"\n"):
                break
            if not line.strip():
                continue
            try:
                yield record_from_dict(orjson.loads(line))
            except (ValueError, TypeError, AttributeError):
                yield None
