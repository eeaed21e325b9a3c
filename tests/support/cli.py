"""Running the ``ramplab`` CLI as a real process, and checking that nothing it started survives."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from tests.support.processes import REPO

RAMPLAB = [sys.executable, "-m", "ramplab.stack.cli"]

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
    return subprocess.run(
        [*RAMPLAB, *args], cwd=cwd, capture_output=True, text=True, timeout=timeout,
        check=False, env={**os.environ, **(env or {})},
    )  # fmt: skip


def gone(pid: int) -> bool:
    """True when neither the process nor anything in its process group is left."""
    try:
        os.killpg(pid, 0)
    except ProcessLookupError:
        return True
    return False


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


def records(path: Path) -> list[dict[str, Any]]:
    text = path.read_text()
    assert text == "" or text.endswith("\n"), "a torn last line"
    return [json.loads(line) for line in text.splitlines()]


def table_section(output: str, start: str, end: str) -> str:
    """The lines of ``output`` from the one containing ``start`` up to (excluding) ``end``."""
    lines = output.splitlines()
    first = next(i for i, line in enumerate(lines) if start in line)
    last = next(i for i in range(first, len(lines)) if end in lines[i])
    return "\n".join(lines[first:last])
