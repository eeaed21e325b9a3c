"""Issue 4, items 3 and 7: prompt sources reach the server as asked, and the user works against a
plain OpenAI-compatible server that knows none of the reference target's extensions.

The "plain" server is purpose-built and strict: it refuses (400) any body field the OpenAI API
does not define, lists one model under ``/v1/models`` and sends no ``usage`` — so the run must
discover the model, send no extension, and count output tokens with the tokenizer, flagged.
"""

from __future__ import annotations

import json
import random
import statistics
import subprocess
import sys
import threading
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path

import pytest

from ramplab.measure.chain import Endpoint, RequestChain
from ramplab.measure.client import ClientOptions, make_client
from ramplab.options.settings import UserSettings
from ramplab.options.workload import prompt_source, request_body
from ramplab.workload.prompts import SyntheticPrompts
from ramplab.workload.tokenizers import ApproxTokenizer
from tests.support.processes import REPO, TargetProcess
from tests.support.records import run_records
from tests.support.tiny_server import DONE, ROLE, Reply, TinyServer, chunk

OPENAI_FIELDS = {
    "model", "messages", "max_tokens", "max_completion_tokens", "stream", "stream_options",
    "temperature", "top_p", "n", "stop", "seed", "user", "presence_penalty", "frequency_penalty",
}  # fmt: skip


class PlainServer:
    """An OpenAI-compatible server with no extensions and no usage in its streams."""

    def __init__(self) -> None:
        self.bodies: list[dict[str, object]] = []
        self.refused: list[str] = []
        self.lock = threading.Lock()

    def __call__(self, method: str, path: str, headers: dict[str, str], body: bytes) -> Reply:
        json_type = {"content-type": "application/json"}
        if path == "/v1/models":
            listing = {"object": "list", "data": [{"id": "plain-1", "object": "model"}]}
            return Reply(200, json_type, [json.dumps(listing).encode()])
        data = json.loads(body)
        unknown = sorted(set(data) - OPENAI_FIELDS)
        with self.lock:
            self.bodies.append(data)
            if unknown:
                self.refused.append(",".join(unknown))
        if unknown:
            error = {"error": {"message": f"unknown fields {unknown}", "type": "invalid_request"}}
            return Reply(400, json_type, [json.dumps(error).encode()])
        if data.get("model") != "plain-1":
            return Reply(404, json_type, [b'{"error":{"message":"no such model"}}'])
        return Reply(body=[ROLE, chunk("Hello"), chunk(" wonderful"), chunk(" world"), DONE])


@pytest.fixture
def plain() -> Iterator[tuple[PlainServer, TinyServer]]:
    handler = PlainServer()
    with TinyServer(handler) as srv:
        yield handler, srv


