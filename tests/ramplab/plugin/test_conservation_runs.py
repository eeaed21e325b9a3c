"""Every request sent has a record: the conservation law on real runs that end with requests in
flight — hung, slow, cut by the drain, by a down-step, by an interruption — open and closed loop,
one process and distributed.

The target is a tiny server on loopback whose every ``HANG_EVERY``-th request sends one token and
then hangs (longer than the run), so the drain always ends with requests in flight.
"""

from __future__ import annotations

import contextlib
import itertools
import re
import signal
import threading
import time
from pathlib import Path
from typing import Any

import psutil
import pytest
from rich.console import Console

from ramplab.report.run import print_steps, write_report
from ramplab.results.summary import RunSummary
from tests.support.processes import Process, poll_until
from tests.support.ramp_runs import RampRun, check_law, run_ramp, wait_for_records
from tests.support.tiny_server import CLIENT_PORT, Reply, TinyServer, chunk

pytestmark = pytest.mark.slow

HANG_EVERY = 3
# Three of a worker's progress reports (``REPORT_S`` in ramplab/plugin/worker.py, which imports
# Locust and so cannot be imported here before gevent patches).
THREE_REPORTS_S = 1.5
PLAN_LEAD_S = (
    2.0  # the plan starts this long after it is made (``LEAD_S``, ramplab/plugin/master.py)
)
DONE = b"data: [DONE]\n\n"
USAGE = b'data: {"choices": [], "usage": {"prompt_tokens": 5, "completion_tokens": 2}}\n\n'


class HangingTarget:
    """Answers two tokens; every ``HANG_EVERY``-th chat request (and every one after ``hang_all``
    is set) sends one token and hangs for ``hang_s``."""

    def __init__(self, hang_s: float = 60.0) -> None:
        self.hang_s = hang_s
        self.count = itertools.count(1)
        self.posts = 0
        self.hang_all = threading.Event()
        self.hung_since: dict[int, float] = {}  # client port -> when its first hang began
        self._lock = threading.Lock()

    def __call__(self, method: str, path: str, headers: dict[str, str], body: bytes) -> Reply:
        if method != "POST":  # the master's look for engine metrics: this server has none
            return Reply(status=404, body=[b"not found"], chunked=False)
        with self._lock:
            self.posts += 1
            n = next(self.count)
        if n % HANG_EVERY == 0 or self.hang_all.is_set():
            with self._lock:
                self.hung_since.setdefault(CLIENT_PORT.get(), time.monotonic())
            return Reply(body=[chunk("a"), ("sleep", self.hang_s)])
        return Reply(body=[chunk("a"), ("sleep", 0.05), chunk("b"), USAGE, DONE])

    def ports_hung_since(self, before: float) -> set[int]:
        """The client ports with a request that began hanging at ``before`` or earlier."""
        with self._lock:
            return {port for port, since in self.hung_since.items() if since <= before}


ARGS = ["--model", "m", "--ramplab-drain", "1"]


def _signal(processes: list[Process], signum: int) -> None:
    for process in processes:
        process.signal(signum)


def _law(run: RampRun, incomplete: tuple[str, ...] = ()) -> dict[str, Any]:
    """``check_law``, and every request cut in flight kept what it had received."""
    summary = check_law(run, incomplete)
    records = run.records
    unfinished = [r for r in records if r["error_kind"] == "unfinished"]
    cut_here = [r for r in unfinished if "lost with the worker" not in r["error_detail"]]
    for record in cut_here:  # (a dead worker's are recorded by the master: what they had died)
        assert not record["ok"]
        assert record["total_ms"] > 0
        assert "still in flight" in record["error_detail"]
        # What it had received is kept: the first token and its time (the target sends it at
        # once; a request cut while it was being sent has received nothing).
        assert (record["bytes_received"] > 0) == (record["ttft_ms"] is not None), record
    if cut_here:
        assert any(r["bytes_received"] > 0 for r in cut_here)
    return summary


@pytest.mark.parametrize("mode", ["open", "closed"])
def test_requests_in_flight_at_the_drains_end_get_unfinished_records(
    tmp_path: Path, mode: str
) -> None:
    handler = HangingTarget()
    with TinyServer(handler) as server:
        run = run_ramp(
            tmp_path,
            server.url,
            ["--ramplab-shape", "4@3s", "--ramplab-mode", mode, *ARGS],
        )
    assert run.returncode in (0, 3), run.tail()
    summary = _law(run)
    # One in three hung: about a third of the records, and every POST the server saw has one.
    assert summary["unfinished"] >= 1
    assert len(run.records) == handler.posts
    assert summary["dispatched"] == handler.posts


