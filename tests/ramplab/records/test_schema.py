"""The columnar schema: one column per ``RequestRecord`` field, and every value read back exactly
(through the journal and the Parquet file too), ``None``s and empty collections included."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pyarrow as pa
import pytest

from ramplab.measure.record import AttemptRecord, RequestRecord
from ramplab.records.files import RecordFiles
from ramplab.records.schema import (
    ATTEMPT,
    SCHEMA,
    SCHEMA_VERSION,
    VERSION_KEY,
    RecordsError,
    batch_of,
    check_schema,
    dicts_of,
    record_from_dict,
    records_of,
)
from tests.ramplab.records.samples import bare, full, write_journal


def test_every_record_field_is_a_column_in_the_records_order() -> None:
    assert SCHEMA.names == [f.name for f in dataclasses.fields(RequestRecord)]
    assert [f.name for f in ATTEMPT] == [f.name for f in dataclasses.fields(AttemptRecord)]
    assert SCHEMA.metadata == {VERSION_KEY: str(SCHEMA_VERSION).encode()}


def test_the_sample_record_sets_every_column() -> None:
    # So that the round trips below carry a value through every column, not a null.
    batch = batch_of([full(0)])
    unset = {name for name in SCHEMA.names if batch.column(name)[0].as_py() in (None, [], {})}
    assert unset == {"error_kind"}  # None on success, by definition


@pytest.mark.parametrize("record", [full(3), bare(3)], ids=["full", "bare"])
def test_a_batch_reads_back_as_the_records_dict(record: RequestRecord) -> None:
    (row,) = dicts_of(batch_of([record]))
    assert row == record.to_dict()
    assert list(records_of(batch_of([record]))) == [record]
    assert list(records_of(batch_of([record.to_dict()]))) == [record]  # from the dict form too


def test_records_round_trip_through_the_journal_and_parquet(tmp_path: Path) -> None:
    batches = [[full(0), bare(1)], [full(2)], [bare(3), full(4), full(5)]]
    expected = [r for batch in batches for r in batch]
    files = RecordFiles.in_dir(tmp_path)
    write_journal(files.journal, batches)
    assert list(files.records()) == expected  # the journal, as a killed run leaves it
    files.finalize()
    assert not files.journal.exists()
    assert files.parquet.is_file()
    assert list(files.records()) == expected
    assert files.count() == len(expected)
    read = list(files.records())
    assert read[0].prompt_labels == {"needle": {"depth": 0.25, "tags": ["a", None, 3]}, "n": 1,
                                     "ok": True}  # fmt: skip
    assert read[0].attempt_log[0].retry_after_s == 1.5
    assert read[0].attempt_log[1].retry_after_s is None
    assert read[0].itl_ms[1] == 0.1 + 0.2  # float64: not rounded
    assert read[0].arrival == 2**40
    assert read[1].phases_ms == {}
    assert read[1].itl_ms == []
    assert read[1].slo_ok is None


def test_a_newer_writers_unknown_keys_are_left_out_and_an_older_ones_missing_take_defaults() -> (
    None
):
    newer = {**full(1).to_dict(), "gpu_ms": 3.0}
    assert list(records_of(batch_of([newer]))) == [full(1)]
    older = {k: v for k, v in bare(1).to_dict().items() if k not in ("coalesced_events", "turn")}
    assert record_from_dict(older) == bare(1)
    assert list(records_of(batch_of([older]))) == [bare(1)]


def test_a_newer_schema_version_is_refused_by_name() -> None:
    newer = SCHEMA.with_metadata({VERSION_KEY: str(SCHEMA_VERSION + 1).encode()})
    with pytest.raises(RecordsError, match=f"records schema version {SCHEMA_VERSION + 1} is newer"):
        check_schema(newer, "x.parquet")
    check_schema(SCHEMA.with_metadata({VERSION_KEY: b"1"}), "x.parquet")  # known: accepted
    with pytest.raises(RecordsError, match="not a ramplab records file"):
        check_schema(pa.schema([("a", pa.int64())]), "x.parquet")
