"""The schemathesis fuzz of the target (``tests/target/test_fuzz.py``) at full size.

The suite sends ~50 cases per operation and generation mode to keep its time; this runs the
same test with 200 (hypothesis stops early where an operation has few possible inputs), which
gives ≥ 1,000 cases, and records what came back.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
CASES_PER_MODE = 200


def run() -> str:
    started = time.monotonic()
    done = subprocess.run(
        [
            *(sys.executable, "-m", "pytest", "tests/target/test_fuzz.py"),
            *("-n", "0", "-q", "-s", "-p", "no:cacheprovider"),
        ],
        cwd=REPO,
        env={**os.environ, "RAMPLAB_FUZZ_CASES": str(CASES_PER_MODE)},
        capture_output=True,
        text=True,
        check=False,
    )
    elapsed = time.monotonic() - started
    found = re.search(
        r"fuzz: (\d+) cases, statuses (\{.*?\}); no negative case: (\[.*?\])", done.stdout
    )
    if found is None:
        raise RuntimeError(f"the fuzz test printed no counts:\n{done.stdout[-3000:]}")
    verdict = "passed" if done.returncode == 0 else f"FAILED (exit {done.returncode})"
    return (
        "## Fuzzing the target's OpenAPI (schemathesis)\n\n"
        f"`tests/target/test_fuzz.py` with {CASES_PER_MODE} cases per operation and generation "
        "mode (positive and negative) against a real in-process target, from its own "
        "`GET /openapi.json`. Checks: no 5xx; every 4xx an OpenAI error body "
        '(`{"error": {"message", "type", ...}}`).\n\n'
        f"Cases sent: **{int(found.group(1)):,}**; statuses: `{found.group(2)}`; "
        f"operations with no negative case (nothing to break): {found.group(3)}. "
        f"Test {verdict} in {elapsed:.0f} s.\n"
    )
