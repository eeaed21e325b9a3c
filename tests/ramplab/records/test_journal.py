"""The journal: whatever byte a kill or a full disk cuts it at, the whole batches before the cut
are read, exactly, and nothing of the torn one; a tail returns each batch once, and a batch still
being written at the next poll."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pytest

from ramplab.records.journal import HEADER, JournalTail, read_journal
from ramplab.records.schema import SCHEMA, SCHEMA_VERSION, VERSION_KEY, RecordsError, batch_of
from tests.ramplab.records.samples import bare, full, message, write_journal

BATCHES = [[full(0), bare(1)], [full(2), full(3), bare(4)], [full(5)]]


def ids(batches: list[pa.RecordBatch]) -> list[list[str]]:
    return [batch.column("request_id").to_pylist() for batch in batches]


def test_a_journal_cut_at_any_byte_of_its_last_message_reads_the_batches_before(
    tmp_path: Path,
) -> None:
    path = tmp_path / "requests.arrows"
    offsets = write_journal(path, BATCHES)
    data = path.read_bytes()
    whole = [batch_of(records) for records in BATCHES]
    assert [b.equals(w) for b, w in zip(read_journal(path), whole, strict=True)] == [True] * 3
    cut = tmp_path / "cut.arrows"
    for end in range(offsets[-1], len(data)):
        cut.write_bytes(data[:end])
        read = list(read_journal(cut))
        assert len(read) == 2, end
        assert read[0].equals(whole[0]), end
        assert read[1].equals(whole[1]), end


def test_a_journal_cut_inside_its_schema_or_empty_has_no_records(tmp_path: Path) -> None:
    path = tmp_path / "requests.arrows"
    for end in (0, 1, 4, 8, len(HEADER) // 2, len(HEADER) - 1, len(HEADER)):
        path.write_bytes(HEADER[:end])
        assert list(read_journal(path)) == [], end


def test_a_journal_of_a_newer_schema_is_refused_naming_its_version(tmp_path: Path) -> None:
    newer = SCHEMA.with_metadata({VERSION_KEY: str(SCHEMA_VERSION + 1).encode()})
    path = tmp_path / "requests.arrows"
    path.write_bytes(newer.serialize().to_pybytes() + message([full(0)]))
    with pytest.raises(RecordsError, match=f"version {SCHEMA_VERSION + 1}") as refused:
        list(read_journal(path))
    assert str(path) in str(refused.value)


def test_a_tail_returns_each_batch_once_and_waits_for_a_partial_one(tmp_path: Path) -> None:
    path = tmp_path / "requests.arrows"
    tail = JournalTail(path)
    assert tail.poll() == []  # no journal yet
    first, last = message(BATCHES[0]), message(BATCHES[1])
    with path.open("wb", buffering=0) as out:
        assert tail.poll() == []
        out.write(HEADER[:10])
        assert tail.poll() == []  # half a schema
        out.write(HEADER[10:] + first)
        assert ids(tail.poll()) == [["r0", "b1"]]
        assert tail.poll() == []
        for end in range(1, len(last)):  # the next batch, written a byte at a time
            out.write(last[end - 1 : end])
            assert tail.poll() == [], end
        out.write(last[-1:])
        assert ids(tail.poll()) == [["r2", "r3", "b4"]]
        assert tail.poll() == []
        out.write(message(BATCHES[2]) + message([bare(6)]))
        assert ids(tail.poll()) == [["r5"], ["b6"]]
