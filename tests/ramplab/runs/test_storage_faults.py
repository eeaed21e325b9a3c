"""Storage faults: a results disk that fills up (before, during and after a run), a corrupt line
in an old run's ``requests.jsonl``, a master killed mid-run — each a real ``ramplab`` process on
loopback.

A full disk is a tmpfs mounted under the test's directory, sized so the records fill it (or filled
up beforehand); mounting needs root, so without it those tests are skipped.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson
import pyarrow as pa
import pytest
from pyarrow import ipc

from ramplab.errors import StorageError
from ramplab.measure.record import RequestRecord
from ramplab.records.files import RecordFiles
from ramplab.records.journal import HEADER
from ramplab.records.schema import batch_of
from ramplab.results.writer import reserve_of
from ramplab.runs.rundir import RunDir
from tests.support.cli import RAMPLAB, ramplab
from tests.support.processes import REPO, Process, poll_until
from tests.support.records import run_records
from tests.support.tiny_server import Reply, TinyServer, chunk, usage

pytestmark = pytest.mark.slow

DONE = b"data: [DONE]\n\n"
MODELS = b'{"object": "list", "data": [{"id": "m", "object": "model"}]}'

CAMPAIGN = """\
name: disk
shape: {kind: stepped, rates: [RATES], hold: HOLDs, warmup: 1s}
seed: 3
max_users: 40
drain_s: 5
workload: {model: m, max_tokens: 8, ignore_eos: true, chunk_size: 4, prompt_tokens: 16}
stack: {workers: 1}
"""


class Target:
    """Answers ``/v1/models`` and two-token streams; keeps the time of every chat request."""

    def __init__(self) -> None:
        self.posts: list[float] = []
        self._lock = threading.Lock()

    def __call__(self, method: str, path: str, headers: dict[str, str], body: bytes) -> Reply:
        if method == "GET":
            return Reply(headers={"content-type": "application/json"}, body=[MODELS],
                         chunked=False)  # fmt: skip
        with self._lock:
            self.posts.append(time.time())
        return Reply(
            headers={"content-type": "text/event-stream"},
            body=[chunk("a"), ("sleep", 0.02), chunk("b"), usage(2), DONE],
        )


def campaign(tmp_path: Path, rates: str, hold_s: int) -> Path:
    path = tmp_path / "disk.yaml"
    path.write_text(CAMPAIGN.replace("RATES", rates).replace("HOLD", str(hold_s)))
    return path


@contextlib.contextmanager
def tmpfs(where: Path, size: str) -> Iterator[Path]:
    """A tmpfs of ``size`` mounted at ``where`` (skips the test when it cannot be mounted)."""
    if os.geteuid() != 0:
        pytest.skip("mounting a tmpfs needs root")
    where.mkdir(parents=True, exist_ok=True)
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(where)],
                             capture_output=True, text=True, check=False)  # fmt: skip
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs: {mounted.stderr.strip()}")
    try:
        yield where
    finally:
        subprocess.run(["umount", "-l", str(where)], check=False)


def fill(disk: Path) -> None:
    """Write zeros into ``disk`` until it is full."""
    with (disk / "filler").open("wb", buffering=0) as out, contextlib.suppress(OSError):
        while True:
            out.write(b"\0" * 4096)


def the_run(results: Path) -> Path:
    (run_dir,) = [p for p in results.iterdir() if p.is_dir()]
    return run_dir


def records(run_dir: Path) -> list[dict[str, Any]]:
    return run_records(run_dir)


def whole_messages(journal: Path) -> int:
    """The batches of a journal that ends exactly after its last message (fails on torn bytes)."""
    data = journal.read_bytes()
    stream = pa.BufferReader(data[len(HEADER) :])
    reader = ipc.MessageReader.open_stream(stream)
    batches = 0
    while True:
        try:
            reader.read_next_message()
        except StopIteration:
            break
        batches += 1
    assert len(HEADER) + stream.tell() == len(data), "torn bytes after the last whole message"
    return batches


def assert_failed_on_storage(done: subprocess.CompletedProcess[str], path: Path) -> None:
    assert done.returncode == 4, done.stdout[-3000:] + done.stderr[-3000:]
    assert f"results disk full: {path} (No space left on device)" in done.stderr, done.stderr
    assert "Traceback" not in done.stdout + done.stderr


def test_a_disk_the_records_fill_stops_the_load_and_exits_4(tmp_path: Path) -> None:
    target = Target()
    # Room for the writer's 256 KiB ballast, the run's first files and a few seconds of the
    # journal (~300 bytes a record), far less than the 12 s the campaign asks for.
    with TinyServer(target) as server, tmpfs(tmp_path / "disk", "400k") as disk:
        done = ramplab(["run", str(campaign(tmp_path, "40", 12)), "--target", server.url,
                        "--results-dir", str(disk)])  # fmt: skip
        run_dir = the_run(disk)
        files = RecordFiles.in_dir(run_dir)
        assert_failed_on_storage(done, files.journal)
        # What was written is kept, whole messages only: the failed write's part is cut. The
        # Parquet file may or may not have fit in the room left; the journal stays if not.
        if files.journal.exists():
            assert whole_messages(files.journal) > 0
        kept = records(run_dir)
        summary = json.loads((run_dir / "summary.json").read_text())
        assert not (run_dir / "requests.arrows.reserve").exists()
    assert len(kept) > 100, len(kept)
    assert summary["stopped_at_s"] is not None
    assert summary["stopped_at_s"] < 12
    assert any("results disk full" in reason for reason in summary["incomplete"])
    # The load stopped within a second of the failure (the run's cut): the server's last request.
    failed_at = summary["run_start"] + summary["stopped_at_s"]
    assert max(target.posts) < failed_at + 1.5, max(target.posts) - failed_at
    assert len(target.posts) < 40 * 13 * 0.8  # far fewer than the schedule's ~520


def test_a_failed_write_cuts_the_journal_to_its_whole_messages(tmp_path: Path) -> None:
    records = [RequestRecord(f"r{i}", "w", 1.0, 1.0, True, 200, None, itl_ms=[1.0] * 8)
               for i in range(40)]  # fmt: skip
    message = batch_of(records).serialize().to_pybytes()
    with tmpfs(tmp_path / "disk", "128k") as disk:
        writer = RunDir(disk / "run").open_writer(reserve_bytes=16 * 1024)
        failures: list[StorageError] = []
        writer.on_failure = failures.append
        batches = 0
        while writer.failure is None:
            writer.write_batch(message, len(records))
            batches += 1
        writer.write_batch(message, len(records))  # refused: the writer failed already
        writer.close()
        journal = RunDir(disk / "run").records.journal
        assert batches > 1
        assert whole_messages(journal) == batches - 1  # the failed one's part is cut
        assert RunDir(disk / "run").records.count() == writer.written == (batches - 1) * 40
        assert writer.refused == 2 * 40
        assert [str(f) for f in failures] == [str(writer.failure)]  # told once
        assert not reserve_of(journal).exists()  # freed at the first failure


def test_a_disk_full_at_the_start_exits_4_and_leaves_no_empty_campaign(tmp_path: Path) -> None:
    with TinyServer(Target()) as server, tmpfs(tmp_path / "disk", "64k") as disk:
        fill(disk)
        done = ramplab(["run", str(campaign(tmp_path, "4", 2)), "--target", server.url,
                        "--results-dir", str(disk)])  # fmt: skip
        run_dir = the_run(disk)
        assert_failed_on_storage(done, run_dir / "campaign.yaml")
        left = sorted(p.name for p in run_dir.iterdir())
    assert "campaign.yaml" not in left, left
    assert "campaign.yaml.tmp" not in left, left


@pytest.fixture(scope="module")
def finished_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One real run that ended normally (its directory is copied by each test)."""
    tmp = tmp_path_factory.mktemp("finished")
    with TinyServer(Target()) as server:
        done = ramplab(["run", str(campaign(tmp, "8", 3)), "--target", server.url,
                        "--results-dir", str(tmp), "--run-name", "done"])  # fmt: skip
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    return tmp / "done"


