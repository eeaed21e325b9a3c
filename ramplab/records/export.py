"""A run's records written out in the format another tool wants: JSON Lines, CSV or Parquet.

Any run directory: Parquet, a journal left by a killed master, or an old ``requests.jsonl``.
Batch by batch, so memory does not grow with the records. JSON Lines rows are what
``RequestRecord.to_dict()`` gives (the old ``requests.jsonl``, line for line); CSV cannot hold
lists and maps, so those columns are their JSON text; Parquet is the run's own schema.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from enum import StrEnum
from pathlib import Path

import orjson
import pyarrow as pa
import pyarrow.csv as pacsv

from ramplab.records.files import RecordFiles, parquet_writer
from ramplab.records.schema import SCHEMA, dicts_of

__all__ = ["Format", "export"]


class Format(StrEnum):
    jsonl = "jsonl"
    csv = "csv"
    parquet = "parquet"


def export(files: RecordFiles, fmt: Format, out: Path,
           progress: Callable[[int], None] | None = None) -> int:  # fmt: skip
    """Write every record of ``files`` to ``out`` (through a temporary file: a failed export
    leaves no partial file); the number of records written."""
    tmp = out.with_name(out.name + ".tmp")
    written = 0
    try:
        if fmt is Format.parquet:
            with parquet_writer(tmp) as writer:
                for batch in files.batches():
                    writer.write_table(pa.Table.from_batches([batch], SCHEMA))
                    written += _advance(batch, written, progress)
        elif fmt is Format.jsonl:
            with tmp.open("wb") as handle:
                for batch in files.batches():
                    handle.write(b"".join(orjson.dumps(row) + b"\n" for row in dicts_of(batch)))
                    written += _advance(batch, written, progress)
        else:
            with pacsv.CSVWriter(tmp, _flat_schema()) as writer:
                for batch in files.batches():
                    writer.write_batch(_flat(batch))
                    written += _advance(batch, written, progress)
        os.replace(tmp, out)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    return written


def _advance(batch: pa.RecordBatch, before: int, progress: Callable[[int], None] | None) -> int:
    if progress is not None:
        progress(before + batch.num_rows)
    return int(batch.num_rows)


def _nested(field: pa.Field) -> bool:
    return bool(pa.types.is_list(field.type) or pa.types.is_map(field.type))


def _flat_schema() -> pa.Schema:
    return pa.schema([pa.field(f.name, pa.string()) if _nested(f) else f for f in SCHEMA])


def _flat(batch: pa.RecordBatch) -> pa.RecordBatch:
    """Lists and maps as their JSON text (CSV has no nested values)."""
    columns = []
    rows = list(dicts_of(batch)) if any(_nested(f) for f in SCHEMA) else []
    for field in SCHEMA:
        if _nested(field):
            texts = [orjson.dumps(row[field.name]).decode() for row in rows]
            columns.append(pa.array(texts, pa.string()))
        else:
            columns.append(batch.column(field.name))
    return pa.RecordBatch.from_arrays(columns, schema=_flat_schema())