def test_distributed_run_records_the_requests_its_workers_had_in_flight(tmp_path: Path) -> None:
    handler = HangingTarget()
    with TinyServer(handler) as server:
        run = run_ramp(tmp_path, server.url, ["--ramplab-shape", "4@3s", *ARGS], workers=2)
    summary = _law(run)
    assert summary["unfinished"] >= 1
    assert len(run.records) == handler.posts


def test_a_sigkilled_workers_requests_in_flight_get_records_from_the_master(
    tmp_path: Path,
) -> None:
    """Two workers; once each has records and requests hanging, one is SIGKILLed. The master
    records what the dead worker had in flight at its last report; what it sent after that
    report is counted as ``lost`` with the arrivals it owned until the re-split, and the run
    says so."""
    handler = HangingTarget()
    killed_pid: list[int] = []

    def hanging_worker(procs: list[Process]) -> Process | None:
        """A worker with a request that has hung for three of its progress reports: its last
        report to the master lists that request in flight (a fixed sleep left that to chance:
        a worker may send nothing in a second, and a starved one reports late)."""
        hung = handler.ports_hung_since(time.monotonic() - THREE_REPORTS_S)
        for proc in procs:
            with contextlib.suppress(psutil.Error):
                ports = {c.laddr.port for c in psutil.Process(proc.pid).net_connections("tcp")}
                if ports & hung:
                    return proc
        return None

    def kill_one(procs: list[Process], out: Path) -> None:
        wait_for_records(out, lambda records: len({r["worker"] for r in records}) == 2)
        handler.hang_all.set()
        poll_until(lambda: hanging_worker(procs) is not None, 20, "a worker's request hung")
        victim = hanging_worker(procs)
        assert victim is not None
        victim.signal(signal.SIGKILL)
        victim.wait(10)
        killed_pid.append(victim.pid)

    with TinyServer(handler) as server:
        run = run_ramp(
            tmp_path,
            server.url,
            ["--ramplab-shape", "4@10s", *ARGS],
            workers=2,
            during=kill_one,
        )
    assert killed_pid
    summary = _law(run, incomplete=("never sent",))
    cut = [r for r in run.records if "stopped reporting" in (r["error_detail"] or "")]
    assert cut, "the dead worker had hung requests in flight"
    (killed,) = {r["worker"] for r in cut}
    for record in cut:
        assert record["error_kind"] == "unfinished"
        assert record["total_ms"] > 0
        assert record["arrival"] is not None
        assert record["step"] == 0
    # Every request the server saw is recorded, or among the arrivals lost with the worker.
    (step,) = summary["steps"]
    assert step["lost"] > 0
    assert len(run.records) <= handler.posts <= len(run.records) + step["lost"]
    assert any(r["worker"] == killed and r["ok"] for r in run.records)


def test_closed_loop_finishes_the_requests_of_a_down_step_and_of_the_end(tmp_path: Path) -> None:
    """8 users, then 2: the six users the down-step stops finish what they sent; at the end the
    two left finish theirs within the drain (no request hangs here: ``HANG_EVERY`` is off)."""

    class Slow(HangingTarget):
        def __call__(self, method: str, path: str, headers: dict[str, str], body: bytes) -> Reply:
            if method != "POST":
                return Reply(status=404, body=[b"not found"], chunked=False)
            with self._lock:
                self.posts += 1
            return Reply(body=[chunk("a"), ("sleep", 0.4), chunk("b"), USAGE, DONE])

    handler = Slow()
    with TinyServer(handler) as server:
        run = run_ramp(
            tmp_path,
            server.url,
            [
                "--ramplab-shape",
                "8,2@2s",
                "--ramplab-mode",
                "closed",
                *ARGS[:2],
                "--ramplab-drain",
                "5",
            ],
        )
    assert run.returncode == 0, run.tail()
    summary = _law(run)
    # Nothing was cut: every request finished, and the server saw exactly the recorded ones.
    assert summary["unfinished"] == 0
    assert all(r["ok"] for r in run.records), [r["error_detail"] for r in run.records]
    assert len(run.records) == handler.posts