@pytest.mark.slow
def test_locust_run_against_a_plain_openai_server(
    plain: tuple[PlainServer, TinyServer], tmp_path: Path
) -> None:
    handler, srv = plain
    out = tmp_path / "plain"
    done = subprocess.run(
        [sys.executable, "-m", "locust", "-f", "locustfiles/llm_stream.py", "--host", srv.url,
         "--headless", "-u", "2", "-r", "2", "-t", "3s", "--max-tokens", "16",
         "--results-dir", str(out), "--only-summary"],
        cwd=REPO, capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    assert handler.refused == []  # no extension field was sent
    assert handler.bodies
    assert all(body["model"] == "plain-1" for body in handler.bodies)  # found in /v1/models
    lines = run_records(out)
    ended = [r for r in lines if r["error_kind"] != "unfinished"]  # ``-t`` cuts the last ones
    assert ended
    for record in ended:
        assert record["ok"], record["error_detail"]
        # "Hello" (2 pieces of ≤ 4 chars), " wonderful" (3), " world" (2): no usage, so counted
        assert record["output_tokens"] == 7
        assert record["output_tokens_source"] == "tokenizer"
        assert record["tokens_per_event"] == [2, 3, 2]
        assert record["server_timing_ms"] == {}


def _logged_at(stderr: str, text: str) -> datetime:
    line = next(line for line in stderr.splitlines() if text in line)
    return datetime.strptime(line[1:24], "%Y-%m-%d %H:%M:%S,%f")


@pytest.mark.slow
def test_run_time_counts_from_the_start_not_from_the_imports(
    plain: tuple[PlainServer, TinyServer], tmp_path: Path
) -> None:
    # Regression: Locust arms -t with gevent.spawn_later, counted from the event loop's cached
    # "now" of before the imports; on a busy machine `-t 3s` ended 0.5-2.9 s after it started,
    # often before the first request. A lower bound only: load can make a run later, not earlier.
    handler, srv = plain
    done = subprocess.run(
        [sys.executable, "-m", "locust", "-f", "locustfiles/llm_stream.py", "--host", srv.url,
         "--headless", "-u", "1", "-r", "1", "-t", "2s", "--max-tokens", "16",
         "--results-dir", str(tmp_path / "timed"), "--only-summary"],
        cwd=REPO, capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    armed = _logged_at(done.stderr, "Run time limit set to 2 seconds")
    ended = _logged_at(done.stderr, "--run-time limit reached")
    assert (ended - armed).total_seconds() >= 1.95, done.stderr[-3000:]
    assert handler.bodies


def test_extensions_are_sent_only_when_asked(plain: tuple[PlainServer, TinyServer]) -> None:
    handler, srv = plain
    with make_client(ClientOptions()) as client:
        chain = RequestChain(client, Endpoint(srv.url + "/v1/chat/completions", 5.0))
        messages = [{"role": "user", "content": "hi"}]
        asked = chain.run(request_body(UserSettings(chunk_size=4), "plain-1", messages))
        plain_body = chain.run(request_body(UserSettings(), "plain-1", messages))
    assert asked.error_kind == "http_status"
    assert asked.status == 400
    assert handler.refused == ["chunk_size"]
    assert plain_body.ok, plain_body.error_detail


@pytest.fixture(scope="module")
def target() -> Iterator[TargetProcess]:
    env = {"APP_LATENCY__ITL_MS": "1", "APP_LATENCY__PREFILL_OVERHEAD_MS": "1"}
    with TargetProcess(env) as proc:
        yield proc


def _prompt_tokens(target: TargetProcess, settings: UserSettings, n: int) -> list[int]:
    prompts = prompt_source(settings, random.Random(settings.seed))
    counts = []
    with make_client(ClientOptions()) as client:
        chain = RequestChain(client, Endpoint(target.url + "/v1/chat/completions", 10.0))
        for _ in range(n):
            record = chain.run(request_body(settings, "ramplab-sim-1", prompts.next()))
            assert record.ok, record.error_detail
            assert record.prompt_tokens is not None
            counts.append(record.prompt_tokens)
    return counts


def test_synthetic_prompt_lengths_follow_the_distribution(target: TargetProcess) -> None:
    fixed = _prompt_tokens(target, UserSettings(prompt_tokens=37, max_tokens=2), 3)
    assert fixed == [37, 37, 37]  # the server counts exactly the tokens asked for
    spread = UserSettings(prompt_tokens=200, prompt_tokens_std=40.0, max_tokens=2, seed=5)
    counts = _prompt_tokens(target, spread, 60)
    # 60 draws of N(200, 40): the mean's standard error is ~5.2, the sample std-dev's ~3.7;
    # five standard errors either side cannot fail by chance.
    assert statistics.mean(counts) == pytest.approx(200, abs=26)
    assert statistics.stdev(counts) == pytest.approx(40, abs=18.5)
    replay = SyntheticPrompts(200, 40.0, random.Random(5))
    draws = [len(replay.next()[0]["content"].split()) for _ in range(60)]
    assert counts == draws  # and exactly the seeded draws, one per request


def test_prompts_file_is_sent_line_by_line(target: TargetProcess, tmp_path: Path) -> None:
    path = tmp_path / "prompts.jsonl"
    path.write_text(
        json.dumps({"prompt": "one two three"})
        + "\n"
        + json.dumps({"messages": [{"role": "user", "content": "alpha beta gamma delta epsilon"}]})
        + "\n"
    )
    settings = UserSettings(prompts_file=path, max_tokens=2, seed=0)
    counts = _prompt_tokens(target, settings, 4)
    counter = ApproxTokenizer()
    lengths = [counter.count("one two three"), counter.count("alpha beta gamma delta epsilon")]
    assert lengths == [4, 9]  # words over four characters are two pieces
    # The source starts at a seeded offset and then cycles through the two lines.
    assert sorted(counts[:2]) == lengths
    assert counts[2:] == counts[:2]


@pytest.mark.parametrize(
    ("max_tokens", "counted"), [(16, [2, 3, 2]), (4, [1, 2, 1]), (2, [2, 3, 2])]
)
def test_a_tokenizer_count_never_exceeds_the_requests_limit(
    plain: tuple[PlainServer, TinyServer], max_tokens: int, counted: list[int]
) -> None:
    """No usage: the approximation counts 7 tokens in three events. A server cannot have sent
    more than ``max_tokens``, so at 4 the counts are scaled to 4; at 2 — fewer than the events,
    each at least one token — the limit says nothing the count can follow, and it is kept."""
    _, srv = plain
    client = make_client(ClientOptions())
    try:
        chain = RequestChain(client, Endpoint(srv.url + "/v1/chat/completions", 10.0))
        body = {"model": "plain-1", "messages": [{"role": "user", "content": "hi"}],
                "max_tokens": max_tokens, "stream": True}  # fmt: skip
        record = chain.run(body)
    finally:
        client.close()
    assert record.ok, record.error_detail
    assert record.output_tokens_source == "tokenizer"
    assert record.tokens_per_event == counted
    assert record.output_tokens == sum(counted)
