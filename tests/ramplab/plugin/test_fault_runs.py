"""The fault suite at the level of a run: a real ramp against one misbehaving server per case
(``tests/support/hostile.py``), checking what the user gets — every record's kind, the exit code,
and the conservation law. The per-request details (timing, messages) are in
``tests/ramplab/measure/test_faults.py``.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.hostile import hostile_server
from tests.support.ramp_runs import check_law, run_ramp

pytestmark = pytest.mark.slow

# A short ramp; the request timeout is what ends a silent server's requests, within the drain.
ARGS = ["--model", "m", "--ramplab-shape", "2@2s", "--request-timeout", "1.5",
        "--ramplab-drain", "5"]  # fmt: skip
FAILED_RUN = 3  # every request failed: the error ceiling's exit code (docs/cli.md)

CASES = [
    ("/silent", "timeout"),
    ("/slow-headers", "timeout"),
    ("/html", "unexpected_content_type"),
    ("/gzip", "unsupported_encoding"),
    ("/redirect", "http_status"),
    ("/bad-chunk", "protocol_error"),
    ("/invalid-utf8", "invalid_utf8"),
    ("/empty", "empty_response"),
    ("/http10", None),
    ("/crlf", None),
    ("/usage-only", None),
]


@pytest.mark.parametrize(("path", "kind"), CASES, ids=[path for path, _ in CASES])
def test_a_run_against_a_misbehaving_server(tmp_path: Path, path: str, kind: str | None) -> None:
    with hostile_server() as server:
        run = run_ramp(tmp_path, server.url, [*ARGS, "--api-path", path])
        posts = sum(1 for ex in server.requests if ex.path == path)
    summary = check_law(run)
    records = run.records
    assert records
    assert len(records) == posts  # one record per request the server saw, no more, no less
    assert {r["error_kind"] for r in records} == {kind}, [r["error_detail"] for r in records]
    if kind is None:
        assert run.returncode == 0, run.tail()
        assert summary["completed"] == len(records)
    else:
        assert run.returncode == FAILED_RUN, run.tail()
        assert summary["failed"] == len(records)
        assert summary["error_kinds"] == {kind: len(records)}
