"""One ``RamplabPlugin`` per Locust environment: its own writer and context, its own listeners in
the written order, the summary once per run (``ramplab/plugin/plugin.py``'s docstring).

The probe runs in a subprocess (``plugin_probe.py``): importing Locust monkey-patches with gevent.
"""

from __future__ import annotations

import json
import socket
import subprocess
import sys
from typing import Any

import pytest

from tests.support.processes import REPO


@pytest.fixture(scope="module")
def probe(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    out = tmp_path_factory.mktemp("probe")
    done = subprocess.run(
        [sys.executable, "-m", "tests.ramplab.plugin.plugin_probe", str(out)],
        cwd=REPO, capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    data: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return data


def test_each_environment_has_its_own_plugin_writer_and_context(probe: dict[str, Any]) -> None:
    assert probe["distinct_plugins"]
    assert probe["registered_once"]
    assert probe["distinct_writers"]
    assert probe["distinct_contexts"]
    assert probe["context_is_the_plugins"]
    assert probe["records"] == {"a": 2, "b": 1}  # each context feeds its own writer only


def test_listeners_are_per_environment_one_per_event(probe: dict[str, Any]) -> None:
    for event, listeners in probe["listeners"].items():
        expected = [] if event == "test_start" else [f"RamplabPlugin._on_{event}"]
        assert listeners == {"a": expected, "b": expected}, event


def test_only_options_and_init_listen_globally(probe: dict[str, Any]) -> None:
    # Importing the user registers nothing else on Locust's global events.
    assert probe["global_listeners"] == {
        "init_command_line_parser": ["ramplab.plugin.plugin._add_options"],
        "init": ["ramplab.plugin.plugin._on_init"],
        "test_start": [],
        "test_stop": [],
        "quitting": [],
        "quit": [],
        "request": [],
    }


def test_headless_summary_is_written_once_at_quitting(probe: dict[str, Any]) -> None:
    assert probe["a_summary_after_test_stop"] is False
    assert probe["a_summary_requests"] == 2
    assert probe["b_summary_after_a_quit"] is False  # a's end is not b's


def test_web_ui_stop_writes_the_summary_and_quitting_adds_only_news(
    probe: dict[str, Any],
) -> None:
    assert probe["b_summary_after_stop"] == 1
    assert probe["b_rewritten_with_nothing_new"] is False
    assert probe["c_summary_requests"] == 2


def _locust(locustfile: str, *args: str) -> subprocess.CompletedProcess[str]:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        closed = f"http://127.0.0.1:{sock.getsockname()[1]}"  # nothing listens: fails at once
    return subprocess.run(
        [sys.executable, "-m", "locust", "-f", f"locustfiles/{locustfile}", "--host", closed,
         "--headless", "--model", "m", "--exit-code-on-error", "0", *args],
        cwd=REPO, capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip


def test_a_ramp_locustfile_needs_a_shape_a_plain_one_has_no_ramp_options() -> None:
    ramp = _locust("llm_ramp.py")
    assert ramp.returncode == 2
    assert "ramplab: --ramplab-shape: a ramp run needs a shape" in ramp.stderr
    assert "Traceback" not in ramp.stderr
    plain = _locust("llm_stream.py", "-u", "1", "-t", "1s")
    assert plain.returncode == 0, plain.stderr[-2000:]
    assert "ramplab-shape" not in plain.stderr
    unknown = _locust("llm_stream.py", "-u", "1", "-t", "1s", "--ramplab-shape", "1@1s")
    assert unknown.returncode != 0
    assert "--ramplab-shape" in unknown.stderr  # not an option of a plain streaming run
