"""What ``run.json`` records as the command: the whole command line, whichever entry point ran it
(``make demo`` ran ``python -m ramplab.cli.demo`` and recorded just ``ramplab``)."""

from __future__ import annotations

import shlex
import subprocess
from pathlib import Path

import pytest

from tests.support.cli import TINY, run_meta
from tests.support.processes import REPO, python


@pytest.mark.slow
def test_make_demos_run_records_the_whole_command_line(tmp_path: Path) -> None:
    campaign = tmp_path / "tiny.yaml"
    campaign.write_text(TINY)
    results = tmp_path / "results"
    options = ["--results-dir", str(results), "--run-name", "demo"]
    done = subprocess.run(
        [*python("-m", "ramplab.cli.demo"), str(campaign), *options],
        cwd=REPO, capture_output=True, text=True, timeout=240, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    command = run_meta(results / "demo")["command"]
    assert command == shlex.join(["ramplab", "run", str(campaign), *options])
