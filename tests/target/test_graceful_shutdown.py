"""SIGTERM with streams in flight (issue 16): every stream ends with ``[DONE]`` or an error event.

Streams that can finish within the grace (``target_service/shutdown.py``) finish normally;
longer ones end with an ``event: error`` (``server_shutdown``) and ``data: [DONE]``; ramplab's
client counts the first as successes and the second as ``stream_error`` failures. Before the
fix sse-starlette cancelled every stream at once: the short ones were cut too, without a word.
Each kind runs twice, once read raw (to see the last bytes) and once by ramplab's client.
"""

from __future__ import annotations

import signal
import threading
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

import httpx
import pytest

from ramplab.measure.chain import Endpoint, RequestChain
from ramplab.measure.client import ClientOptions, make_client
from ramplab.measure.record import RequestRecord
from target_service.embedded_redis import EmbeddedRedis
from target_service.shutdown import STREAM_GRACE_S
from tests.support.processes import TargetProcess
from tests.target.conftest import FAST_MODEL
from tests.target.stress_helpers import chat_body, metric, parse_sse, wait_until

ITL_MS = 20
SHORT_TOKENS = 60  # 1.2 s: well inside the grace
LONG_TOKENS = 1000  # 20 s: far beyond it


@pytest.fixture
def target(redis_server: EmbeddedRedis, tmp_path: Path) -> TargetProcess:
    env = {**FAST_MODEL, "APP_REDIS_URL": redis_server.url, "APP_LATENCY__ITL_MS": str(ITL_MS)}
    return TargetProcess(env, log_path=tmp_path / "target.log").start()


def raw_stream(url: str, tokens: int, out: dict[str, str]) -> None:
    body = chat_body(stream=True, max_tokens=tokens)
    with (
        httpx.Client(timeout=30.0) as client,
        client.stream("POST", url + "/v1/chat/completions", json=body) as response,
    ):
        text = []
        try:
            for piece in response.iter_text():
                text.append(piece)
        except httpx.HTTPError as exc:  # a cut connection: keep what came
            text.append(f"\n<cut: {type(exc).__name__}>")
        out["text"] = "".join(text)


def ramplab_stream(url: str, tokens: int, out: dict[str, RequestRecord]) -> None:
    body = {**chat_body(stream=True, max_tokens=tokens), "stream_options": {"include_usage": True}}
    with make_client(ClientOptions()) as client:
        out["record"] = RequestChain(client, Endpoint(url + "/v1/chat/completions", 30.0)).run(body)


def test_sigterm_ends_every_stream_with_done_or_an_error(target: TargetProcess) -> None:
    results: dict[str, dict[str, Any]] = {}
    threads = []
    jobs: list[tuple[str, Callable[[str, int, dict[str, Any]], None], int]] = [
        ("raw-short", raw_stream, SHORT_TOKENS),
        ("raw-long", raw_stream, LONG_TOKENS),
        ("ramplab-short", ramplab_stream, SHORT_TOKENS),
        ("ramplab-long", ramplab_stream, LONG_TOKENS),
    ]

    def at_least(streams: int) -> bool:
        text = httpx.get(target.url + "/metrics").text
        return metric(text, "target_active_streams") >= streams

    try:
        # The long ones first, then the short ones, so that all are in flight at the signal.
        for count, (name, job, tokens) in enumerate(sorted(jobs, key=lambda j: -j[2]), 1):
            results[name] = {}
            thread = threading.Thread(target=job, args=(target.url, tokens, results[name]))
            thread.start()
            threads.append(thread)
            wait_until(partial(at_least, count), 20, f"{count} streams in flight")
        target.signal(signal.SIGTERM, group=False)
        assert target.wait(STREAM_GRACE_S + 10) == 128 + signal.SIGTERM
    finally:
        for thread in threads:
            thread.join(30)
        target.stop()

    for name in ("raw-short", "raw-long"):
        parsed = parse_sse(results[name]["text"])
        assert parsed.done, f"{name} ended without [DONE]: {results[name]['text'][-300:]!r}"
    short, long = parse_sse(results["raw-short"]["text"]), parse_sse(results["raw-long"]["text"])
    assert short.errors == []
    assert len(short.content.split()) >= 1
    assert [e["error"]["code"] for e in long.errors] == ["server_shutdown"]

    ok = results["ramplab-short"]["record"]
    assert ok.ok, ok.error_detail
    assert ok.output_tokens == SHORT_TOKENS
    cut = results["ramplab-long"]["record"]
    assert not cut.ok
    assert cut.error_kind == "stream_error"
    assert "server_shutdown" in (cut.error_detail or "")
    assert target.log_path is not None
    assert "Traceback" not in target.log_path.read_text()
