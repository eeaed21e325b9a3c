"""The ramplab tab of Locust's web UI, read from a real master (and a worker) while it runs."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import httpx
import pytest

from target_service.embedded_redis import free_port
from tests.support.processes import Process, log_tail, stop_all
from tests.support.ramp_runs import LOCUST, STREAM
from tests.support.targets import SharedTarget

pytestmark = pytest.mark.slow


def tab_rows(url: str) -> list[dict[str, Any]] | None:
    """The ramplab tab's rows in one ``/stats/requests`` answer (``None``: UI not up yet)."""
    try:
        answer = httpx.get(url + "/stats/requests", timeout=5)
    except httpx.HTTPError:
        return None
    (tab,) = answer.json()["extended_stats"]
    assert tab["key"] == "ramplab"
    rows: list[dict[str, Any]] = tab["data"]
    return rows


def test_the_tab_shows_each_step_as_the_master_sees_it(
    shared_target: SharedTarget, tmp_path: Path
) -> None:
    target = shared_target.reset()
    port, web = free_port(), free_port()
    url = f"http://127.0.0.1:{web}"
    out = tmp_path / "run"
    ramp = [*STREAM, "--ramplab-shape", "4,8@4s/1s", "--ramplab-slo", "ttft_ms<=5000"]
    master = Process([*LOCUST, "--host", target.url, "--master", "--master-bind-host", "127.0.0.1",
                      "--master-bind-port", str(port), "--expect-workers", "1",
                      "--web-host", "127.0.0.1", "--web-port", str(web), "--autostart",
                      "--autoquit", "3", "--results-dir", str(out), *ramp],
                     tmp_path / "master.log")  # fmt: skip
    worker = Process([*LOCUST, "--worker", "--master-host", "127.0.0.1", "--master-port",
                      str(port), *ramp], tmp_path / "worker.log")  # fmt: skip
    procs = {"master": master, "worker": worker}
    seen: list[list[dict[str, Any]]] = []
    page = ""
    try:
        master.start()
        worker.start()
        deadline = time.monotonic() + 60
        while master.running() and time.monotonic() < deadline:
            rows = tab_rows(url)  # until the master quits, 3 s after the run's stop
            if rows:
                seen.append(rows)
                page = page or httpx.get(url + "/", timeout=5).text
            time.sleep(0.25)
        master.wait(60)
    finally:
        stop_all(procs.values(), grace_s=5)
    assert seen, log_tail(procs)
    assert '"extended_tabs": [{"key": "ramplab", "title": "ramplab"}]' in page  # declared
    # While the second step ran: its target, its rate so far, its latency and verdict so far.
    running = [rows[1] for rows in seen if rows[1]["state"] == "running" and rows[1]["ttft_p50"]]
    assert running, seen[-1]
    row = running[-1]
    assert row["target"] == "8 QPS"
    assert 3 < row["achieved"] < 16  # a Poisson count over a few seconds, around 8
    # Streams of ~0.1 s at 4 and 8 QPS: some report caught one in flight.
    assert any(r["in_flight"] > 0 for rows in seen for r in rows)
    assert row["dropped"] == 0
    for key in ("ttft", "itl", "tpot"):
        assert 0 < row[f"{key}_p50"] <= row[f"{key}_p99"], row
    assert row["slo_met"] == "100.0%"  # 5 s for the first token of 8 tokens 10 ms apart
    assert row["generator"] == "ok" or row["generator"].startswith("starved: worker")
    # After the run, the tab agrees with the summary on what the master counted.
    last = seen[-1]
    assert [r["state"] for r in last] == ["done", "done"]
    summary = json.loads((out / "summary.json").read_text())
    assert [r["step"] for r in last] == [s["index"] for s in summary["steps"]] == [0, 1]
    for shown, step in zip(last, summary["steps"], strict=True):
        assert shown["dropped"] == step["dropped"]
        assert shown["achieved"] == pytest.approx(step["dispatched"] / step["measured_s"], 0.01)
        # The live sketches hold the step's warm-up too, the summary only its measured window:
        # the same order, not the same number.
        assert shown["ttft_p50"] == pytest.approx(step["ttft_ms"]["p50"], rel=0.5)
