"""The streamed schedule is the schedule ramplab built whole before (``bench/eager_schedule``):
the same offsets, the same global indices in every worker's share, the same measured counts."""

from __future__ import annotations

import numpy as np
import pytest

from bench.eager_schedule import eager_schedule
from ramplab.load.arrivals import (
    Epoch,
    ShareChunk,
    make_process,
    schedule_chunks,
    share_chunks,
    worker_share,
)
from ramplab.load.arrivals.schedule import StageBounds
from ramplab.load.arrivals.trace import trace_shape
from ramplab.load.shapes import parse_shape
from ramplab.load.trace import trace_spec
from ramplab.results.producer import scheduled_counts
from ramplab.results.steps import count_measured
from tests.support.processes import REPO

SHAPES = ["1,5,20,50@10s/2s", "linear:1..400@30s", "0,3,0.5,120@7s", "custom:900@4s,0.2@3s"]
PROCESSES = ["constant", "poisson", "gamma", "gamma:0.05", "gamma:8"]
# Chunks smaller than a stage, down to one arrival, so every seam (chunk, batch, stage) is hit.
SIZES = [1, 97, 65_536]


@pytest.mark.parametrize("shape_text", SHAPES)
@pytest.mark.parametrize("spec", PROCESSES)
@pytest.mark.parametrize("seed", [0, 42])
def test_the_streamed_schedule_is_the_eager_one_bit_for_bit(
    shape_text: str, spec: str, seed: int
) -> None:
    shape, process = parse_shape(shape_text), make_process(spec)
    eager = eager_schedule(shape, process, seed)
    for size in SIZES:
        chunks = list(schedule_chunks(shape, process, seed, size))
        assert all(0 < len(c.offsets) <= size for c in chunks)
        assert [c.first for c in chunks] == np.cumsum([0] + [len(c.offsets) for c in chunks])[
            :-1
        ].tolist()
        streamed = np.concatenate([c.offsets for c in chunks]) if chunks else np.empty(0)
        assert streamed.tobytes() == eager.tobytes()
        stages = np.concatenate([c.stages for c in chunks]) if chunks else np.empty(0)
        assert stages.tolist() == shape.stage_indices(eager).tolist()


def share(
    shape_text: str, spec: str, seed: int, epochs: list[Epoch], worker: str, size: int
) -> ShareChunk:
    parts = list(
        share_chunks(
            schedule_chunks(parse_shape(shape_text), make_process(spec), seed, size), epochs, worker
        )
    )
    indices = np.concatenate([p[0] for p in parts]) if parts else np.empty(0, dtype=np.intp)
    offsets = np.concatenate([p[1] for p in parts]) if parts else np.empty(0)
    return indices, offsets


EPOCHS = {
    "one worker": [Epoch(0, ["w0"])],
    "two workers": [Epoch(0, ["w0", "w1"])],
    "three workers": [Epoch(0, ["b", "a", "c"])],
    "a join then a leave": [
        Epoch(0, ["a", "b"]),
        Epoch(6.3, ["a", "b", "c"]),
        Epoch(19, ["c", "a"]),
    ],
}


@pytest.mark.parametrize("shape_text", SHAPES[:3])
@pytest.mark.parametrize("spec", ["constant", "poisson", "gamma:0.05"])
@pytest.mark.parametrize("seed", [1, 7])
@pytest.mark.parametrize("membership", list(EPOCHS))
def test_every_workers_streamed_share_is_its_eager_share(
    shape_text: str, spec: str, seed: int, membership: str
) -> None:
    epochs = EPOCHS[membership]
    eager = eager_schedule(parse_shape(shape_text), make_process(spec), seed)
    for worker in sorted({w for e in epochs for w in e.workers}):
        expected = worker_share(eager, epochs, worker)
        for size in (1, 5, 65_536):
            indices, offsets = share(shape_text, spec, seed, epochs, worker, size)
            assert indices.tolist() == expected.tolist()
            assert offsets.tobytes() == eager[expected].tobytes()


def test_a_replayed_trace_streams_as_it_was_built() -> None:
    spec = trace_spec(REPO / "campaigns" / "traces" / "sample.jsonl", speed=3, loop=4)
    process = make_process(spec)
    shape = trace_shape(process.trace)  # type: ignore[attr-defined]
    eager = eager_schedule(shape, process, 0)
    streamed = np.concatenate([c.offsets for c in schedule_chunks(shape, process, 0, 7)])
    assert streamed.tobytes() == eager.tobytes()
    indices, offsets = share(
        f"{shape.stages[0].rate!r}@{shape.duration_s!r}s", spec, 0, [Epoch(0, ["a", "b"])], "b", 7
    )
    expected = worker_share(eager, [Epoch(0, ["a", "b"])], "b")
    assert indices.tolist() == expected.tolist()
    assert offsets.tobytes() == eager[expected].tobytes()


@pytest.mark.parametrize("spec", ["constant", "poisson", "gamma:0.05"])
def test_the_masters_scheduled_counts_are_the_eager_schedules(spec: str) -> None:
    plan = parse_shape("1,5,20,50,300@10s/3s")
    eager = eager_schedule(plan, make_process(spec), 3)
    interrupted = parse_shape("1,5,20@10s/3s")  # the part of the plan that ran
    for measured in (plan, interrupted):
        assert scheduled_counts(plan, spec, 3, measured) == count_measured(eager, measured)


def test_an_arrival_before_the_first_epoch_is_refused_as_before() -> None:
    chunks = schedule_chunks(parse_shape("5@2s"), make_process("constant"), 0)
    with pytest.raises(ValueError, match="precedes the first epoch"):
        list(share_chunks(chunks, [Epoch(0.5, ["a"])], "a"))


@pytest.mark.parametrize("size", [1, 13, 65_536])
def test_stage_bounds_give_each_arrival_its_stage(size: int) -> None:
    shape, process = parse_shape("3,0,40,0.5,200@5s"), make_process("poisson")
    bounds = StageBounds()
    stages: list[int] = []
    for chunk in schedule_chunks(shape, process, 11, size):
        bounds.see(chunk)
        stages += chunk.stages.tolist()
    for chunk in schedule_chunks(shape, process, 11, size):  # read again, as a re-split does
        bounds.see(chunk)
    assert [bounds.stage_of(i) for i in range(len(stages))] == stages
    with pytest.raises(LookupError):
        StageBounds().stage_of(0)
