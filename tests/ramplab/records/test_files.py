"""One reader for a run's records in any form: Parquet then the journal, in the order written;
``finalize`` folds the journal into Parquet or leaves both as they were; an old
``requests.jsonl`` reads as it always did."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import orjson
import pyarrow.parquet as pq
import pytest

from ramplab.records.files import FOLDED_KEY, RecordFiles
from ramplab.records.schema import SCHEMA, SCHEMA_VERSION, VERSION_KEY, RecordsError
from tests.ramplab.records.samples import bare, full, message, write_journal


def test_finalize_appends_the_journal_to_the_parquet_file_in_order(tmp_path: Path) -> None:
    files = RecordFiles.in_dir(tmp_path)
    first = [full(0), bare(1), full(2)]
    write_journal(files.journal, [first[:2], first[2:]])
    files.finalize()
    # A web-UI run restarted: a second journal beside the finalised records.
    second = [bare(3), full(4)]
    write_journal(files.journal, [[second[0]], [second[1]]])
    assert files.count() == 5
    assert list(files.records()) == first + second  # read as it is: Parquet, then the journal
    files.finalize()
    assert not files.journal.exists()
    assert not files.parquet.with_name("requests.parquet.tmp").exists()
    assert list(files.records()) == first + second
    assert files.count() == pq.ParquetFile(files.parquet).metadata.num_rows == 5
    written = pq.ParquetFile(files.parquet).schema_arrow
    # Equal types (Parquet names a list's item "element", which Arrow's type equality ignores).
    assert [(f.name, f.type) for f in written] == [(f.name, f.type) for f in SCHEMA]
    # The schema's version, and which journal the last fold took in.
    assert written.metadata[b"ramplab.records"] == SCHEMA.metadata[b"ramplab.records"]
    assert set(written.metadata) == {b"ramplab.records", FOLDED_KEY}
    files.finalize()  # no journal: nothing to do
    assert list(files.records()) == first + second


def test_a_kill_between_the_rename_and_the_journals_deletion_reads_each_record_once(
    tmp_path: Path,
) -> None:
    files = RecordFiles.in_dir(tmp_path)
    records = [full(0), bare(1)]
    write_journal(files.journal, [records])
    journal = files.journal.read_bytes()
    files.finalize()
    files.journal.write_bytes(journal)  # the state that kill leaves
    assert list(files.records()) == records
    assert files.count() == len(records)
    files.finalize()  # the leftover goes, the records stay
    assert not files.journal.exists()
    assert list(files.records()) == records
    # A new journal (a restarted web-UI run) is read after the Parquet file, not skipped.
    write_journal(files.journal, [[bare(2)]])
    assert [r.request_id for r in files.records()] == [r.request_id for r in [*records, bare(2)]]


def test_a_failed_finalize_keeps_the_parquet_file_and_the_journal(tmp_path: Path) -> None:
    files = RecordFiles.in_dir(tmp_path)
    write_journal(files.journal, [[full(0), bare(1)]])
    files.finalize()
    parquet = files.parquet.read_bytes()
    # A journal the fold cannot read (a newer version's): the failure comes after the Parquet
    # file's rows were copied into the temporary file.
    newer = SCHEMA.with_metadata({VERSION_KEY: str(SCHEMA_VERSION + 1).encode()})
    journal = newer.serialize().to_pybytes() + message([full(2)])
    files.journal.write_bytes(journal)
    with pytest.raises(RecordsError, match=f"version {SCHEMA_VERSION + 1}"):
        files.finalize()
    assert files.parquet.read_bytes() == parquet
    assert files.journal.read_bytes() == journal
    assert sorted(p.name for p in tmp_path.iterdir()) == ["requests.arrows", "requests.parquet"]


def test_a_parquet_file_of_a_newer_schema_is_refused_naming_its_version(tmp_path: Path) -> None:
    files = RecordFiles.in_dir(tmp_path)
    write_journal(files.journal, [[full(0)]])
    files.finalize()
    table = pq.read_table(files.parquet)
    newer = table.replace_schema_metadata({VERSION_KEY: str(SCHEMA_VERSION + 1).encode()})
    pq.write_table(newer, files.parquet)
    with pytest.raises(RecordsError, match=f"schema version {SCHEMA_VERSION + 1} is newer"):
        list(files.records())


def test_a_version_1_parquet_file_reads_with_nulls_for_the_columns_added_since(
    tmp_path: Path,
) -> None:
    files = RecordFiles.in_dir(tmp_path)
    written = [full(0), bare(1)]
    write_journal(files.journal, [written])
    files.finalize()
    # As version 1 wrote it: no requested_prompt_tokens column.
    table = pq.read_table(files.parquet).drop_columns(["requested_prompt_tokens"])
    pq.write_table(table.replace_schema_metadata({VERSION_KEY: b"1"}), files.parquet)
    as_then = [replace(r, requested_prompt_tokens=None) for r in written]
    assert list(files.records()) == as_then
    assert files.count() == 2
    wanted = ["request_id", "requested_prompt_tokens", "prompt_tokens"]
    assert [row for b in files.batches(wanted) for row in b.to_pylist()] == [
        {"request_id": "r0", "requested_prompt_tokens": None, "prompt_tokens": 2**33},
        {"request_id": "b1", "requested_prompt_tokens": None, "prompt_tokens": None},
    ]
    # A journal of this version folded into it: one version 2 file, the old rows null there.
    write_journal(files.journal, [[full(2)]])
    files.finalize()
    assert pq.read_schema(files.parquet).metadata[VERSION_KEY] == str(SCHEMA_VERSION).encode()
    assert list(files.records()) == [*as_then, full(2)]


def test_columns_are_read_alone_from_every_form(tmp_path: Path) -> None:
    files = RecordFiles.in_dir(tmp_path)
    write_journal(files.journal, [[full(0)], [bare(1)]])
    columns = ["request_id", "ok", "itl_ms"]
    from_journal = [row for b in files.batches(columns) for row in b.to_pylist()]
    files.finalize()
    assert [row for b in files.batches(columns) for row in b.to_pylist()] == from_journal
    assert from_journal == [
        {"request_id": "r0", "ok": True, "itl_ms": full(0).itl_ms},
        {"request_id": "b1", "ok": False, "itl_ms": []},
    ]


def test_an_old_jsonl_with_a_corrupt_line_and_a_torn_last_line_reads_as_before(
    tmp_path: Path,
) -> None:
    files = RecordFiles.in_dir(tmp_path)
    records = [full(0), bare(1), full(2)]
    lines = [orjson.dumps(r.to_dict()) + b"\n" for r in records]
    old = {k: v for k, v in bare(3).to_dict().items() if k != "coalesced_events"}  # pre-0.9
    files.jsonl.write_bytes(
        lines[0] + b'{"request_id": "x", "worker": \n' + lines[1] + b"\n" + b"[1, 2]\n"
        + lines[2] + orjson.dumps(old) + b"\n" + orjson.dumps(full(4).to_dict())[:50]
    )  # fmt: skip
    assert files.exist()
    assert not files.columnar
    expected = [*records, bare(3)]
    assert list(files.records()) == expected  # the torn last line and the blank one passed over
    assert files.corrupt() == 2  # the cut object, and a line that is JSON but not a record
    assert files.count() == 4
    assert [r for b in files.batches(["request_id"]) for r in b.column(0).to_pylist()] == [
        "r0", "b1", "r2", "b3"
    ]  # fmt: skip


def test_a_directory_without_records_has_none(tmp_path: Path) -> None:
    files = RecordFiles.in_dir(tmp_path / "nothing")
    assert not files.exist()
    assert list(files.records()) == []
    assert list(files.batches()) == []
    assert files.count() == 0
    assert files.corrupt() == 0
    files.finalize()
    assert not files.parquet.exists()
