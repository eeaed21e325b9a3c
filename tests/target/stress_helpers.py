"""Shared helpers of the issue-3 tests: target environments, SSE parsing, metric lookup, polling."""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, TypeVar

import orjson
from prometheus_client.parser import text_string_to_metric_families

from target_service.embedded_redis import EmbeddedRedis

T = TypeVar("T")
MODEL = "ramplab-sim-1"
ADMIN_TOKEN = "test-admin-" + uuid.uuid4().hex


def target_env(redis: EmbeddedRedis, **settings: object) -> dict[str, str]:
    """``APP_*`` variables for a target on ``redis`` in its own key namespace."""
    env = {
        "APP_REDIS_URL": redis.url,
        "APP_REDIS_PREFIX": f"test-{uuid.uuid4().hex[:12]}:",
        # Fast simulated engine: the tests are about the stress features, not the latency model.
        "APP_LATENCY__PREFILL_OVERHEAD_MS": "1",
        "APP_LATENCY__ITL_MS": "1",
    }
    for key, value in settings.items():
        env["APP_" + key.upper()] = str(value)
    return env


def chat_body(stream: bool = False, max_tokens: int = 4, **extra: object) -> dict[str, Any]:
    body: dict[str, Any] = {
        "model": MODEL,
        "messages": [{"role": "user", "content": "hello"}],
        "stream": stream,
        "max_tokens": max_tokens,
        "ignore_eos": True,
    }
    body.update(extra)
    return body


@dataclass
class ParsedStream:
    chunks: list[dict[str, Any]] = field(default_factory=list)
    comments: dict[str, dict[str, Any]] = field(default_factory=dict)
    errors: list[dict[str, Any]] = field(default_factory=list)
    done: bool = False

    @property
    def content(self) -> str:
        return "".join(
            choice["delta"].get("content") or ""
            for chunk in self.chunks
            for choice in chunk["choices"]
        )

    @property
    def completion_id(self) -> str:
        return str(self.chunks[0]["id"])


def parse_sse(text: str) -> ParsedStream:
    parsed = ParsedStream()
    for block in text.split("\n\n"):
        if not block.strip():
            continue
        lines = block.split("\n")
        event = "message"
        for line in lines:
            if line.startswith(": "):
                name, _, payload = line[2:].partition(" ")
                if payload.startswith("{"):
                    parsed.comments[name] = orjson.loads(payload)
            elif line.startswith("event: "):
                event = line[len("event: ") :]
            elif line.startswith("data: "):
                data = line[len("data: ") :]
                if data == "[DONE]":
                    parsed.done = True
                elif event == "error":
                    parsed.errors.append(orjson.loads(data))
                else:
                    parsed.chunks.append(orjson.loads(data))
    return parsed


def metric(text: str, name: str, **labels: str) -> float:
    """The sum of samples called ``name`` whose labels include ``labels`` (0 when absent)."""
    total = 0.0
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name == name and all(sample.labels.get(k) == v for k, v in labels.items()):
                total += sample.value
    return total


def wait_until(probe: Callable[[], T | None], timeout_s: float, what: str) -> T:
    """Poll ``probe`` until it returns something other than None/False, with a deadline."""
    deadline = time.monotonic() + timeout_s
    while True:
        result = probe()
        if result is not None and result is not False:
            return result
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout_s} s waiting for {what}")
        time.sleep(0.02)
