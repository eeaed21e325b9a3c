"""Running the ``ramplab`` CLI as a real process, and checking that nothing it started survives."""

from __future__ import annotations

import json
import subprocess
import tempfile
import time
import traceback
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from tests.support.processes import REPO, Process, group_gone, python
from tests.support.records import run_records

RAMPLAB = python("-m", "ramplab.cli.app")

# A campaign of the smoke campaign's kind, shorter: one constant-rate stage.
TINY = """\
name: tiny
shape: {kind: stepped, rates: [4], hold: 5s, warmup: 1s}
seed: 3
max_users: 20
drain_s: 10
workload: {max_tokens: 8, ignore_eos: true, chunk_size: 4, prompt_tokens: 16}
stack: {workers: 1}
target: {settings: {latency: {itl_ms: 5, prefill_overhead_ms: 5}}}
"""


def ramplab(
    args: Sequence[str],
    cwd: Path = REPO,
    timeout: float = 240,
    env: Mapping[str, str] | None = None,
) -> subprocess.CompletedProcess[str]:
    """Run the CLI to its end; after ``timeout`` its whole process group is stopped.

    A CLI that ends by itself is left alone: whether it left anything running is for the
    test to check (``wait_gone``), not for the harness to tidy away.
    """
    with tempfile.TemporaryDirectory(prefix="ramplab-cli-") as tmp:
        out, err = Path(tmp) / "stdout", Path(tmp) / "stderr"
        process = Process([*RAMPLAB, *args], out, env=env, cwd=cwd, stderr_path=err).start()
        try:
            code = process.wait(timeout)
        except BaseException:
            process.stop()
            raise
        return subprocess.CompletedProcess(
            process.args, code, out.read_text(errors="replace"), err.read_text(errors="replace")
        )


def ramplab_in_process(args: Sequence[str]) -> subprocess.CompletedProcess[str]:
    """The CLI called in this process (typer's runner): for commands that end before anything
    starts — refused input, ``validate`` — where a new interpreter per case cost seconds each.
    An exception that escapes the CLI lands in ``stderr`` as a traceback, as it would in a
    terminal, so "no traceback" stays checkable. ``ramplab`` above runs the real process."""
    from typer.testing import CliRunner

    from ramplab.cli.app import app

    result = CliRunner().invoke(app, list(args))
    stderr = result.stderr
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        stderr += "Traceback (most recent call last):\n" + "".join(
            traceback.format_exception(result.exception)
        )
    return subprocess.CompletedProcess(list(args), result.exit_code, result.stdout, stderr)


def gone(pid: int) -> bool:
    """True when neither the process nor anything in its process group is left."""
    return group_gone(pid)


def wait_gone(pids: Sequence[int], timeout_s: float = 10.0) -> list[int]:
    """The pids still alive (or with a live process group) after ``timeout_s``."""
    deadline = time.monotonic() + timeout_s
    alive = list(pids)
    while alive and time.monotonic() < deadline:
        alive = [p for p in alive if not gone(p)]
        time.sleep(0.1)
    return alive


def run_meta(run_dir: Path) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((run_dir / "run.json").read_text())
    return data


def records(run_dir: Path) -> list[dict[str, Any]]:
    """The run directory's records (``tests.support.records``)."""
    return run_records(run_dir)


def table_section(output: str, start: str, end: str) -> str:
    """The lines of ``output`` from the one containing ``start`` up to (excluding) ``end``."""
    lines = output.splitlines()
    first = next(i for i, line in enumerate(lines) if start in line)
    last = next(i for i in range(first, len(lines)) if end in lines[i])
    return "\n".join(lines[first:last])
