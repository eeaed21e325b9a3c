"""A bad option stops a real Locust process with exit code 2 and names the option.

Whether the parser refuses the value (its kind) or the plugin does (options checked together),
the user sees one thing: exit 2, the flag, no traceback.
"""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from tests.support.processes import REPO

LOCUST = [sys.executable, "-m", "locust", "--headless", "-t", "2s", "--host", "http://127.0.0.1:9"]
STREAM = ["-f", "locustfiles/llm_stream.py"]
RAMP = ["-f", "locustfiles/llm_ramp.py", "--ramplab-shape", "1@1s"]


@pytest.mark.parametrize(
    ("args", "env", "flag"),
    [
        ([*STREAM, "--max-tokens", "0"], {}, "--max-tokens"),  # the parser
        (STREAM, {"RAMPLAB_EXTRA_BODY": "[1]"}, "--extra-body"),  # the parser, from the env
        ([*STREAM, "--auth", "api-key"], {}, "--api-key"),  # the plugin
        ([*RAMP, "--ramplab-retry", '{"policy": 1}'], {}, "--ramplab-retry"),
        ([*RAMP, "--ramplab-outage", "5s+3s"], {}, "--ramplab-admin-token"),
        ([*STREAM, "--session-turns", "3"], {}, "--session-turns"),  # sessions need the ramp
        (
            ["-f", "locustfiles/llm_ramp.py", "--ramplab-trace", "no/such.jsonl"],
            {},
            "--ramplab-trace",
        ),
    ],
)
def test_a_bad_option_exits_2_naming_it(args: list[str], env: dict[str, str], flag: str) -> None:
    clean = {k: v for k, v in os.environ.items() if not k.startswith("RAMPLAB_")}
    done = subprocess.run(
        [*LOCUST, *args], cwd=REPO, env={**clean, **env},
        capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert done.returncode == 2, done.stderr[-2000:]
    assert flag in done.stderr
    assert "Traceback" not in done.stderr
