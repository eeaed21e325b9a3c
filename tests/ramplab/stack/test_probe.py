"""The preflight of a ``--target`` (``ramplab.stack.probe``): each mistake a user makes with a
server fails in seconds with the reason, against real servers on loopback.

The stub serves ``/v1/models`` (one model) and a completions endpoint that answers 404 with an
OpenAI-style error for any other model, as vLLM and the OpenAI API do. The bounds on the time to
fail are loose on purpose (the old behaviour waited the 60 s health timeout): the figures
themselves are measured in the issue's note, not asserted.
"""

from __future__ import annotations

import json
import re
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from ramplab.stack.process import free_port
from tests.support.cli import TINY, ramplab, ramplab_in_process
from tests.support.processes import REPO
from tests.support.tiny_server import DONE, ROLE, Handler, Reply, TinyServer, chunk, usage

MODEL = "tiny-model"
JSON = {"content-type": "application/json"}
# Far below the old wait (stack.health_timeout_s, 60 s): only a fail-fast path passes.
FAST_S = 30.0


def _error(status: int, message: str) -> Reply:
    body = {"error": {"message": message, "type": "invalid_request_error", "code": status}}
    return Reply(status, JSON, [json.dumps(body).encode()])


def openai_stub(models: bool = True) -> Handler:
    def handle(method: str, path: str, headers: dict[str, str], body: bytes) -> Reply:
        if path == "/v1/models" and models:
            return Reply(200, JSON, [json.dumps({"data": [{"id": MODEL}]}).encode()])
        if path == "/v1/chat/completions" and method == "POST":
            asked = json.loads(body).get("model")
            if asked != MODEL:
                return _error(404, f"The model '{asked}' does not exist.")
            return Reply(200, {}, [ROLE, chunk("hi"), usage(1), DONE])
        return _error(404, f"no route {path}")

    return handle


@pytest.fixture
def stub() -> Iterator[TinyServer]:
    with TinyServer(openai_stub()) as server:
        yield server


def _campaign(tmp_path: Path, model: str | None, extra: str = "") -> Path:
    path = tmp_path / "tiny.yaml"
    text = TINY.replace("prompt_tokens: 16}", f"prompt_tokens: 16, model: {model}}}")
    text = text.replace("hold: 5s, warmup: 1s}", "hold: 2s}")
    path.write_text(text + extra)
    return path


def _run(
    tmp_path: Path, campaign: Path, target: str, *more: str
) -> tuple[float, subprocess.CompletedProcess[str]]:
    started = time.monotonic()
    done = ramplab(
        ["run", str(campaign), "--target", target, "--results-dir", str(tmp_path / "runs"), *more],
        timeout=120,
    )
    return time.monotonic() - started, done


def test_a_model_the_server_does_not_serve_exits_2_naming_it(
    tmp_path: Path, stub: TinyServer
) -> None:
    took, done = _run(tmp_path, _campaign(tmp_path, "nosuch-model"), stub.url)
    assert done.returncode == 2, done.stdout + done.stderr
    assert "workload.model: 'nosuch-model' is not served" in done.stderr
    assert "'tiny-model'" in done.stderr
    assert "Traceback" not in done.stderr
    assert not (tmp_path / "runs").exists()  # refused before a run directory
    assert took < FAST_S


def test_a_server_without_v1_models_still_gets_the_request_check(tmp_path: Path) -> None:
    with TinyServer(openai_stub(models=False)) as server:
        done = ramplab_in_process(
            [
                "validate",
                str(_campaign(tmp_path, "nosuch-model")),
                "--probe",
                "--target",
                server.url,
            ]
        )
    assert done.returncode == 2, done.stdout + done.stderr
    assert "model check skipped" in done.stdout
    assert "preflight.request: POST" in done.stderr
    assert "404: The model 'nosuch-model' does not exist." in done.stderr
    assert "Traceback" not in done.stderr


