"""Run results: the records journal written as requests finish, and ``summary.json`` at the end.

Records are appended as Arrow IPC messages (``ramplab.records.journal``): a worker's batch as the
bytes it serialised, the records measured in this process (a run without workers) as a batch
every half second, the way a worker sends them. A killed run loses what it measured in its last
half second at most. A write that fails (a full disk) is not raised into whoever handed in the
record: the writer keeps the first ``StorageError``, calls ``on_failure`` once (the master stops
the run) and refuses later records, counting them. The summary is not accumulated here:
``ramplab.results.producer`` builds it from the records, the same way for a plain run, the ramp
master and a rebuild.
"""

from __future__ import annotations

import contextlib
import os
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any, BinaryIO

from ramplab.errors import StorageError
from ramplab.measure.record import RequestRecord
from ramplab.records.files import RecordFiles
from ramplab.records.journal import HEADER
from ramplab.records.schema import batch_of
from ramplab.results.summary import RunSummary

RESERVE_BYTES = 256 * 1024
PENDING_MAX = 1024


def reserve_of(journal_path: Path) -> Path:
    """The ballast file beside a journal (left behind when the master was killed)."""
    return journal_path.with_name(journal_path.name + ".reserve")


class ResultsWriter:
    """Appends records to the journal (written through per batch) and writes the summary file;
    ``ramplab.runs.rundir.RunDir.open_writer`` names them.

    With ``reserve_bytes`` a ballast file (``<journal>.reserve``) holds that much of the disk
    from the start and is deleted at the first failed write: the room it frees is what lets the
    master's last words, its log and the summary be written on a disk the records filled."""

    def __init__(self, files: RecordFiles, summary_path: Path, reserve_bytes: int = 0) -> None:
        journal_path = files.journal
        journal_path.parent.mkdir(parents=True, exist_ok=True)
        self.files = files
        self.journal_path = journal_path
        self.summary_path = summary_path
        self.reserve_path = reserve_of(journal_path)
        # Unbuffered: a batch is on disk (or not) when ``write`` returns, and a failed write
        # leaves no half message in a buffer for ``close`` to append later.
        self._file: BinaryIO = self.journal_path.open("ab", buffering=0)
        self._size = self._file.seek(0, os.SEEK_END)  # bytes of whole messages in the file
        self._lock = threading.Lock()
        self._pending: list[RequestRecord | dict[str, Any]] = []
        self.written = 0
        self.refused = 0  # records not written: the write failed, or came after a failure
        self.failure: StorageError | None = None
        self.on_failure: Callable[[StorageError], None] | None = None
        if self._size == 0:
            try:
                self._file.write(HEADER)
                self._size = len(HEADER)
            except OSError as exc:  # a full disk from the start: every record is refused
                self.failure = StorageError.of(exc, self.journal_path)
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
        """One record measured in this process: held until the next ``flush`` (its caller
        flushes every ``forwarder.FLUSH_S``, as a worker sends its batches), or until
        ``PENDING_MAX`` are held. A batch of one record costs ~240 µs of the generator's CPU and
        ~4 KB of journal; a batch of hundreds, a few µs and ~300 B a record."""
        with self._lock:
            self._pending.append(record)
            full = len(self._pending) >= PENDING_MAX
        if full:
            self.flush()

    def flush(self) -> None:
        """Write the records held by ``write`` as one batch."""
        with self._lock:
            pending, self._pending = self._pending, []
        if pending:
            self.write_batch(batch_of(pending).serialize().to_pybytes(), len(pending))

    def write_batch(self, message: bytes, records: int) -> None:
        """A batch of ``records`` records, serialised (``pa.RecordBatch.serialize``) by a
        worker: appended as it is."""
        data = memoryview(message)
        with self._lock:
            if self.failure is not None:
                self.refused += records
                return
            try:
                while data:
                    data = data[self._file.write(data) or 0 :]
            except OSError as exc:
                self.refused += records
                self.failure = StorageError.of(exc, self.journal_path)
                self.release()
                # What was written stays; the failed batch's part is cut, no torn message left.
                with contextlib.suppress(OSError):
                    os.truncate(self.journal_path, self._size)
            else:
                self.written += records
                self._size += len(message)
                return
        if self.on_failure is not None:
            self.on_failure(self.failure)

    def write_summary(self, summary: RunSummary) -> None:
        summary.write(self.summary_path)

    def close(self) -> None:
        self.flush()
        with self._lock:
            if not self._file.closed:
                self._file.close()
        self.release()

    def finalize(self) -> None:
        """Close, then fold the journal into the run's Parquet file. On failure (a full disk)
        the journal stays, as readable as the Parquet file would have been."""
        self.close()
        try:
            self.files.finalize()
        except OSError as exc:
            raise StorageError.of(exc, self.files.parquet) from None
