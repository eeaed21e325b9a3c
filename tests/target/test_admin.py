"""``/admin/config``: absent without a token, refused without the right one, validated whole,
applied at run time, and propagated to every worker process through Redis."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from target_service.embedded_redis import EmbeddedRedis
from tests.support.processes import TargetProcess
from tests.target.stress_helpers import (
    ADMIN_TOKEN,
    chat_body,
    metric,
    parse_sse,
    target_env,
    wait_until,
)

ADMIN = {"authorization": f"Bearer {ADMIN_TOKEN}"}


@pytest.fixture(scope="module")
def two_workers(redis_server: EmbeddedRedis) -> Iterator[str]:
    env = target_env(redis_server, admin_token=ADMIN_TOKEN, admin_poll_s=0.1)
    with TargetProcess(env, workers=2) as process:
        yield process.url


def fresh_get(url: str) -> dict[str, Any]:
    with httpx.Client(base_url=url) as client:  # a new connection: either worker may answer
        response = client.get("/admin/config", headers=ADMIN)
    assert response.status_code == 200, response.text
    body: dict[str, Any] = response.json()
    assert body["process"]["pid"] == int(response.headers["x-target-pid"])
    return body


def test_admin_routes_do_not_exist_without_a_token(redis_server: EmbeddedRedis) -> None:
    with TargetProcess(target_env(redis_server)) as process:
        assert httpx.get(process.url + "/admin/config").status_code == 404
        assert httpx.get(process.url + "/admin/config", headers=ADMIN).status_code == 404
        assert httpx.put(process.url + "/admin/config", json={}, headers=ADMIN).status_code == 404


@pytest.mark.parametrize(
    "headers",
    [{}, {"authorization": "Bearer wrong"}, {"authorization": ADMIN_TOKEN}],
    ids=["none", "wrong", "no-scheme"],
)
def test_admin_refused_without_the_token(two_workers: str, headers: dict[str, str]) -> None:
    for method in ("GET", "PUT"):
        response = httpx.request(method, two_workers + "/admin/config", json={}, headers=headers)
        assert response.status_code == 401
        assert response.json()["error"]["type"] == "authentication_error"


def test_get_reports_processes_and_threads(two_workers: str) -> None:
    body = fresh_get(two_workers)
    process = body["process"]
    assert process["workers"] == 2
    assert process["threads"] >= 1
    assert process["signing_threads"] == 32
    assert set(body["config"]) == {
        "faults",
        "signing",
        "latency",
        "ratelimit",
        "prefix_cache",
        "reasoning",
    }
    text = httpx.get(two_workers + "/metrics").text
    assert metric(text, "target_worker_processes") == 2
    assert metric(text, "target_threads") >= 1


@pytest.mark.parametrize(
    ("patch", "param"),
    [
        ({"faults": {"ratio_429": 2}}, "faults.ratio_429"),
        ({"faults": {"bogus": 1}}, "faults.bogus"),
        ({"faults": {"ratio_429": 0.6, "ratio_503": 0.6}}, "faults"),
        ({"faults": {"outages": [{"start_s": 1}]}}, "faults.outages.0.duration_s"),
        ({"signing": {"mode": "fast"}}, "signing.mode"),
        ({"signing": {"threads": 3}}, "signing.threads"),
        ({"latency": {"itl_ms": -1}}, "latency.itl_ms"),
        ({"ratelimit": {"period_s": 0}}, "ratelimit.period_s"),
        ({"scheduler": {"max_num_seqs": 1}}, "scheduler"),
        ({"signing": {"mode": "off"}, "faults": {"ratio_503": 5}}, "faults.ratio_503"),
    ],
    ids=lambda value: "-" if isinstance(value, dict) else value,
)
def test_invalid_change_is_refused_whole_naming_the_field(
    two_workers: str, patch: dict[str, Any], param: str
) -> None:
    before = fresh_get(two_workers)["config"]
    response = httpx.put(two_workers + "/admin/config", json=patch, headers=ADMIN)
    assert response.status_code == 400, response.text
    error = response.json()["error"]
    assert error["param"] == param
    assert param in error["message"]
    assert fresh_get(two_workers)["config"] == before


def test_change_applies_at_run_time_on_every_process(two_workers: str) -> None:
    response = httpx.put(
        two_workers + "/admin/config",
        json={"signing": {"mode": "ed25519"}, "latency": {"itl_ms": 2.0}},
        headers=ADMIN,
    )
    assert response.status_code == 200, response.text
    version = response.json()["version"]
    applied: dict[int, dict[str, Any]] = {}

    def both_applied() -> bool:
        body = fresh_get(two_workers)
        if body["version"] >= version:
            applied[body["process"]["pid"]] = body["config"]
        return len(applied) == 2

    # Each process polls Redis every 0.1 s here; new connections reach both in a few tries.
    wait_until(both_applied, 20, "both worker processes to apply the change")
    for config in applied.values():
        assert config["signing"]["mode"] == "ed25519"
        assert config["latency"]["itl_ms"] == 2.0
    signed_by: set[str] = set()

    def both_sign_ed25519() -> bool:
        with httpx.Client(base_url=two_workers) as client:
            r = client.post("/v1/chat/completions", json=chat_body(stream=True, max_tokens=2))
        assert parse_sse(r.text).comments["ramplab-signature"]["alg"] == "EdDSA"
        signed_by.add(r.headers["x-target-pid"])
        return len(signed_by) == 2

    wait_until(both_sign_ed25519, 20, "streams from both processes")
    restore = httpx.put(
        two_workers + "/admin/config",
        json={"signing": {"mode": "locked"}, "latency": {"itl_ms": 1.0}},
        headers=ADMIN,
    )
    assert restore.status_code == 200


def test_a_put_of_prefix_cache_empties_every_process_cache(two_workers: str) -> None:
    prompt = " ".join(f"w{i:03x}" for i in range(200))  # 12 whole blocks of 16 tokens
    body = chat_body(max_tokens=1)
    body["messages"] = [{"role": "user", "content": prompt}]

    def put(patch: dict[str, Any]) -> int:
        response = httpx.put(two_workers + "/admin/config", json=patch, headers=ADMIN)
        assert response.status_code == 200, response.text
        version: int = response.json()["version"]
        seen: set[int] = set()

        def both_applied() -> bool:
            config = fresh_get(two_workers)
            if config["version"] >= version:
                seen.add(config["process"]["pid"])
            return len(seen) == 2

        wait_until(both_applied, 20, "both worker processes to apply the change")
        return version

    def cached_by_process(until: int) -> dict[str, list[int]]:
        """Send the prompt on new connections until each process answered ``until`` times."""
        found: dict[str, list[int]] = {}

        def enough() -> bool:
            with httpx.Client(base_url=two_workers) as client:
                r = client.post("/v1/chat/completions", json=body)
            details = r.json()["usage"]["prompt_tokens_details"]
            found.setdefault(r.headers["x-target-pid"], []).append(details["cached_tokens"])
            return len(found) == 2 and all(len(v) >= until for v in found.values())

        wait_until(enough, 30, "answers from both processes")
        return found

    put({"prefix_cache": {"enabled": True}})
    try:
        # Each process caches the prompt the first time it prefills it (per-process caches).
        warm = cached_by_process(until=2)
        assert all(v[0] == 0 and v[-1] == 192 for v in warm.values()), warm
        put({"prefix_cache": {}})
        cold = cached_by_process(until=1)
        assert all(v[0] == 0 for v in cold.values()), cold
    finally:
        put({"prefix_cache": {"enabled": False}})
