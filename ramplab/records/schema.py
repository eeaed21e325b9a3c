"""The records' columnar schema: one row per ``RequestRecord``, versioned.

The same schema is used on the wire (a worker's batch, an Arrow IPC message), in the run's
journal while it runs (``journal.py``) and in its Parquet file afterwards (``files.py``);
``docs/records.md`` documents it field by field and a test keeps the two equal. Lists stay lists
(``itl_ms`` is a ``list<double>`` column: one row per request, not per gap); the two phase
mappings are ``map<string, double>``; ``prompt_labels``, whose values may be of any JSON type, is
its JSON text.

Version 1 is the first columnar layout. A reader accepts a file whose version it knows and
refuses a newer one by name (``RecordsError``) rather than guess at columns it has never seen.

Version 2 adds one nullable column, ``requested_prompt_tokens``. Its own reader would need no
new version — a version 1 file reads with nulls there (``conformed``), "not known", which is
what that run knew — but a version 1 reader would not refuse a version 2 file, it would fail on
it: its Parquet fold and its exports build tables of its own ``SCHEMA`` from batches with a
column more, an ``ArrowInvalid`` mid-command. So the version is bumped: an older ramplab names
the newer file and says to upgrade, and this one reads versions 1 and 2.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

import orjson
import pyarrow as pa

from ramplab.errors import RecordsError
from ramplab.measure.record import AttemptRecord, RequestRecord

__all__ = [
    "SCHEMA",
    "SCHEMA_VERSION",
    "RecordsError",
    "batch_of",
    "check_schema",
    "conformed",
    "dicts_of",
    "record_from_dict",
    "records_of",
]

SCHEMA_VERSION = 2
VERSION_KEY = b"ramplab.records"

_MS = pa.float64()
_PHASES = pa.map_(pa.string(), pa.float64())
ATTEMPT = pa.struct(
    [
        ("attempt", pa.int32()),
        ("start", pa.float64()),
        ("status", pa.int32()),
        ("error_kind", pa.string()),
        ("duration_ms", _MS),
        ("retry_after_s", pa.float64()),
        ("wait_before_ms", _MS),
    ]
)

SCHEMA = pa.schema(
    [
        ("request_id", pa.string()),
        ("worker", pa.string()),
        ("intended_start", pa.float64()),
        ("actual_start", pa.float64()),
        ("ok", pa.bool_()),
        ("status", pa.int32()),
        ("error_kind", pa.string()),
        ("step", pa.int32()),
        ("target_qps", pa.float64()),
        ("arrival", pa.int64()),
        ("session_id", pa.string()),
        ("turn", pa.int32()),
        ("attempts", pa.int32()),
        ("attempt_log", pa.list_(ATTEMPT)),
        ("total_ms", _MS),
        ("lateness_ms", _MS),
        ("ttfb_ms", _MS),
        ("ttft_ms", _MS),
        ("ttft_send_ms", _MS),
        ("ttlt_ms", _MS),
        ("ttlt_send_ms", _MS),
        ("tpot_ms", _MS),
        ("itl_ms", pa.list_(_MS)),
        ("phases_ms", _PHASES),
        ("server_timing_ms", _PHASES),
        ("output_tokens", pa.int64()),
        ("output_tokens_source", pa.string()),
        ("prompt_tokens", pa.int64()),
        ("bytes_received", pa.int64()),
        ("events", pa.int64()),
        ("slo_ok", pa.bool_()),
        ("error_detail", pa.string()),
        ("prompt_labels", pa.string()),  # JSON text: its values may be of any type
        ("tokens_per_event", pa.list_(pa.int32())),
        ("server_events_ms", pa.list_(_MS)),
        ("integrity", pa.string()),
        ("answer_ttft_ms", _MS),
        ("reasoning_events", pa.int32()),
        ("reasoning_tokens", pa.int64()),
        ("cached_tokens", pa.int64()),
        ("completion_id", pa.string()),
        ("local_port", pa.int32()),
        ("coalesced_events", pa.list_(pa.int32())),
        ("stamp_error_ms", _MS),
        ("read_delay_ms", _MS),
        ("requested_prompt_tokens", pa.int64()),  # version 2; null in a version 1 file
    ],
    metadata={VERSION_KEY: str(SCHEMA_VERSION).encode()},
)

_MAPS = ("phases_ms", "server_timing_ms")
_LISTS = ("attempt_log", "itl_ms", "tokens_per_event", "server_events_ms", "coalesced_events")


def check_schema(schema: pa.Schema, source: object) -> None:
    """Refuse records written with a schema version this reader does not know."""
    version = (schema.metadata or {}).get(VERSION_KEY)
    if version is None:
        raise RecordsError(str(source), f"not a ramplab records file (no {VERSION_KEY.decode()})")
    if int(version) > SCHEMA_VERSION:
        raise RecordsError(
            str(source),
            f"records schema version {int(version)} is newer than this ramplab reads "
            f"({SCHEMA_VERSION}); upgrade ramplab to read it",
        )


def conformed(batch: pa.RecordBatch, columns: Sequence[str] | None = None) -> pa.RecordBatch:
    """``batch`` with ``columns`` (every column of ``SCHEMA`` when ``None``), in that order; a
    column its writer did not have yet is all nulls."""
    names = [f.name for f in SCHEMA] if columns is None else list(columns)
    if batch.schema.names == names:
        return batch
    arrays = [
        batch.column(name)
        if name in batch.schema.names
        else pa.nulls(batch.num_rows, SCHEMA.field(name).type)
        for name in names
    ]
    return pa.RecordBatch.from_arrays(arrays, schema=pa.schema([SCHEMA.field(n) for n in names]))


def _row(record: RequestRecord | dict[str, Any]) -> dict[str, Any]:
    data = record.to_dict() if isinstance(record, RequestRecord) else dict(record)
    labels = data.get("prompt_labels")
    data["prompt_labels"] = orjson.dumps(labels).decode() if labels else None
    return data


def batch_of(records: Sequence[RequestRecord | dict[str, Any]]) -> pa.RecordBatch:
    """The records (or their ``to_dict()`` forms) as one batch of ``SCHEMA``; unknown keys of a
    dict (a newer writer) are left out."""
    return pa.RecordBatch.from_pylist([_row(r) for r in records], schema=SCHEMA)


def dicts_of(batch: pa.RecordBatch | pa.Table) -> Iterator[dict[str, Any]]:
    """Each row as ``RequestRecord.to_dict()`` would give it (what ``requests.jsonl`` held)."""
    for row in batch.to_pylist():
        for name in _MAPS:
            value = row.get(name)
            row[name] = dict(value) if value else {}
        labels = row.get("prompt_labels")
        row["prompt_labels"] = orjson.loads(labels) if labels else {}
        for name in _LISTS:
            if row.get(name) is None:
                row[name] = []
        yield row


def record_from_dict(data: dict[str, Any]) -> RequestRecord:
    """The inverse of ``RequestRecord.to_dict()``; unknown keys (newer writers) are ignored,
    missing ones take the field's default."""
    known = RequestRecord.__dataclass_fields__
    fields = {key: value for key, value in data.items() if key in known and value is not None}
    for name in ("status", "error_kind"):  # no default: required, and None is a real value
        fields.setdefault(name, None)
    fields["attempt_log"] = [
        AttemptRecord(
            **{k: v for k, v in attempt.items() if k in AttemptRecord.__dataclass_fields__}
        )
        for attempt in data.get("attempt_log") or []
    ]
    return RequestRecord(**fields)


def records_of(batch: pa.RecordBatch | pa.Table) -> Iterator[RequestRecord]:
    for row in dicts_of(batch):
        yield record_from_dict(row)
