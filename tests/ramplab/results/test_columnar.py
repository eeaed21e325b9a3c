"""The columnar summary equals the record-level definitions (``steps.measure``) exactly.

``steps.measure`` states every figure over ``RequestRecord`` objects; ``columnar.scan_run``
computes them from Arrow batches in bounded memory. Generated records with every edge the
figures care about — failures by status and by kind, unfinished requests, unsent ones, missing
values, coalesced events, reasoning phases, sessions, prefix-cache usage, stamp bounds, SLOs
met and missed, records outside every measured window — must give the same figures to the bit
(the mean to 1e-12: it is summed batch by batch rather than pairwise).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pyarrow as pa
import pytest

from ramplab.load.shapes import parse_shape
from ramplab.measure.record import UNFINISHED, RequestRecord
from ramplab.records.schema import batch_of
from ramplab.results.columnar import Grouping, scan_run
from ramplab.results.selfcheck import lateness_growth_ms
from ramplab.results.slo import RequestSlo
from ramplab.results.steps import group_measured, measure

T0 = 1_800_000_000.0
SHAPE = parse_shape("2,4,8@10s/2s")


def generated(seed: int, n: int) -> list[RequestRecord]:
    rng = np.random.default_rng(seed)
    out = []
    for i in range(n):
        offset = float(rng.uniform(-1, 31))
        stage = SHAPE.stage_at(offset)
        step = stage.index if stage is not None and rng.random() < 0.8 else None
        fate = rng.random()
        ok = fate < 0.8
        kind = None if ok else str(rng.choice(["http_status", "timeout", UNFINISHED]))
        status = 503 if kind == "http_status" else None
        events = int(rng.integers(1, 6))
        per_event = [int(rng.integers(1, 3)) for _ in range(events)]
        gaps = [float(g) for g in rng.lognormal(1, 0.5, sum(per_event[1:]))]
        coalesced = sorted({int(rng.integers(0, events))}) if rng.random() < 0.2 else []
        reasoning = int(rng.integers(1, events)) if events > 1 and rng.random() < 0.2 else 0
        lateness = float(rng.exponential(3))
        maybe = lambda v: None if rng.random() < 0.1 else v  # noqa: E731
        out.append(
            RequestRecord(
                request_id=f"r{i}", worker="w", intended_start=T0 + offset,
                actual_start=T0 + offset + lateness / 1000, ok=ok, status=status,
                error_kind=kind, step=step, attempts=0 if rng.random() < 0.05 else 1,
                total_ms=float(rng.uniform(10, 900)), lateness_ms=lateness,
                ttfb_ms=maybe(float(rng.uniform(1, 50))),
                ttft_ms=maybe(float(rng.lognormal(4, 1))) if ok else None,
                ttft_send_ms=maybe(float(rng.lognormal(4, 1))) if ok else None,
                ttlt_ms=maybe(float(rng.lognormal(6, 1))) if ok else None,
                tpot_ms=maybe(float(rng.lognormal(1, 1))) if ok else None,
                itl_ms=gaps, tokens_per_event=per_event, coalesced_events=coalesced,
                reasoning_events=reasoning,
                reasoning_tokens=maybe(reasoning * 3) if reasoning else None,
                answer_ttft_ms=maybe(float(rng.lognormal(4, 1))) if ok else None,
                output_tokens=maybe(int(sum(per_event))),
                prompt_tokens=maybe(int(rng.integers(0, 90))),
                requested_prompt_tokens=maybe(int(rng.integers(1, 2000))),
                cached_tokens=maybe(int(rng.integers(0, 40))) if rng.random() < 0.5 else None,
                stamp_error_ms=maybe(float(rng.exponential(0.5))),
                slo_ok=None if rng.random() < 0.5 else bool(rng.random() < 0.5),
                turn=int(rng.integers(1, 4)) if rng.random() < 0.1 else None,
            )
        )  # fmt: skip
    return out


def same(a: Any, b: Any) -> bool:
    if isinstance(a, float) and isinstance(b, float):
        return a == b or (math.isnan(a) and math.isnan(b))
    return bool(a == b)


@pytest.mark.parametrize("seed", [1, 2, 3])
@pytest.mark.parametrize("slo", [RequestSlo(), RequestSlo(ttft_ms=80.0, tpot_ms=3.0)])
def test_every_figure_equals_the_record_definitions(seed: int, slo: RequestSlo) -> None:
    records = generated(seed, 3000)
    table = pa.Table.from_batches([batch_of(records)])
    columns = scan_run(lambda names: table.select(names).to_batches(max_chunksize=257),
                       Grouping(SHAPE, T0), slo)  # fmt: skip
    if not slo.empty:
        slo.apply(records)
    groups = group_measured(records, SHAPE, T0)
    wholes = [r for g in groups for r in g]
    cases = [
        (i, g, st.measured_s) for i, (g, st) in enumerate(zip(groups, SHAPE.stages, strict=True))
    ]
    for index, group, window in [*cases, (None, wholes, 24.0)]:
        want = measure(group, window, 50, 3)
        got = columns.figures(index, window, 50, 3)
        assert set(got) == set(want)
        for name, value in want.items():
            if hasattr(value, "model_dump"):
                mine, theirs = got[name].model_dump(), value.model_dump()
                mean, my_mean = theirs.pop("mean"), mine.pop("mean")
                assert mine == theirs, (index, name)
                assert (mean is None) == (my_mean is None)
                if mean is not None:
                    assert my_mean == pytest.approx(mean, rel=1e-12, abs=1e-12)
            else:
                assert same(got[name], value), (index, name, got[name], value)
    for index, (group, stage) in enumerate(zip(groups, SHAPE.stages, strict=True)):
        assert columns.lateness_growth_ms[index] == lateness_growth_ms(group, stage, T0)
        assert columns.accounted(index) == sum(1 for r in group if r.turn is None or r.turn <= 1)
    turns = sorted((r.turn, r.ttft_ms or -1.0) for r in wholes if r.turn is not None)
    assert sorted((r.turn, r.ttft_ms or -1.0) for r in columns.session_records) == turns


def test_plain_grouping_keeps_every_record() -> None:
    records = generated(4, 200)
    table = batch_of(records)
    columns = scan_run(lambda names: [table.select(names)], Grouping(None, 0.0), RequestSlo())
    assert columns.figures(0, 1.0, None, None)["requests"] == 200