def test_report_on_a_full_disk_exits_4_and_keeps_the_records(
    tmp_path: Path, finished_run: Path
) -> None:
    with tmpfs(tmp_path / "disk", "1m") as disk:
        run_dir = disk / "run"
        # What a rebuild reads (the report's page alone would not fit).
        shutil.copytree(finished_run, run_dir, ignore=shutil.ignore_patterns("report.*", "logs"))
        (run_dir / "summary.json").unlink()  # the report must rebuild (and write) it
        before = (run_dir / "requests.parquet").read_bytes()
        fill(disk)
        done = ramplab(["report", str(run_dir)])
        assert_failed_on_storage(done, run_dir / "summary.json")
        assert (run_dir / "requests.parquet").read_bytes() == before
        assert not (run_dir / "summary.json").exists()
        assert not list(run_dir.glob("*.tmp"))


def test_report_skips_and_counts_a_corrupt_line_in_an_old_runs_jsonl(
    tmp_path: Path, finished_run: Path
) -> None:
    run_dir = tmp_path / "run"
    shutil.copytree(finished_run, run_dir)
    original = json.loads((run_dir / "summary.json").read_text())
    (run_dir / "summary.json").unlink()
    # The run as a version before 0.9 left it: its records as JSON Lines, no Parquet file.
    lines = [orjson.dumps(row).decode() + "\n" for row in records(run_dir)]
    (run_dir / "requests.parquet").unlink()
    lines.insert(len(lines) // 2, '{"request_id": "x", "worker": \n')
    (run_dir / "requests.jsonl").write_text("".join(lines))
    done = ramplab(["report", str(run_dir)])
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert "Traceback" not in done.stdout + done.stderr
    rebuilt = json.loads((run_dir / "summary.json").read_text())
    assert rebuilt["corrupt_records"] == 1
    assert "1 corrupt lines in requests.jsonl were skipped" in rebuilt["incomplete"]
    assert rebuilt["requests"] == original["requests"]
    # The master ended its run (final progress snapshot): no cut, whole windows.
    assert rebuilt["stopped_at_s"] is None
    assert rebuilt["measured_s"] == pytest.approx(original["measured_s"])


def test_a_killed_masters_run_is_cut_at_its_last_record(tmp_path: Path) -> None:
    # Three 6 s steps; the master is killed ~1.5 s into the second one's measured window.
    with TinyServer(Target()) as server:
        cli = Process(
            [*RAMPLAB, "run", str(campaign(tmp_path, "5, 5, 5", 6)),
             "--target", server.url, "--results-dir", str(tmp_path), "--run-name", "killed"],
            tmp_path / "cli.out", stderr_path=tmp_path / "cli.err", cwd=REPO,
        ).start()  # fmt: skip
        run_dir = tmp_path / "killed"
        try:
            poll_until(lambda: any(r.get("step") == 1 for r in _written(run_dir)), 60,
                       "records of step 1")  # fmt: skip
            # Into step 1's measured window (after its 1 s warm-up), with the records the
            # worker forwards about once a second reaching the master before the kill.
            time.sleep(2.5)
            master = json.loads((run_dir / "run.json").read_text())["processes"]["master"]
            os.kill(master, signal.SIGKILL)
            code = cli.wait(120)
        finally:
            cli.stop()
    err = (tmp_path / "cli.err").read_text() + (tmp_path / "cli.out").read_text()
    assert code == 4, err[-3000:]
    assert "Traceback" not in err
    summary = json.loads((run_dir / "summary.json").read_text())
    kept = records(run_dir)
    last_end = max(r["intended_start"] + r["total_ms"] / 1000 for r in kept)
    cut = last_end - summary["run_start"]
    assert summary["rebuilt"] is True
    assert summary["stopped_at_s"] == pytest.approx(cut)
    assert 7.0 < cut < 12.0
    assert any("without writing its summary" in r for r in summary["incomplete"])
    # Step 2 never ran: left out; step 1's window ends at the last record, not at 12 s.
    assert [s["index"] for s in summary["steps"]] == [0, 1]
    step = summary["steps"][1]
    assert step["measured_s"] == pytest.approx(cut - 6.0 - 1.0, abs=0.01)
    assert step["achieved_qps"] == pytest.approx(step["requests"] / step["measured_s"], rel=0.01)


def _written(run_dir: Path) -> list[dict[str, Any]]:
    return records(run_dir)  # the journal while it runs: a torn last batch is not read
