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
    equal_error_bound,
    goal_line,
    guidellm_streams,
    looser_bounds,
    ramplab_streams,
    verdict,
)
from bench.timing_tap import timing_lines
from ramplab.runs.rundir import RunDir


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


def test_ramplab_streams_from_a_runs_records(tmp_path: Path) -> None:
    base = {"ok": True, "actual_start": 10.0, "ttft_send_ms": 21.0, "ttlt_send_ms": 61.0}
    records = [
        {**base, "itl_ms": [20.0, 20.0], "server_events_ms": [20.0, 40.0, 60.0]},
        {**base, "ok": False, "itl_ms": [], "server_events_ms": []},
        {**base, "itl_ms": [20.0], "server_events_ms": [20.0, 40.0, 60.0]},  # no match
    ]
    writer = RunDir(tmp_path).open_writer()
    for r in records:
        writer.write(r)
    writer.finalize()  # requests.parquet, as a run leaves it
    streams, errors = ramplab_streams(tmp_path)
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


def _runs(tool: str, span_p99_ms: dict[float, float], cpu_s: float = 0.5) -> list[Run]:
    """One run per rate, on rate, every stream's span error the value given (so its p99)."""
    out = []
    for rate, error in span_p99_ms.items():
        gap = 20.0 + error / 2  # two gaps: the span is 40 ms + error
        streams = [
            Stream(100.0 + i / rate, 21.0, 61.0 + error, [gap, gap], [20.0, 40.0, 60.0])
            for i in range(int(rate) + 1)
        ]
        out.append(Run(tool, rate, streams, (100.0, 101.0), cpu_s=cpu_s, errors=0))
    return out


def test_equal_error_bound_is_guidellms_best_p99_rounded_up_to_half_a_millisecond() -> None:
    runs = _runs("guidellm", {1.0: 2.1, 5.0: 1.9, 10.0: 3.3})
    runs += _runs("ramplab", {1.0: 0.2})  # another tool's errors do not set it
    assert equal_error_bound(runs) == 2.0
    assert equal_error_bound(_runs("guidellm", {1.0: 1.5})) == 1.5  # a step is its own bound
    late = _runs("guidellm", {5.0: 0.3})
    late[0].rate = 50.0  # achieved 5/s of 50/s: its error does not count
    assert equal_error_bound(late) is None


def test_goal_met_when_ramplab_holds_twice_guidellms_rate_within_e() -> None:
    runs = _runs("guidellm", {1.0: 1.9, 5.0: 2.4, 20.0: 6.0}, cpu_s=1.0)
    runs += _runs("ramplab", {1.0: 0.3, 5.0: 0.3, 20.0: 1.2, 40.0: 20.0}, cpu_s=0.25)
    found = verdict(runs)
    assert found.bound_ms == 2.0
    assert found.theirs is not None
    assert found.theirs.rate == 1.0  # 5/s at 2.4 ms is above E
    assert found.ours is not None
    assert found.ours.rate == 20.0
    assert found.state == "met"
    assert found.ratio == pytest.approx(20.0)
    assert found.per_core_ratio == pytest.approx(80.0)  # 20/s on 0.25 cores ÷ 1/s on 1 core
    assert "= **20.00×**, goal **met**" in goal_line(runs)
    assert looser_bounds(runs)[2:] == [
        "| 2 | 20 | 1 | 20.00× |",
        "| 4 | 20 | 5 | 4.00× |",
        "| 8 | 20 | 20 | 1.00× |",
    ]


def test_goal_not_met_when_ramplab_stops_below_twice_guidellms_rate() -> None:
    runs = _runs("guidellm", {10.0: 1.0, 20.0: 0.9})
    runs += _runs("ramplab", {10.0: 0.3, 20.0: 0.5, 30.0: 5.0})
    found = verdict(runs)
    assert (found.state, found.ratio) == ("NOT met", 1.0)
    assert "goal **NOT met**" in goal_line(runs)


def test_goal_not_decided_when_ramplab_holds_the_highest_rate_tried_below_the_ratio() -> None:
    runs = _runs("guidellm", {10.0: 1.0, 20.0: 0.9}) + _runs("ramplab", {10.0: 0.3, 20.0: 0.5})
    found = verdict(runs)
    assert found.state == "not decided"
    assert "its limit lies beyond" in goal_line(runs)


def test_goal_met_at_least_when_ramplab_holds_the_highest_rate_tried() -> None:
    runs = _runs("guidellm", {10.0: 1.0, 40.0: 5.0}) + _runs("ramplab", {10.0: 0.3, 40.0: 0.5})
    assert "= **4.00×**, goal **met** — at least" in goal_line(runs)


def test_goal_not_met_when_ramplab_holds_nothing_within_e() -> None:
    runs = _runs("guidellm", {10.0: 1.0}) + _runs("ramplab", {10.0: 1.3})
    assert verdict(runs).state == "NOT met"
    assert "ramplab held no rate tried within E" in goal_line(runs)


def test_goal_not_decided_without_a_guidellm_rate_achieved() -> None:
    runs = _runs("ramplab", {10.0: 0.3})
    assert verdict(runs).state == "not decided"
    assert "**not decided** — GuideLLM achieved none" in goal_line(runs)


def test_target_lateness_is_each_send_after_the_latency_models_time() -> None:
    stream = Stream(0.0, 21.0, 61.0, [20.0], [20.5, 43.0])  # due at 20 and 40 ms
    run = Run("x", 1.0, [stream], (0.0, 1.0), cpu_s=0.0, errors=0)
    assert run.values("target_late") == [pytest.approx(0.5), pytest.approx(3.0)]


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
    assert stopped.achieved == pytest.approx(11.0)  # 21 starts + 1 of slack in 2 s
    assert not stopped.on_rate


def test_achieved_rate_allows_a_start_lost_at_the_windows_edge() -> None:
    streams = [Stream(102.001 + i, 21.0, 61.0, [20.0], [20.0, 40.0]) for i in range(7)]
    low = Run("x", 1.0, streams, (102.0, 110.0), cpu_s=0.0, errors=0)  # 7 starts of 8 at 1/s
    assert low.achieved == pytest.approx(1.0)
    assert low.on_rate