@pytest.mark.parametrize("workers", [0, 2])
def test_interrupted_run_records_what_was_in_flight(tmp_path: Path, workers: int) -> None:
    """SIGINT in the middle of the run while every request hangs: each has its record, in one
    process and when the master of two workers is interrupted."""
    handler = HangingTarget()

    def interrupt(master: Process, out: Path) -> None:
        wait_for_records(out, lambda records: len(records) >= 3)
        handler.hang_all.set()
        time.sleep(1.0)  # a second of requests that all hang
        master.signal(signal.SIGINT)

    with TinyServer(handler) as server:
        run = run_ramp(
            tmp_path,
            server.url,
            ["--ramplab-shape", "4@30s", *ARGS],
            workers=workers,
            with_master=interrupt,
        )
    summary = _law(run, incomplete=("stopped at",))
    # Every POST the server saw has its record; a request cut while it was being sent may have
    # one the server never finished reading.
    assert len(run.records) >= handler.posts
    assert summary["unfinished"] >= 3  # a second of 4 QPS that all hung
    # Summarised over what ran: one step cut at the stop, its rate over the time it ran.
    (step,) = summary["steps"]
    assert summary["stopped_at_s"] is not None
    assert step["duration_s"] == pytest.approx(summary["stopped_at_s"], abs=0.01)
    assert step["scheduled"] < 4 * summary["stopped_at_s"] + 4 * 4
    # The terminal and report.md show every term of the law and why the run is incomplete.
    parsed = RunSummary.from_json(summary)
    console = Console(record=True, width=200)
    print_steps(parsed, console)
    screen = console.export_text()
    row = [step["scheduled"], step["dispatched"], step["dropped"], step["lost"],
           step["completed"], step["failed"], step["unfinished"], 0]  # fmt: skip
    assert re.search(r"│\s+0\s+│\s+" + r"\s+│\s+".join(map(str, row)) + r"\s+│", screen), screen
    assert "incomplete: the run was stopped at" in screen
    text = write_report(run.out, parsed).markdown.read_text()
    assert "## Every request accounted for" in text
    assert "- **incomplete: the run was stopped at" in text


def test_workers_frozen_at_the_stop_still_send_what_they_had_in_flight(tmp_path: Path) -> None:
    """The master is interrupted while both workers are frozen (SIGSTOP, as a starved machine
    would hold them) with requests hanging; they thaw two seconds later. Locust's master alone
    gives its workers half a second before it stops listening: the master asks each for its
    last report and waits for it (``final_reports.py``), so every request has its record."""
    handler = HangingTarget()
    workers: list[Process] = []

    def interrupt_frozen(master: Process, out: Path) -> None:
        wait_for_records(out, lambda records: len({r["worker"] for r in records}) == 2)
        handler.hang_all.set()
        time.sleep(1.0)
        _signal(workers, signal.SIGSTOP)
        master.signal(signal.SIGINT)
        time.sleep(2.0)
        _signal(workers, signal.SIGCONT)

    with TinyServer(handler) as server:
        run = run_ramp(
            tmp_path,
            server.url,
            ["--ramplab-shape", "4@30s", *ARGS],
            workers=2,
            during=lambda procs, out: workers.extend(procs),
            with_master=interrupt_frozen,
        )
    # (Not ``_law``: a request cut the moment its worker thaws has read nothing yet, though its
    # first token waits in the socket.)
    summary = check_law(run, incomplete=("stopped at",))
    assert summary["unfinished"] >= 2
    assert len(run.records) >= handler.posts
    assert "sent no last report" not in run.logs["master"]


def test_a_worker_starved_past_its_heartbeats_at_the_end_sends_its_own_records(
    tmp_path: Path,
) -> None:
    """The worker freezes 4.5 s before the end of a closed loop whose requests all hang, and
    thaws 2 s after it: Locust has marked it missing (three silent seconds), as it did a worker
    starved by a real engine on the same two cores in CI, where six records were lost. The
    master still asks it for its last report and waits, so every record is the worker's own,
    with what the request had received, not one the master made up from a stale report."""
    handler = HangingTarget()
    handler.hang_all.set()
    workers: list[Process] = []

    def starve_across_the_end(master: Process, out: Path) -> None:
        poll_until(lambda: "plan:" in master.log(), timeout_s=30, what="the plan")
        end = time.monotonic() + PLAN_LEAD_S + 6.0
        time.sleep(max(0.0, end - 4.5 - time.monotonic()))
        _signal(workers, signal.SIGSTOP)
        time.sleep(max(0.0, end + 2.0 - time.monotonic()))
        _signal(workers, signal.SIGCONT)

    with TinyServer(handler) as server:
        run = run_ramp(
            tmp_path,
            server.url,
            ["--ramplab-shape", "6@6s", "--ramplab-mode", "closed", "--model", "m",
             "--ramplab-drain", "0"],
            workers=1,
            during=lambda procs, out: workers.extend(procs),
            with_master=starve_across_the_end,
        )  # fmt: skip
    assert "setting state to missing" in run.logs["master"], run.tail()  # the premise
    summary = _law(run)
    assert summary["unfinished"] == len(run.records) == handler.posts == 6
    details = [r["error_detail"] for r in run.records]
    assert all("when the run stopped it" in detail for detail in details), (details, run.tail())
    assert all(r["bytes_received"] > 0 for r in run.records)
