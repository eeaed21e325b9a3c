"""``ramplab run`` without a file: bad flags exit 2 naming the flag, ``--print-campaign`` writes
a campaign file that describes the same run. In process: all of it ends before anything starts."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from ramplab.campaign.schema import load_campaign
from tests.support.cli import ramplab_in_process

OPEN = ["--rates", "1,2.5,10", "--step", "20s", "--model", "m", "--max-tokens", "64",
        "--prompt-tokens", "256", "--arrivals", "constant"]  # fmt: skip


def test_print_campaign_round_trips_to_the_same_campaign(tmp_path: Path) -> None:
    done = ramplab_in_process(["run", *OPEN, "--print-campaign", "-"])
    assert done.returncode == 0, done.stderr
    path = tmp_path / "printed.yaml"
    path.write_text(done.stdout)  # stdout is the YAML and nothing else
    campaign = load_campaign(path)
    assert [s.rate for s in campaign.load_shape.stages] == [1, 2.5, 10]
    assert {s.duration_s for s in campaign.load_shape.stages} == {20}
    assert {s.warmup_s for s in campaign.load_shape.stages} == {4}  # a fifth of the step
    assert campaign.mode == "open"
    assert campaign.arrivals == "constant"
    assert (campaign.workload.model, campaign.workload.max_tokens) == ("m", 64)
    assert campaign.workload.prompt_tokens == 256
    # The file, written by --print-campaign FILE, is the same text; `validate` accepts it.
    again = tmp_path / "again.yaml"
    assert ramplab_in_process(["run", *OPEN, "--print-campaign", str(again)]).returncode == 0
    assert again.read_text() == done.stdout
    checked = ramplab_in_process(["validate", str(again)])
    assert checked.returncode == 0, checked.stderr
    assert "3 stages, 60 s" in checked.stdout


def test_concurrency_is_a_closed_loop_of_users(tmp_path: Path) -> None:
    done = ramplab_in_process(["run", "--concurrency", "1,4,16", "--step", "10s", "--warmup",
                               "1s", "--print-campaign", "-"])  # fmt: skip
    assert done.returncode == 0, done.stderr
    data = yaml.safe_load(done.stdout)
    assert data["mode"] == "closed"
    assert data["shape"] == {"kind": "stepped", "rates": [1, 4, 16], "hold": "10s",
                             "warmup": "1s"}  # fmt: skip


def test_a_target_note_leaves_the_printed_yaml_alone() -> None:
    done = ramplab_in_process(["run", "--rates", "1", "--target", "http://127.0.0.1:9/v1",
                               "--print-campaign", "-"])  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "ends in /v1" in done.stderr
    assert yaml.safe_load(done.stdout)["name"] == "ramp"
    assert "--target http://127.0.0.1:9\n" in done.stdout  # the URL the run uses


def test_the_api_key_is_never_written(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MY_LLM_KEY", "sk-very-secret")
    done = ramplab_in_process(["run", "--rates", "1", "--api-key-env", "MY_LLM_KEY",
                               "--print-campaign", "-"])  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "sk-very-secret" not in done.stdout + done.stderr
    assert yaml.safe_load(done.stdout)["workload"]["auth"] == {"mode": "api-key"}
    assert "RAMPLAB_API_KEY=$MY_LLM_KEY" in done.stdout  # how to run the file again


@pytest.mark.parametrize(
    ("args", "flag"),
    [
        (["--rates", "1,x"], "--rates"),
        (["--rates", "1,-2"], "--rates"),
        (["--concurrency", "1,2.5"], "--concurrency"),
        (["--rates", "1", "--concurrency", "2"], "--rates"),
        (["--rates", "1", "--step", "5q"], "--step"),
        (["--rates", "1", "--step", "5s", "--warmup", "5s"], "--warmup"),
        (["--rates", "1", "--max-tokens", "0"], "--max-tokens"),
        (["--rates", "1", "--prompt-tokens", "0"], "--prompt-tokens"),
        (["--rates", "1", "--arrivals", "zipf"], "--arrivals"),
        (["--concurrency", "1", "--arrivals", "poisson"], "--arrivals"),
        (["--rates", "1", "--api-key-env", "RAMPLAB_TEST_UNSET_KEY"],
         "--api-key-env: environment variable RAMPLAB_TEST_UNSET_KEY is not set"),
        (["--rates", "1", "--api-key-env", "not a name"], "--api-key-env"),
        (["--rates", "1", "--target", "ftp://x"], "--target"),
        (["--step", "10s"], "CAMPAIGN"),
        (["campaigns/smoke.yaml", "--model", "m"], "--model"),
        (["campaigns/smoke.yaml", "--print-campaign", "-"], "--print-campaign"),
    ],
)  # fmt: skip
def test_bad_flags_exit_2_naming_the_flag(tmp_path: Path, args: list[str], flag: str) -> None:
    done = ramplab_in_process(["run", *args, "--results-dir", str(tmp_path)])
    assert done.returncode == 2, done.stdout + done.stderr
    assert f"ramplab: error: {flag}" in done.stderr
    assert "Traceback" not in done.stdout + done.stderr
    assert not list(tmp_path.iterdir()), "a refused run created a run dir"