def test_validate_probe_passes_a_good_target_given_with_v1(
    tmp_path: Path, stub: TinyServer
) -> None:
    done = ramplab_in_process(
        ["validate", str(_campaign(tmp_path, MODEL)), "--probe", "--target", stub.url + "/v1"]
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert f"ends in /v1: using {stub.url}" in done.stdout
    assert f"ok — {stub.url} serves tiny-model" in done.stdout


def test_validate_probe_needs_a_target(tmp_path: Path) -> None:
    done = ramplab_in_process(["validate", str(_campaign(tmp_path, MODEL)), "--probe"])
    assert done.returncode == 2
    assert "--probe: needs --target" in done.stderr


@pytest.mark.slow
def test_a_v1_base_url_runs_against_the_server(tmp_path: Path, stub: TinyServer) -> None:
    _, done = _run(tmp_path, _campaign(tmp_path, MODEL), stub.url + "/v1")
    out = done.stdout + done.stderr
    assert done.returncode == 0, out
    assert f"ends in /v1: using {stub.url}" in out
    assert "preflight: model listed, one request ok" in out
    (run_dir,) = (tmp_path / "runs").iterdir()
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["requests"] > 0
    assert summary["error_kinds"] == {}  # not /v1/v1/chat/completions → 404


def test_a_closed_port_fails_in_seconds_with_exit_4(tmp_path: Path) -> None:
    port = free_port()  # bound, then released: nobody listens
    took, done = _run(tmp_path, _campaign(tmp_path, MODEL), f"http://127.0.0.1:{port}")
    assert done.returncode == 4, done.stdout + done.stderr
    assert f"connection refused on 127.0.0.1:{port} (tried for 2 s)" in done.stderr
    assert "Traceback" not in done.stderr
    assert took < FAST_S


def test_an_unresolvable_host_fails_at_once_with_exit_4(tmp_path: Path) -> None:
    took, done = _run(tmp_path, _campaign(tmp_path, MODEL), "http://llm.invalid:8000")
    assert done.returncode == 4, done.stdout + done.stderr
    assert "cannot resolve llm.invalid" in done.stderr
    assert "Traceback" not in done.stderr
    assert took < FAST_S


@pytest.mark.slow
def test_a_run_whose_every_request_failed_exits_3_with_the_servers_words(
    tmp_path: Path, stub: TinyServer
) -> None:
    campaign = _campaign(tmp_path, "nosuch-model")
    _, done = _run(tmp_path, campaign, stub.url, "--no-preflight")
    out = done.stdout + done.stderr
    assert done.returncode == 3, out
    assert "every request failed (" in out
    assert "http_status×" in out
    assert "(404×" in out
    assert ": The model 'nosuch-model' does not exist." in out
    assert "Traceback" not in out
    # Both tables (the live one, printed once in a pipe, and the summary's) group by kind.
    rows = [line for line in done.stdout.splitlines() if "│ http_status×11 (404×11)" in line]
    assert len(rows) == 2, done.stdout
    assert not re.search(r"│ \d{3}×", done.stdout)


def broken_models(method: str, path: str, headers: dict[str, str], body: bytes) -> Reply:
    if path == "/v1/models":
        return _error(500, "model registry unavailable")
    return openai_stub()(method, path, headers, body)


@pytest.mark.slow
def test_a_workers_fatal_error_reaches_the_terminal(tmp_path: Path) -> None:
    # No model in the campaign and no preflight: each worker asks GET /v1/models for one as its
    # first user starts, gets a 500 and stops with exit 2 — its message used to stay in its log.
    campaign = tmp_path / "nomodel.yaml"
    campaign.write_text(_campaign(tmp_path, MODEL).read_text().replace(", model: tiny-model", ""))
    with TinyServer(broken_models) as server:
        _, done = _run(tmp_path, campaign, server.url, "--no-preflight")
    out = done.stdout + done.stderr
    assert done.returncode == 4, out
    assert "workers died during the run: worker-1" in out
    assert (
        f"worker-1: --model: not given and GET {server.url}/v1/models → 500: model registry "
        "unavailable" in out
    )
    assert "Traceback" not in out


def test_without_a_model_the_request_asks_for_the_first_listed(
    tmp_path: Path, stub: TinyServer
) -> None:
    # As the workers do (--model not given: the first of GET /v1/models).
    campaign = tmp_path / "nomodel.yaml"
    campaign.write_text(_campaign(tmp_path, MODEL).read_text().replace(", model: tiny-model", ""))
    done = ramplab_in_process(["validate", str(campaign), "--probe", "--target", stub.url])
    assert done.returncode == 0, done.stdout + done.stderr


def test_a_server_error_on_the_preflight_request_exits_4_with_its_words(tmp_path: Path) -> None:
    def overloaded(method: str, path: str, headers: dict[str, str], body: bytes) -> Reply:
        if path == "/v1/chat/completions":
            return _error(503, "engine overloaded, try later")
        return openai_stub()(method, path, headers, body)

    with TinyServer(overloaded) as server:
        done = ramplab_in_process(
            ["validate", str(_campaign(tmp_path, MODEL)), "--probe", "--target", server.url]
        )
    assert done.returncode == 4, done.stdout + done.stderr
    assert "/v1/chat/completions → 503: engine overloaded, try later" in done.stderr
    assert "Traceback" not in done.stderr


def test_search_against_a_server_gets_the_preflight_too(tmp_path: Path, stub: TinyServer) -> None:
    campaign = tmp_path / "search.yaml"
    text = (REPO / "campaigns" / "search.yaml").read_text()
    campaign.write_text(text.replace("  max_tokens: 20\n", "  max_tokens: 20\n  model: nosuch\n"))
    done = ramplab_in_process(
        ["search", str(campaign), "--target", stub.url + "/v1", "--results-dir", str(tmp_path)]
    )
    assert done.returncode == 2, done.stdout + done.stderr
    assert "ends in /v1" in done.stdout
    assert "workload.model: 'nosuch' is not served" in done.stderr
    assert list(tmp_path.iterdir()) == [campaign]  # refused before the first probe
