"""Traces: the accepted formats, time order, replay (speed, loop, limit), errors, the schedule."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from ramplab.errors import UsageError
from ramplab.load.arrivals.schedule import build_schedule, make_process
from ramplab.load.arrivals.trace import TraceArrivals, trace_shape
from ramplab.load.trace import load_trace, parse_trace_spec, replay, trace_spec
from tests.support.processes import REPO

MOONCAKE = (
    '{"timestamp": 1000, "input_length": 10, "output_length": 3, "hash_ids": [1, 2]}\n'
    "\n"
    '{"timestamp": 3000, "input_length": 30, "output_length": 5, "hash_ids": [1]}\n'
    '{"timestamp": 2000, "input_length": 20, "output_length": 4, "hash_ids": []}\n'
)
AZURE = (
    "TIMESTAMP,ContextTokens,GeneratedTokens\n"
    "2023-11-16 18:15:46.6805900,374,44\n"
    "2023-11-16 18:15:50.9951690,396,109\n"
    "2023-11-16 18:15:47.1805900,879,21\n"
)


def write(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


def test_mooncake_jsonl_in_time_order_from_zero(tmp_path: Path) -> None:
    trace = load_trace(write(tmp_path, "t.jsonl", MOONCAKE))
    assert trace.offsets.tolist() == [0.0, 1.0, 2.0]
    assert trace.input_tokens.tolist() == [10, 20, 30]
    assert trace.output_tokens.tolist() == [3, 4, 5]
    assert trace.duration_s == 3.0  # span 2 s + one mean gap


def test_azure_csv_with_its_date_times(tmp_path: Path) -> None:
    trace = load_trace(write(tmp_path, "t.csv", AZURE))
    assert trace.offsets == pytest.approx([0.0, 0.5, 4.314579], abs=1e-6)
    assert trace.input_tokens.tolist() == [374, 879, 396]
    assert trace.output_tokens.tolist() == [44, 21, 109]


def test_the_other_column_names(tmp_path: Path) -> None:
    jsonl = '{"offset_s": 0.25, "input_tokens": 7, "output_tokens": 2}\n'
    csv = "offset_s,input_tokens,output_tokens\n1.5,8,3\n0.5,9,4\n"
    assert load_trace(write(tmp_path, "a.jsonl", jsonl)).input_tokens.tolist() == [7]
    trace = load_trace(write(tmp_path, "b.csv", csv))
    assert (trace.offsets.tolist(), trace.input_tokens.tolist()) == ([0.0, 1.0], [9, 8])


def test_replay_scales_loops_and_limits(tmp_path: Path) -> None:
    trace = load_trace(write(tmp_path, "t.jsonl", MOONCAKE))
    assert replay(trace, speed=2).offsets.tolist() == [0.0, 0.5, 1.0]
    looped = replay(trace, loop=2)
    assert looped.offsets.tolist() == [0.0, 1.0, 2.0, 3.0, 4.0, 5.0]  # period: 3 s
    assert looped.input_tokens.tolist() == [10, 20, 30] * 2
    cut = replay(trace, speed=4, loop=3, limit=4)
    assert cut.offsets.tolist() == [0.0, 0.25, 0.5, 0.75]
    assert cut.output_tokens.tolist() == [3, 4, 5, 3]


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ('{"timestamp": 1, "input_length": 2}\n', "needs an arrival time"),
        ('{"timestamp": 1, "input_length": 0, "output_length": 2}\n', "must be ≥ 1"),
        ('{"timestamp": "soon", "input_length": 3, "output_length": 2}\n', "line 1"),
        ("[1, 2]\n", "expected a JSON object"),
        ("{oops\n", "line 1"),
        ("\n", "holds no requests"),
    ],
)
def test_bad_traces_name_the_option_and_line(tmp_path: Path, text: str, says: str) -> None:
    with pytest.raises(UsageError, match=says) as caught:
        load_trace(write(tmp_path, "bad.jsonl", text))
    assert caught.value.field == "--ramplab-trace"


def test_a_missing_file_and_a_bad_spec(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match="No such file"):
        load_trace(tmp_path / "nope.jsonl")
    with pytest.raises(UsageError, match="SPEED:LOOP:LIMIT:PATH"):
        parse_trace_spec("trace:fast:1:0:x.jsonl", "arrivals")


def test_a_changed_file_is_read_again(tmp_path: Path) -> None:
    path = write(tmp_path, "t.jsonl", MOONCAKE)
    assert len(load_trace(path)) == 3
    path.write_text(MOONCAKE + '{"timestamp": 9000, "input_length": 1, "output_length": 1}\n')
    assert len(load_trace(path)) == 4


def test_the_schedule_is_the_replayed_trace_whatever_the_seed(tmp_path: Path) -> None:
    spec = trace_spec(write(tmp_path, "t.jsonl", MOONCAKE), speed=2, loop=2)
    process = make_process(spec)
    assert isinstance(process, TraceArrivals)
    shape = trace_shape(process.trace)
    (stage,) = shape.stages
    assert (stage.duration_s, stage.rate, stage.warmup_s) == (3.0, 2.0, 0.0)
    for seed in (1, 2):
        schedule = build_schedule(shape, process, seed)
        assert schedule.offsets.tolist() == [0.0, 0.5, 1.0, 1.5, 2.0, 2.5]
        assert np.all(schedule.stages == 0)


def test_the_shipped_sample_trace_loads() -> None:
    trace = load_trace(REPO / "campaigns" / "traces" / "sample.jsonl")
    assert len(trace) == 60
    assert trace.offsets[0] == 0.0
