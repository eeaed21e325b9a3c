"""Traces end to end: a real Locust run with ``--otlp-endpoint`` and a target with tracing on,
both exporting to one real OTLP/HTTP receiver (``tests/support/otlp.py``).

Per request: one trace holding the generator's CLIENT span and, as its child, the target's
SERVER span — the W3C ``traceparent`` the generator sent is what links them.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.otlp import OtlpReceiver, ReceivedSpan
from tests.support.processes import TargetProcess, poll_until
from tests.support.ramp_runs import TARGET_ENV, run_ramp

pytestmark = pytest.mark.slow


def test_each_request_is_one_trace_with_a_client_span_and_its_server_child(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OTEL_BSP_SCHEDULE_DELAY", "200")  # batches every 0.2 s, not every 5 s
    with OtlpReceiver() as receiver:
        env = {**TARGET_ENV, "APP_TRACING__OTLP_ENDPOINT": receiver.endpoint}
        with TargetProcess(env, log_path=tmp_path / "target.log") as target:
            args = ["--ramplab-shape", "3@3s", "--otlp-endpoint", receiver.endpoint]
            run = run_ramp(tmp_path, target.url, args)
            assert run.returncode == 0, run.tail()
            records = run.records
            assert records
            assert all(r["ok"] for r in records)

            def clients() -> list[ReceivedSpan]:
                return [s for s in receiver.spans() if s.kind == "CLIENT"]

            def servers() -> list[ReceivedSpan]:
                return [s for s in receiver.spans() if s.name == "POST /v1/chat/completions"]

            def complete() -> bool:
                return len(clients()) >= len(records) and len(servers()) >= len(records)

            poll_until(complete, 20, "every request's two spans reached the receiver")

    client_spans, server_spans = clients(), servers()
    assert len(client_spans) == len(records)  # one per request: no retries in this run
    assert len(server_spans) == len(records)
    assert len({s.trace_id for s in client_spans}) == len(records)  # a trace per request
    children = {(s.trace_id, s.parent_span_id): s for s in server_spans}
    for client in client_spans:
        assert client.service == "ramplab"
        assert client.parent_span_id == ""  # the request is the trace's root
        assert client.attributes["http.response.status_code"] == 200
        assert client.attributes["url.full"] == f"{target.url}/v1/chat/completions"
        server = children[(client.trace_id, client.span_id)]  # same trace, our span its parent
        assert server.service == "ramplab-target"
        assert server.kind == "SERVER"


def test_without_an_endpoint_opentelemetry_is_never_imported() -> None:
    code = (
        "import sys\n"
        "from ramplab.plugin.context import UserContext\n"
        "from ramplab.options.settings import UserSettings\n"
        "context = UserContext.create(UserSettings(), 'http://127.0.0.1:9', 'w')\n"
        "assert context.tracer is None\n"
        "loaded = sorted(m for m in sys.modules if m.startswith('opentelemetry'))\n"
        "assert not loaded, loaded\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=60, check=False)  # fmt: skip
    assert done.returncode == 0, done.stderr
