"""``make demo``'s command path on a fresh clone of the committed branch, shortened campaign.

The clone has no ``.venv``: the test runs the demo module with this checkout's interpreter and
``PYTHONPATH`` pointing at the clone (installing a venv per test run would take minutes). That
the Makefile's ``demo`` recipe is exactly this module is checked with ``make -n``.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.cli import records, run_meta, wait_gone
from tests.support.processes import REPO

pytestmark = pytest.mark.slow

SHORT = "shape: {kind: stepped, rates: [1, 2, 5, 10, 20, 50, 100], hold: 20s, warmup: 5s}"


@pytest.fixture(scope="module")
def clone(tmp_path_factory: pytest.TempPathFactory) -> Path:
    if shutil.which("git") is None:
        pytest.skip("git is not installed")
    head = subprocess.run(
        ["git", "rev-parse", "HEAD"], cwd=REPO, capture_output=True, text=True, check=True
    ).stdout.strip()
    target = tmp_path_factory.mktemp("fresh") / "ramplab"
    subprocess.run(["git", "clone", "--quiet", "--no-checkout", str(REPO), str(target)],
                   check=True, timeout=120)  # fmt: skip
    subprocess.run(["git", "checkout", "--quiet", head], cwd=target, check=True, timeout=60)
    return target


def test_make_demo_runs_the_demo_module(clone: Path) -> None:
    if shutil.which("make") is None:
        pytest.skip("make is not installed")
    # -n prints the recipe without running it (nor the venv install it depends on).
    done = subprocess.run(["make", "-n", "demo"], cwd=clone, capture_output=True, text=True,
                          timeout=60, check=True)  # fmt: skip
    assert ".venv/bin/python -m ramplab.cli.demo" in done.stdout


def test_demo_command_on_a_fresh_clone(clone: Path) -> None:
    demo = (clone / "campaigns" / "demo.yaml").read_text()
    assert SHORT in demo, "the demo campaign changed; update the shortened copy"
    short = clone / "campaigns" / "demo-short.yaml"
    # The demo's own campaign, every rate kept, each step held 3 s (1 s warm-up).
    shorter = SHORT.replace("hold: 20s", "hold: 3s").replace("warmup: 5s", "warmup: 1s")
    short.write_text(demo.replace(SHORT, shorter).replace("name: demo", "name: demo-short"))
    env = {**os.environ, "PYTHONPATH": str(clone)}
    where = subprocess.run(
        [sys.executable, "-c", "import ramplab; print(ramplab.__file__)"],
        cwd=clone, env=env, capture_output=True, text=True, check=True,
    )  # fmt: skip
    assert where.stdout.strip().startswith(str(clone)), where.stdout
    done = subprocess.run(
        [sys.executable, "-m", "ramplab.cli.demo", "campaigns/demo-short.yaml"],
        cwd=clone, env=env, capture_output=True, text=True, timeout=240, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-4000:]
    (run_dir,) = [p for p in (clone / "results").iterdir() if p.is_dir()]
    assert run_dir.name.startswith("demo-short-")
    assert "per-step summary" in done.stdout
    summary = json.loads((run_dir / "summary.json").read_text())
    assert [s["target_qps"] for s in summary["steps"]] == [1, 2, 5, 10, 20, 50, 100]
    lines = records(run_dir)
    assert lines
    assert all(r["ok"] for r in lines)
    meta = run_meta(run_dir)
    assert meta["exit_code"] == 0
    assert not wait_gone(list(meta["processes"].values()))
    # The Locust processes ran the clone's locustfile (package data: ramplab/data links to
    # locustfiles/), not this checkout's.
    assert meta["locustfile"] == str(clone / "ramplab" / "data" / "locustfiles" / "llm_ramp.py")
    assert Path(meta["locustfile"]).resolve() == clone / "locustfiles" / "llm_ramp.py"
