"""The target fuzzed from its own OpenAPI document with schemathesis (issue 16).

Every operation of ``GET /openapi.json`` gets ``CASES_PER_MODE`` cases that fit the schema
(positive) and as many that break it (negative: wrong types, missing fields, out-of-range
numbers), sent to a real in-process target (hypothesis stops early where an operation has few
possible inputs: ``/healthz`` has one). The suite sends ~50 per mode and operation;
``python -m bench fuzz`` runs it with 200 (≥ 1,000 cases) and records the counts. What must hold
for every one: no 5xx, and every 4xx carries the OpenAI error body
``{"error": {"message": str, "type": str, ...}}``. Deterministic (``derandomize``): the same
cases every run, so a failure reproduces. The target runs unpaced and with a small
``max_model_len`` so that a generated ``max_tokens`` of a million is a fast 400, not a long stream.
"""

from __future__ import annotations

import json
import os
from collections import Counter
from collections.abc import Iterator
from typing import Any

import pytest
import requests
import schemathesis
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis.errors import Unsatisfiable
from schemathesis import GenerationMode
from schemathesis.core.result import Err

from target_service.embedded_redis import EmbeddedRedis
from tests.support.targets import ThreadTarget, settings_from_env

CASES_PER_MODE = int(os.environ.get("RAMPLAB_FUZZ_CASES", "50"))
TARGET_ENV = {
    "APP_LATENCY__PREFILL_OVERHEAD_MS": "0",
    "APP_LATENCY__PREFILL_PER_TOKEN_MS": "0",
    "APP_LATENCY__ITL_MS": "0",
    "APP_SIGNING__MODE": "off",
    "APP_OUTPUT__MAX_MODEL_LEN": "512",
}


@pytest.fixture(scope="module")
def target(redis_server: EmbeddedRedis) -> Iterator[ThreadTarget]:
    env = {"APP_REDIS_URL": redis_server.url, **TARGET_ENV}
    with ThreadTarget(settings_from_env(env)) as served:
        yield served


def problem(status: int, body: bytes) -> str | None:
    """What is wrong with an answer: a 5xx, or a 4xx without the OpenAI error body."""
    if status >= 500:
        return f"{status}: {body[:300]!r}"
    if status < 400:
        return None
    try:
        error = json.loads(body)["error"]
    except (ValueError, TypeError, KeyError):
        return f"{status} without an OpenAI error body: {body[:300]!r}"
    if not isinstance(error.get("message"), str) or not isinstance(error.get("type"), str):
        return f"{status} with an incomplete error: {error!r}"
    return None


def test_fuzzed_requests_get_no_5xx_and_openai_errors(target: ThreadTarget) -> None:
    schema = schemathesis.openapi.from_url(target.url + "/openapi.json")
    statuses: Counter[int] = Counter()
    problems: list[str] = []
    session = requests.Session()
    unbreakable: list[str] = []
    for result in schema.get_all_operations():
        if isinstance(result, Err):
            problems.append(f"the document is invalid: {result.err()}")
            continue
        operation = result.ok()
        for mode in (GenerationMode.POSITIVE, GenerationMode.NEGATIVE):

            @settings(
                max_examples=CASES_PER_MODE,
                deadline=None,
                database=None,
                derandomize=True,
                phases=[Phase.generate],
                suppress_health_check=list(HealthCheck),
            )
            @given(case=operation.as_strategy(generation_mode=mode))
            def send(case: Any) -> None:
                response = case.call(base_url=target.url, session=session, timeout=10)
                statuses[response.status_code] += 1
                found = problem(response.status_code, response.content)
                if found is not None:
                    where = f"{case.method} {case.formatted_path}"
                    problems.append(f"{where} {mode.value}: {found}")  # noqa: B023 (run at once)

            try:
                send()
            except Unsatisfiable:
                # Nothing to break: an operation without parameters or body has no negative case.
                assert mode is GenerationMode.NEGATIVE
                unbreakable.append(operation.label)
    total = sum(statuses.values())
    counts = dict(sorted(statuses.items()))
    print(f"fuzz: {total} cases, statuses {counts}; no negative case: {unbreakable}")
    assert problems == [], "\n".join(problems[:20])
    assert total >= 4 * CASES_PER_MODE  # at least the chat and token operations, both modes
