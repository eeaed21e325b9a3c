"""Bad input to the CLI: exit code 2, the offending field named, never a traceback."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.cli import TINY, ramplab, ramplab_in_process


def campaign_file(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "campaign.yaml"
    path.write_text(text)
    return path


@pytest.mark.parametrize(
    ("text", "field"),
    [
        ("steps:\n  - {qps: 1, hold: 2s}\n  - {qps: 2, hold: 2s}\n  - {qps: -3, hold: 2s}\n",
         "steps[2].qps"),
        ("shape: {kind: stepped, rates: [1, 2], hold: 2s}\nworkload: {max_tokens: -1}\n",
         "workload.max_tokens"),
        ("shape: '1,2@2s'\nretry: {policy: exponential, jitter: wild}\n", "retry.jitter"),
        ("shape: '1,2@2s'\ngates: ['ttft_ms.p99 <<< 3']\n", "gates[0]"),
        ("shape: {kind: zigzag}\n", "shape.kind"),
        ("shape: '1,2@2s'\nworkers: 3\n", "workers"),
        ("shape: [1, 2\n", "not valid YAML"),
        # Checked before anything starts: what the fields point to, not only their form.
        ("shape: '1@2s'\nworkload: {prompts_file: nope.jsonl}\n", "workload.prompts_file"),
        ("shape: '1@2s'\nworkload: {auth: {mode: jwt, client_secret: s}}\n",
         "workload.auth.client_id"),
        ("shape: '1@2s'\ngates: ['ttft_ms.p9999 < 800']\n", "gates[0]"),
        ("shape: '1@2s'\ngates: ['requests > 1', 'steps[1].achieved_qps > 1']\n", "gates[1]"),
    ],
)  # fmt: skip
@pytest.mark.parametrize("command", ["validate", "run"])
def test_bad_campaign_exits_2_naming_the_field(
    tmp_path: Path, command: str, text: str, field: str
) -> None:
    extra = ["--results-dir", str(tmp_path)] if command == "run" else []
    # In process: every case is refused before anything starts (the real process's exit code
    # and stderr are the next tests').
    done = ramplab_in_process([command, str(campaign_file(tmp_path, text)), *extra])
    assert done.returncode == 2, done.stdout + done.stderr
    assert field in done.stderr
    assert "Traceback" not in done.stderr + done.stdout
    assert not any(p.is_dir() for p in tmp_path.iterdir()), "a rejected run created a run dir"


def test_missing_campaign_file_and_bad_gate_exit_2(tmp_path: Path) -> None:
    done = ramplab(["run", str(tmp_path / "nope.yaml")])
    assert done.returncode == 2
    assert "nope.yaml" in done.stderr
    assert "Traceback" not in done.stderr
    good = campaign_file(tmp_path, TINY)
    done = ramplab(["run", str(good), "--gate", "ttft_ms.p99 800", "--results-dir", str(tmp_path)])
    assert done.returncode == 2
    assert "--gate[0]" in done.stderr
    assert "Traceback" not in done.stderr


def test_bad_cli_option_exits_2(tmp_path: Path) -> None:
    done = ramplab(["run", str(campaign_file(tmp_path, TINY)), "--workers", "0"])
    assert done.returncode == 2
    assert "--workers" in done.stderr
    assert "Traceback" not in done.stderr


def test_validate_prints_the_stages(tmp_path: Path) -> None:
    done = ramplab(["validate", str(campaign_file(tmp_path, TINY))])
    assert done.returncode == 0, done.stderr
    assert "step 0: 4 QPS for 5 s (warm-up 1 s)" in done.stdout


def test_validate_of_a_closed_loop_prints_users_not_arrivals(tmp_path: Path) -> None:
    text = "mode: closed\nsteps:\n  - {qps: 2, hold: 4s}\n  - {qps: 5, hold: 4s, warmup: 1s}\n"
    done = ramplab(["validate", str(campaign_file(tmp_path, text))])
    assert done.returncode == 0, done.stderr
    assert "arrivals" not in done.stdout
    assert "QPS" not in done.stdout
    assert "up to 5 users" in done.stdout
    assert "step 1: 5 users for 4 s (warm-up 1 s)" in done.stdout


def test_validate_asks_the_target_about_its_settings(tmp_path: Path) -> None:
    text = TINY.replace("itl_ms: 5", "itl_ms: -7")
    assert text != TINY
    done = ramplab(["validate", str(campaign_file(tmp_path, text))])
    assert done.returncode == 2, done.stdout + done.stderr
    assert "target.settings" in done.stderr
    assert "latency.itl_ms" in done.stderr  # the target's own message
    assert "Traceback" not in done.stderr + done.stdout


def test_run_refuses_a_gate_on_no_metric_before_starting(tmp_path: Path) -> None:
    good = campaign_file(tmp_path, TINY)
    done = ramplab(["run", str(good), "--gate", "ttft.p99 < 800", "--results-dir", str(tmp_path)])
    assert done.returncode == 2, done.stdout + done.stderr
    assert "--gate[0]" in done.stderr
    assert "no metric 'ttft'" in done.stderr
    assert not any(p.is_dir() for p in tmp_path.iterdir()), "a rejected run created a run dir"


def test_report_of_a_directory_without_results_exits_2(tmp_path: Path) -> None:
    done = ramplab(["report", str(tmp_path)])
    assert done.returncode == 2
    assert "RUN_DIR" in done.stderr
    assert "Traceback" not in done.stderr


@pytest.mark.slow
def test_target_setting_refused_exits_2_naming_the_key(tmp_path: Path) -> None:
    text = TINY.replace("itl_ms: 5", "itl_ms: -7")
    done = ramplab(["run", str(campaign_file(tmp_path, text)), "--results-dir", str(tmp_path)])
    assert done.returncode == 2, done.stdout + done.stderr
    assert "target exited with code 2" in done.stderr
    assert "itl_ms" in done.stderr  # the target's own message, from its log tail
    assert "Traceback" not in done.stderr


def test_the_cli_process_imports_neither_locust_nor_the_target() -> None:
    # gevent's monkey-patching (Locust) would break the CLI's subprocess and signal handling,
    # and ramplab never imports target_service.
    code = (
        "import sys, ramplab.cli.app, ramplab.cli.demo;"
        "bad = [m for m in ('locust', 'gevent', 'target_service') if m in sys.modules];"
        "print(bad); sys.exit(1 if bad else 0)"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stdout + done.stderr


def test_results_dir_below_a_file_exits_2_naming_it(tmp_path: Path) -> None:
    a_file = tmp_path / "file"
    a_file.write_text("")
    good = campaign_file(tmp_path, TINY)
    done = ramplab(["run", str(good), "--results-dir", str(a_file / "x")])
    assert done.returncode == 2, done.stdout + done.stderr
    assert "--results-dir" in done.stderr
    assert "Traceback" not in done.stderr + done.stdout


@pytest.mark.parametrize("name", ["../escape", "a/b", ".hidden", ""])
def test_run_name_that_is_not_one_plain_name_exits_2(tmp_path: Path, name: str) -> None:
    results = tmp_path / "results"
    results.mkdir()
    good = campaign_file(tmp_path, TINY)
    done = ramplab(["run", str(good), "--results-dir", str(results), "--run-name", name])
    assert done.returncode == 2, done.stdout + done.stderr
    assert "--run-name" in done.stderr
    assert "Traceback" not in done.stderr + done.stdout
    assert sorted(p.name for p in tmp_path.iterdir()) == ["campaign.yaml", "results"]
    assert not any(results.iterdir()), "a refused run name created a run dir"
