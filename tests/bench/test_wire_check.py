"""ramplab's stamps against a packet capture of its own run (``bench/wire_accuracy.py``).

Two short cells of 20 closed-loop streams against the reference target under ``tcpdump``:
quiet, and starved by two busy loops on the worker's core. Each must join every record with a
wire exchange and every exchange with a record; the quiet one must agree with the wire to 0.05
ms per event at the median. And whatever the machine did, ramplab must say so: a step whose
TTFT or ITL |Δ| p99 against the wire passes 2 ms is marked ``untrusted`` in ``summary.json``,
one with both under 1 ms is not. ITL over every gap: ramplab keeps the coalesced ones out of its
figures, and whether the rest still stands for the step is exactly what the mark says.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from bench import wire_accuracy
from bench.wire_accuracy import TRUSTED_MS, UNTRUSTED_MS, Cell, run_cell

pytestmark = [
    pytest.mark.timing,
    pytest.mark.slow,
    pytest.mark.timeout(600),
    pytest.mark.skipif(
        shutil.which("tcpdump") is None or os.geteuid() != 0 or (os.cpu_count() or 1) < 2,
        reason="needs tcpdump, root (to capture on lo) and two cores (to pin)",
    ),
]

STREAMS = 20
HOLD_S = 5.0
WARMUP_S = 1.0


@pytest.fixture(scope="module")
def port() -> Iterator[int]:
    with wire_accuracy.pinned_target(wire_accuracy.SERVER_CPU) as port:
        yield port


def _cell(port: int, condition: str, tmp_path: Path) -> Cell:
    return run_cell(port, condition, tmp_path, (STREAMS,), HOLD_S, WARMUP_S)


def _everything_matched(cell: Cell) -> None:
    assert cell.matching.pairs, "no record was joined with the wire"
    assert cell.matching.records == [], "records with no exchange on the wire"
    lone = [(e.local_port, e.request_line) for e in cell.matching.exchanges]
    assert lone == [], "exchanges on the wire with no record"
    assert cell.problems == []


def _trust_rule(cell: Cell) -> None:
    missing = [step["index"] for step in cell.summary["steps"] if "untrusted" not in step]
    if missing:
        pytest.skip(
            f"summary.json steps {missing} carry no 'untrusted' field yet (being added in "
            "parallel); the trust rule turns on by itself once it is there"
        )
    for step in cell.summary["steps"]:
        deltas = cell.step_deltas(step)
        assert deltas.requests > 0, f"step {step['index']}: nothing to compare"
        worst = max(deltas.ttft[1], deltas.itl[1])
        said = (step["untrusted"], step.get("untrusted_reason"))
        figures = f"TTFT |Δ| p99 {deltas.ttft[1]:.3f} ms, ITL |Δ| p99 {deltas.itl[1]:.3f} ms"
        if worst > UNTRUSTED_MS:
            assert step["untrusted"] is True, f"step {step['index']}: {figures}, summary {said}"
        if worst < TRUSTED_MS:
            assert step["untrusted"] is False, f"step {step['index']}: {figures}, summary {said}"


def test_quiet_cell_agrees_with_the_wire(port: int, tmp_path: Path) -> None:
    cell = _cell(port, "quiet", tmp_path)
    _everything_matched(cell)
    deltas = [cell.step_deltas(step) for step in cell.summary["steps"]]
    for each in deltas:
        assert each.per_event_p50 <= 0.05, each
        assert each.ttlt_rebuild_max < 0.001, each  # the record's offsets rebuild to its TTLT
    _trust_rule(cell)


def test_starved_cell_is_matched_and_flagged_when_off(port: int, tmp_path: Path) -> None:
    cell = _cell(port, "starved", tmp_path)
    _everything_matched(cell)
    _trust_rule(cell)
