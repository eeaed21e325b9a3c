"""The peers benchmark's bookkeeping, on hand-made records: what each tool's export says, and the
errors against the target's own send times."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bench.peers import Run, Stream, aiperf_streams, ramplab_streams


def _chunk(content: str | None) -> str:
    delta = {"role": "assistant", "content": ""} if content is None else {"content": content}
    return json.dumps({"choices": [{"index": 0, "delta": delta}]})


def _aiperf_record(start_ns: int, stamps_ms: list[float], events_ms: list[float]) -> dict:
    responses = [
        {"perf_ns": start_ns + 1_000_000, "packets": [{"name": "data", "value": _chunk(None)}]}
    ]
    for stamp, text in zip(stamps_ms, "abcdefgh", strict=False):
        responses.append(
            {
                "perf_ns": start_ns + int(stamp * 1e6),
                "packets": [{"name": "data", "value": _chunk(text)}],
            }
        )
    timing = "ramplab-timing " + json.dumps({"ttft_ms": events_ms[0], "events_ms": events_ms})
    responses.append(
        {"perf_ns": start_ns + 99_000_000, "packets": [{"name": "comment", "value": timing}]}
    )
    responses.append(
        {"perf_ns": start_ns + 99_000_000, "packets": [{"name": "data", "value": "[DONE]"}]}
    )
    return {
        "metadata": {"benchmark_phase": "profiling", "request_start_ns": 1_700_000_000_000_000_000},
        "start_perf_ns": start_ns,
        "status": 200,
        "responses": responses,
    }  # fmt: skip


def test_aiperf_streams_pair_its_stamps_with_the_targets_events(tmp_path: Path) -> None:
    good = _aiperf_record(5_000_000_000, [21.5, 41.0, 61.5], [20.0, 40.0, 60.0])
    warmup = {**good, "metadata": {**good["metadata"], "benchmark_phase": "warmup"}}
    failed = {**good, "status": 503}
    cut = _aiperf_record(9_000_000_000, [21.5, 41.0], [20.0, 40.0, 60.0])  # an event missing
    path = tmp_path / "raw.jsonl"
    path.write_text("\n".join(json.dumps(r) for r in (good, warmup, failed, cut)) + "\n")
    streams, errors = aiperf_streams(path)
    assert errors == 2
    [stream] = streams
    assert stream.start == pytest.approx(1_700_000_000.0)
    assert stream.ttft_ms == pytest.approx(21.5)
    assert stream.ttlt_ms == pytest.approx(61.5)
    assert stream.itl_ms == [pytest.approx(19.5), pytest.approx(20.5)]
    assert stream.server_events_ms == [20.0, 40.0, 60.0]


def test_ramplab_streams_from_requests_jsonl(tmp_path: Path) -> None:
    base = {"ok": True, "actual_start": 10.0, "ttft_send_ms": 21.0, "ttlt_send_ms": 61.0}
    records = [
        {**base, "itl_ms": [20.0, 20.0], "server_events_ms": [20.0, 40.0, 60.0]},
        {**base, "ok": False, "itl_ms": [], "server_events_ms": []},
        {**base, "itl_ms": [20.0], "server_events_ms": [20.0, 40.0, 60.0]},  # no match
    ]
    path = tmp_path / "requests.jsonl"
    path.write_text("\n".join(json.dumps(r) for r in records) + "\n")
    streams, errors = ramplab_streams(path)
    assert errors == 2
    assert [s.ttft_ms for s in streams] == [21.0]


def test_errors_rate_and_capacity_of_a_run() -> None:
    streams = [
        Stream(100.0 + i / 10, 21.0 + i % 2, 61.0, [19.5, 20.75], [20.0, 40.0, 60.0])
        for i in range(11)
    ]
    run = Run("x", 10.0, streams, (100.0, 101.0), cpu_s=0.022, errors=0)
    assert run.achieved == pytest.approx(10.0)
    assert run.pct("ttft_err", 50) == pytest.approx(1.0)
    assert sorted(set(run.values("itl_err"))) == [pytest.approx(0.5), pytest.approx(0.75)]
    assert run.cpu_ms_per_stream == pytest.approx(2.0)
    assert run.holds
    late = Run("x", 20.0, streams, (100.0, 101.0), cpu_s=0.022, errors=0)
    assert not late.holds  # achieved 10/s of the 20/s asked for
