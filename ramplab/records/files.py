"""A run's records on disk, whatever their form: Parquet, the journal, or an old JSON Lines file.

    requests.parquet    the records once the run ended (``finalize``): zstd, one row group per
                        ~64 k records, ``docs/records.md``
    requests.arrows     the journal while the run runs (``journal.py``); left behind by a
                        killed master, and read as it is
    requests.jsonl      the records of a run directory from before the columnar records (read only)

The records of a run are those of its Parquet file followed by those of its journal (a web-UI
run that is restarted appends a journal to a finalised run), or, for an old run directory, its
JSON Lines file. ``finalize`` folds the journal into the Parquet file through a temporary file and
an atomic rename, so a kill at any moment leaves either the old pair or the new file.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import orjson
import pyarrow as pa
import pyarrow.parquet as pq

from ramplab.measure.record import RequestRecord
from ramplab.records.journal import read_journal
from ramplab.records.schema import (
    SCHEMA,
    batch_of,
    check_schema,
    conformed,
    record_from_dict,
    records_of,
)

__all__ = ["JSONL_BATCH", "ROW_GROUP", "RecordFiles", "parquet_writer", "scan_jsonl"]

ROW_GROUP = 65_536
# In a Parquet file that took in a journal: that journal's identity. A kill between the Parquet
# file's rename and the journal's deletion leaves both; the journal is then known as folded.
FOLDED_KEY = b"ramplab.folded_journal"
JSONL_BATCH = 8_192  # records per batch read from a JSON Lines file
# Records per batch read from Parquet: a batch of 16-token streams carries 15 gaps a record, and
# what a scan derives from one batch lives until the next (16 k records: ~30 MB).
SCAN_BATCH = 16_384
# Floats split by byte before zstd (BYTE_STREAM_SPLIT), and not dictionary-encoded: their
# exponents and leading mantissa bytes compress where whole doubles do not. Measured on a real
# run's 16-token records: 252 B a record with the defaults, 213 B so; splitting the nested
# values too (phases, attempts) made it larger again.
_FLOATS = [f.name for f in SCHEMA if pa.types.is_floating(f.type)] + ["itl_ms.list.element"]


def parquet_writer(path: Path, folded: str | None = None) -> pq.ParquetWriter:
    """A writer of the records' Parquet file (``write_table`` one row group at a time);
    ``folded`` names the journal it takes in (``journal_identity``)."""
    schema = SCHEMA
    if folded is not None:
        schema = SCHEMA.with_metadata({**(SCHEMA.metadata or {}), FOLDED_KEY: folded.encode()})
    return pq.ParquetWriter(
        path,
        schema,
        compression="zstd",
        use_dictionary=[f.name for f in SCHEMA if pa.types.is_string(f.type)],
        use_byte_stream_split=_FLOATS,
    )


def scan_jsonl(path: Path) -> Iterator[RequestRecord | None]:
    """Each line of a ``requests.jsonl`` as a record, ``None`` for a corrupt one (a disk that
    filled mid-line, a hand edit); a torn last line (a crash) and blank lines are passed over."""
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


def journal_identity(path: Path) -> str:
    """``size:sha256`` of a journal: which one a Parquet file folded in."""
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for chunk in iter(lambda: handle.read(1 << 20), b""):
            digest.update(chunk)
    return f"{path.stat().st_size}:{digest.hexdigest()}"


@dataclass(frozen=True, slots=True)
class RecordFiles:
    """The records files of one run directory (``RunDir.records`` names them)."""

    parquet: Path
    journal: Path
    jsonl: Path
    # Called between batches: a cooperative caller (the master's gevent loop) lets its other
    # work run — its heartbeat while it summarises millions of records.
    between_batches: Callable[[], None] | None = None

    @classmethod
    def in_dir(cls, run_dir: Path) -> RecordFiles:
        return cls(
            run_dir / "requests.parquet", run_dir / "requests.arrows", run_dir / "requests.jsonl"
        )

    def exist(self) -> bool:
        return self.parquet.is_file() or self.journal.is_file() or self.jsonl.is_file()

    @property
    def columnar(self) -> bool:
        """The records are Parquet or a journal (not an old JSON Lines file)."""
        return self.parquet.is_file() or self.journal.is_file()

    def batches(self, columns: list[str] | None = None) -> Iterator[pa.RecordBatch]:
        """The records in batches, in the order written; ``columns`` reads only those (Parquet
        reads nothing else from disk). A JSON Lines file is converted as it is read; its corrupt
        lines are skipped (``corrupt`` counts them)."""
        for batch in self._batches(columns):
            if self.between_batches is not None:
                self.between_batches()
            yield batch

    def _batches(self, columns: list[str] | None) -> Iterator[pa.RecordBatch]:
        if self.columnar:
            if self.parquet.is_file():
                # Not pre-buffered: pyarrow would read every row group's chunks ahead (207 MB
                # instead of 70 MB at its peak for a million records' summary columns).
                parquet = pq.ParquetFile(self.parquet, pre_buffer=False)
                check_schema(parquet.schema_arrow, self.parquet)
                # A file written before a column was added (schema.py) lacks it: not asked of
                # the file, given as nulls.
                present = set(parquet.schema_arrow.names)
                wanted = [f.name for f in SCHEMA] if columns is None else columns
                stored = [name for name in wanted if name in present]
                for batch in parquet.iter_batches(batch_size=SCAN_BATCH, columns=stored):
                    yield conformed(batch, wanted)
            if self._journal_pending():
                for batch in read_journal(self.journal):
                    yield conformed(batch, columns)
            return
        if not self.jsonl.is_file():
            return
        pending: list[RequestRecord] = []
        for record in scan_jsonl(self.jsonl):
            if record is None:
                continue
            pending.append(record)
            if len(pending) >= JSONL_BATCH:
                batch = batch_of(pending)
                yield batch.select(columns) if columns is not None else batch
                pending = []
        if pending:
            batch = batch_of(pending)
            yield batch.select(columns) if columns is not None else batch

    def records(self) -> Iterator[RequestRecord]:
        """Each record as a ``RequestRecord``, one batch in memory at a time."""
        if not self.columnar:
            if self.jsonl.is_file():
                yield from (r for r in scan_jsonl(self.jsonl) if r is not None)
            return
        for batch in self.batches():
            yield from records_of(batch)

    def corrupt(self) -> int:
        """Lines of an old JSON Lines file that are not records (0 for columnar records: a torn
        journal ends at its last whole batch, and nothing else in it can be corrupt)."""
        if self.columnar or not self.jsonl.is_file():
            return 0
        return sum(1 for record in scan_jsonl(self.jsonl) if record is None)

    def count(self) -> int:
        if not self.columnar:
            return sum(1 for r in scan_jsonl(self.jsonl) if r is not None) if self.exist() else 0
        total = 0
        if self.parquet.is_file():
            parquet = pq.ParquetFile(self.parquet)
            check_schema(parquet.schema_arrow, self.parquet)
            total = parquet.metadata.num_rows
        if self._journal_pending():
            total += sum(batch.num_rows for batch in read_journal(self.journal))
        return total

    def _journal_pending(self) -> bool:
        """A journal whose records are not in the Parquet file yet (one that is, left by a kill
        mid-``finalize``, is not read again)."""
        if not self.journal.is_file():
            return False
        if not self.parquet.is_file():
            return True
        folded = (pq.read_schema(self.parquet).metadata or {}).get(FOLDED_KEY)
        return folded is None or folded.decode() != journal_identity(self.journal)

    def finalize(self) -> None:
        """Fold the journal into the Parquet file (a no-op without a journal). Batches are
        copied one at a time: memory does not grow with the number of records."""
        if not self._journal_pending():
            self.journal.unlink(missing_ok=True)  # none, or one already folded in
            return
        tmp = self.parquet.with_name(self.parquet.name + ".tmp")
        try:
            with parquet_writer(tmp, journal_identity(self.journal)) as writer:
                pending: list[pa.RecordBatch] = []
                rows = 0
                for batch in self.batches():
                    pending.append(batch)
                    rows += batch.num_rows
                    if rows >= ROW_GROUP:
                        writer.write_table(pa.Table.from_batches(pending, SCHEMA))
                        pending, rows = [], 0
                if pending:
                    writer.write_table(pa.Table.from_batches(pending, SCHEMA))
            os.replace(tmp, self.parquet)
        except BaseException:
            tmp.unlink(missing_ok=True)
            raise
        self.journal.unlink(missing_ok=True)
