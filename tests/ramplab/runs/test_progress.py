"""The terminal's live table: per step, the master's live figures as they stand."""

from __future__ import annotations

import json
import time
from pathlib import Path

from rich.console import Console

from ramplab.load.shapes import parse_shape
from ramplab.runs.progress import LiveProgress
from ramplab.runs.rundir import RunDir


def rows(progress: LiveProgress) -> dict[str, list[str]]:
    """The table as rendered: its header and each step's cells, by the first cell."""
    console = Console(width=200, record=True)
    console.print(progress.table())
    text = console.export_text().replace("┃", "│")  # the header's bars are heavier
    lines = [line.split("│")[1:-1] for line in text.splitlines() if "│" in line]
    return {cells[0].strip(): [cell.strip() for cell in cells] for cells in lines}


def test_each_step_shows_ttft_and_itl_p50_and_p99(tmp_path: Path) -> None:
    live = {
        "0": {
            "ttft_ms": {"p50": 41.2, "p90": 60.0, "p99": 88.7, "count": 40},
            "itl_ms": {"p50": 10.04, "p90": 11.0, "p99": 23.46, "count": 400},
        }
    }
    snapshot = {"run_start": time.time() - 3.0, "users": 4, "workers": 1, "live": live}
    RunDir(tmp_path).progress.write_text(json.dumps(snapshot))
    progress = LiveProgress(tmp_path, parse_shape("5,10@2s"), 1)
    progress.poll()
    table = rows(progress)
    ttft, itl = table["step"].index("TTFT p50/p99 ms"), table["step"].index("ITL p50/p99 ms")
    assert table["0"][ttft] == "~41 / 89"
    assert table["0"][itl] == "~10.0 / 23.5"  # a tenth of a millisecond matters there
    assert table["1"][ttft] == table["1"][itl] == "-"  # no figures for it yet
