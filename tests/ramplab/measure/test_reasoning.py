"""Reasoning tokens against the real target: time to first output vs first answer, exact counts.

Model: prefill 20 ms flat, 12 reasoning tokens 15 ms apart, answer tokens 10 ms apart, no jitter,
no slowdown, one request at a time, so the first answer token is due exactly R × 15 = 180 ms after
the first thought (``target_service/reasoning.py``). Tolerance: both events are paced against
absolute deadlines by asyncio sleeps that overshoot by up to ~1-2 ms on this shared 2-core machine
and never undershoot; the *difference* of two such stamps is asserted on the median of the
requests within ±6 ms (three times the overshoot each side could add), the phases' ITL medians
within 1.5 ms (as ``test_accuracy.py``). Counts are exact.
"""

from __future__ import annotations

import json
import statistics
from collections.abc import Iterator

import openai
import pytest

from ramplab.measure.chain import Endpoint, RequestChain
from ramplab.measure.client import ClientOptions, make_client
from ramplab.measure.integrity import Verifier
from ramplab.measure.reasoning import phase_itls
from ramplab.measure.record import RequestRecord
from tests.support.processes import TargetProcess
from tests.support.tiny_server import DONE, ROLE, Action, Reply, TinyServer

REASONING = 12
REASONING_ITL_MS = 15.0
ITL_MS = 10.0
MAX_TOKENS = 32
ENV = {
    "APP_LATENCY__PREFILL_OVERHEAD_MS": "20",
    "APP_LATENCY__PREFILL_PER_TOKEN_MS": "0",
    "APP_LATENCY__ITL_MS": str(ITL_MS),
    "APP_LATENCY__ITL_JITTER_MS": "0",
    "APP_LATENCY__SLOWDOWN_PER_SEQ": "0",
    "APP_REASONING__TOKENS_MEAN": str(REASONING),
    "APP_REASONING__ITL_MS": str(REASONING_ITL_MS),
}


@pytest.fixture(scope="module")
def target() -> Iterator[TargetProcess]:
    with TargetProcess(ENV) as proc:
        yield proc


def measure(target: TargetProcess, chunk_size: int, n: int = 6) -> list[RequestRecord]:
    body = {
        "model": "ramplab-sim-1",
        "messages": [{"role": "user", "content": "think first"}],
        "max_tokens": MAX_TOKENS,
        "ignore_eos": True,
        "stream": True,
        "stream_options": {"include_usage": True},
        "chunk_size": chunk_size,
    }
    with make_client(ClientOptions()) as client:
        chain = RequestChain(
            client,
            Endpoint(target.url + "/v1/chat/completions"),
            verifier=Verifier(None, text=True),  # the answer's text is still the seed's
        )
        records = [chain.run(body) for _ in range(n)]
    assert all(r.ok for r in records), [r.error_detail for r in records if not r.ok]
    return records


@pytest.mark.timing  # asserts on measured time: run alone, after the rest
def test_first_answer_follows_first_output_by_the_reasoning_time(target: TargetProcess) -> None:
    records = measure(target, chunk_size=1)
    for r in records:
        assert r.integrity == "verified"
        assert r.reasoning_tokens == REASONING
        assert r.output_tokens == MAX_TOKENS  # completion_tokens counts the thoughts too
        assert r.reasoning_events == REASONING
        thoughts, answer = phase_itls(r)
        assert len(thoughts) == REASONING - 1
        assert len(answer) == MAX_TOKENS - REASONING - 1
        assert r.answer_ttft_ms is not None
        assert r.ttft_ms is not None
        assert r.answer_ttft_ms > r.ttft_ms
    gap = statistics.median((r.answer_ttft_ms or 0) - (r.ttft_ms or 0) for r in records)
    assert gap == pytest.approx(REASONING * REASONING_ITL_MS, abs=6.0)
    thought_itl = statistics.median(v for r in records for v in phase_itls(r)[0])
    answer_itl = statistics.median(v for r in records for v in phase_itls(r)[1])
    assert thought_itl == pytest.approx(REASONING_ITL_MS, abs=1.5)
    assert answer_itl == pytest.approx(ITL_MS, abs=1.5)


def test_events_never_mix_thoughts_and_answer(target: TargetProcess) -> None:
    records = measure(target, chunk_size=5, n=2)
    for r in records:
        # 12 thoughts in events of 5, 5, 2; 20 answer tokens in 4 events of 5.
        assert r.tokens_per_event == [5, 5, 2, 5, 5, 5, 5]
        assert r.reasoning_events == 3
        assert r.reasoning_tokens == REASONING


def test_sdk_sees_reasoning_and_usage_details(target: TargetProcess) -> None:
    client = openai.OpenAI(base_url=target.url + "/v1", api_key="unused")
    reply = client.chat.completions.create(
        model="ramplab-sim-1",
        messages=[{"role": "user", "content": "think"}],
        max_tokens=16,
        extra_body={"ignore_eos": True},
    )
    assert reply.usage is not None
    assert reply.usage.completion_tokens == 16
    details = reply.usage.completion_tokens_details
    assert details is not None
    assert details.reasoning_tokens == REASONING
    message = reply.choices[0].message.model_dump()
    assert len(message["reasoning_content"].split()) == REASONING
    assert len((message["content"] or "").split()) == 16 - REASONING


def vllm_event(field: str, text: str) -> bytes:
    # Newer vLLM: ``reasoning`` (not ``reasoning_content``), and ``content: null`` beside it.
    delta = {field: text, "content": None} if field != "content" else {"content": text}
    data = {"choices": [{"index": 0, "delta": delta, "finish_reason": None}]}
    return b"data: " + json.dumps(data).encode() + b"\n\n"


def vllm_handler(method: str, path: str, headers: dict[str, str], body: bytes) -> Reply:
    usage = {"prompt_tokens": 40, "completion_tokens": 5, "total_tokens": 45,
             "prompt_tokens_details": {"cached_tokens": 32}}  # fmt: skip
    final = b'data: {"choices": [], "usage": ' + json.dumps(usage).encode() + b"}\n\n"
    pause: Action = ("sleep", 0.03)
    events: list[Action] = [ROLE, vllm_event("reasoning", " hm"), pause,
                            vllm_event("reasoning", " so"), pause, vllm_event("content", " yes"),
                            vllm_event("content", " it"), vllm_event("content", " is"), final,
                            DONE]  # fmt: skip
    return Reply(headers={"content-type": "text/event-stream"}, body=events)


def test_another_servers_reasoning_field_and_cache_report() -> None:
    with TinyServer(vllm_handler) as server, make_client(ClientOptions()) as client:
        chain = RequestChain(client, Endpoint(server.url + "/v1/chat/completions"))
        record = chain.run({"model": "m", "messages": [], "stream": True})
    assert record.ok, record.error_detail
    assert record.reasoning_events == 2
    assert record.reasoning_tokens == 2  # no usage detail: the reasoning events' tokens
    assert record.output_tokens == 5
    assert record.cached_tokens == 32
    assert record.answer_ttft_ms is not None
    assert record.ttft_ms is not None
    assert record.answer_ttft_ms - record.ttft_ms >= 55.0  # two 30 ms sleeps, never less
