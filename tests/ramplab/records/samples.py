"""Records that use every column: values, ``None``s, empty lists and maps, nested labels."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa

from ramplab.measure.record import AttemptRecord, RequestRecord
from ramplab.records.journal import HEADER
from ramplab.records.schema import batch_of


def full(index: int) -> RequestRecord:
    """A retried, streamed record with every field set to something other than its default."""
    start = 1_700_000_000.0 + index * 0.25
    return RequestRecord(
        request_id=f"r{index}", worker="host_1a2b", intended_start=start,
        actual_start=start + 0.0004, ok=True, status=200, error_kind=None, step=2,
        target_qps=12.5, arrival=2**40 + index, session_id=f"s{index // 2}", turn=index % 2 + 1,
        attempts=2,
        attempt_log=[
            AttemptRecord(1, start, 429, "http_status", 3.25, retry_after_s=1.5),
            AttemptRecord(2, start + 1.6, 200, None, 370.125, None, wait_before_ms=1500.0),
        ],
        total_ms=1873.5, lateness_ms=0.4, ttfb_ms=50.0, ttft_ms=55.0 + index, ttft_send_ms=54.6,
        ttlt_ms=370.0, ttlt_send_ms=369.6, tpot_ms=10.1, itl_ms=[10.0, 0.1 + 0.2, 1e-9],
        phases_ms={"dns": 0.1, "connect": 0.25, "wait": 49.0},
        server_timing_ms={"queue": 1.0, "prefill": 20.5}, output_tokens=4,
        output_tokens_source="usage", prompt_tokens=2**33, bytes_received=4096, events=5,
        slo_ok=False, error_detail="retried: 429 Too Many Requests",
        prompt_labels={"needle": {"depth": 0.25, "tags": ["a", None, 3]}, "n": 1, "ok": True},
        tokens_per_event=[1, 2, 1], server_events_ms=[20.0, 30.0, 40.0], integrity="verified",
        answer_ttft_ms=60.0, reasoning_events=1, reasoning_tokens=7, cached_tokens=0,
        completion_id="chatcmpl-9", local_port=54321, coalesced_events=[2], stamp_error_ms=0.05,
        read_delay_ms=0.2, requested_prompt_tokens=2**33 - 12,
    )  # fmt: skip


def bare(index: int) -> RequestRecord:
    """A record that failed before any answer: every optional field left at its default."""
    return RequestRecord(f"b{index}", "w", 1.5, 1.5, False, None, "connect_error")


def message(records: list[RequestRecord]) -> bytes:
    """One journal message: a batch serialised as a worker sends it."""
    return batch_of(records).serialize().to_pybytes()


def write_journal(path: Path, batches: list[list[RequestRecord]]) -> list[int]:
    """A journal of these batches; the offset where each message starts."""
    offsets = []
    data = bytearray(HEADER)
    for records in batches:
        offsets.append(len(data))
        data += message(records)
    path.write_bytes(bytes(data))
    return offsets


def table(batches: list[pa.RecordBatch]) -> pa.Table:
    return pa.Table.from_batches(batches)
