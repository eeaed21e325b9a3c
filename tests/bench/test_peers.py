"""The peers benchmark's bookkeeping, on hand-made records: what each tool's export says, and the
errors against the target's own send times."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bench.peers import (
    Run,
    Stream,
    aiperf_streams,
    goal_line,
    guidellm_streams,
    ramplab_streams,
)
from bench.timing_tap import timing_lines


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


def _guidellm_request(
    response_id: str, start: float, first_ms: float, last_ms: float, n: int
) -> dict:
    timings = {
        "request_start": start,
        "first_token_iteration": start + first_ms / 1000,
        "last_token_iteration": start + last_ms / 1000,
        "token_iterations": n,
    }
    return {"response_id": response_id, "info": {"timings": timings}}


def test_guidellm_streams_pair_its_report_with_the_tap_by_completion_id(tmp_path: Path) -> None:
    report = {
        "benchmarks": [
            {
                "requests": {
                    "successful": [
                        _guidellm_request("chatcmpl-a", 100.0, 21.0, 61.5, 3),
                        _guidellm_request("chatcmpl-missing", 100.1, 21.0, 61.0, 3),
                        _guidellm_request("chatcmpl-b", 100.2, 21.0, 41.0, 2),  # 2 of 3 tokens
                    ],
                    "errored": [{"response_id": None}],
                    "incomplete": [_guidellm_request("chatcmpl-c", 100.3, 21.0, 41.0, 2)],
                }
            }
        ]
    }
    tap = [
        {"id": "chatcmpl-b", "arrival": 100.2, "events_ms": [20.0, 40.0, 60.0]},
        {"id": "chatcmpl-a", "arrival": 100.0, "events_ms": [20.0, 40.0, 60.0]},
        {"id": None, "arrival": 100.4, "events_ms": [20.0]},
    ]
    (tmp_path / "report.json").write_text(json.dumps(report))
    (tmp_path / "tap.jsonl").write_text("\n".join(json.dumps(r) for r in tap) + "\n")
    streams, errors = guidellm_streams(tmp_path / "report.json", tmp_path / "tap.jsonl")
    assert errors == 3  # the errored one, the unpaired one, the one short of a token
    [stream] = streams
    assert stream.start == 100.0
    assert stream.ttft_ms == pytest.approx(21.0)
    assert stream.ttlt_ms == pytest.approx(61.5)
    assert stream.itl_ms == [pytest.approx(20.25), pytest.approx(20.25)]  # the mean gap, twice
    assert not stream.per_gap
    run = Run("guidellm", 1.0, streams, (100.0, 101.0), cpu_s=0.0, errors=errors)
    assert run.values("itl_err") == []  # no per-gap stamps: not measurable
    assert run.values("span_err") == [pytest.approx(0.5)]  # 40.5 ms measured, 40 sent
    assert run.pct("ttft_err", 50) == pytest.approx(1.0)


def test_span_error_of_per_gap_streams() -> None:
    stream = Stream(0.0, 21.0, 61.0, [19.5, 20.75], [20.0, 40.0, 60.0])
    run = Run("x", 1.0, [stream], (0.0, 1.0), cpu_s=0.0, errors=0)
    assert run.values("span_err") == [pytest.approx(0.25)]  # |40.25 − 40|


def _runs(tool: str, rates_held: dict[float, bool]) -> list[Run]:
    out = []
    for rate, good in rates_held.items():
        gap = 20.0 if good else 22.0  # span error 0 or 4 ms
        streams = [
            Stream(100.0 + i / rate, 21.0, 61.0, [gap, gap], [20.0, 40.0, 60.0])
            for i in range(int(rate) + 1)
        ]
        out.append(Run(tool, rate, streams, (100.0, 101.0), cpu_s=0.5, errors=0))
    return out


def test_goal_line_compares_the_highest_rates_held() -> None:
    runs = _runs("ramplab", {10.0: True, 40.0: True, 100.0: True, 200.0: False})
    runs += _runs("guidellm", {10.0: True, 40.0: True, 100.0: False, 200.0: False})
    line = goal_line(runs)
    assert "ramplab 100 ÷ GuideLLM 40 = 2.50× (met)" in line
    runs = _runs("ramplab", {10.0: True, 40.0: True, 100.0: False, 200.0: False})
    runs += _runs("guidellm", {10.0: True, 40.0: True, 100.0: False, 200.0: False})
    assert "1.00× (not met)" in goal_line(runs)
    runs = _runs("guidellm", {10.0: False})
    assert "not decided" in goal_line(runs)


def test_timing_tap_reads_the_comment_out_of_a_body_write() -> None:
    body = (
        b'data: {"id":"chatcmpl-1","choices":[]}\n\n'
        b': ramplab-timing {"ttft_ms": 20.0, "events_ms": [20.0, 40.0]}\n\n'
        b"data: [DONE]\n\n"
    )
    assert timing_lines(body) == [{"ttft_ms": 20.0, "events_ms": [20.0, 40.0]}]
    assert timing_lines(b'data: {"choices":[]}\n\n') == []


def test_achieved_rate_counts_a_tool_that_stopped_early_against_the_window() -> None:
    streams = [
        Stream(100.0 + i / 20, 21.0, 61.0, [20.0, 20.0], [20.0, 40.0, 60.0]) for i in range(21)
    ]
    stopped = Run("x", 20.0, streams, (100.0, 102.0), cpu_s=0.0, errors=0)  # 1 s of 2
    assert stopped.achieved == pytest.approx(10.5)
