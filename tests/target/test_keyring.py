"""Key rotation across two worker processes sharing one key ring in Redis.

The period is 2 s with no leeway, so one test walks a key through its whole life (published as
next, signing, verifying as previous, retired) in about three periods. Which process answers is
read from ``x-target-pid``; fresh connections are opened until both processes have answered, so
"issued by one, verified by the other" is observed, not assumed. The overlap and retirement checks
go through one kept-alive connection per process, so *each* process is asked, not whichever one
the kernel picks.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator

import httpx
import jwt
import pytest
import redis

from target_service.embedded_redis import EmbeddedRedis
from target_service.keyring import RingKey
from tests.support.processes import TargetProcess
from tests.target.stress_helpers import metric, target_env, wait_until

# Asserts on measured time: `make e2e` runs it alone, after its parallel phase.
pytestmark = pytest.mark.timing

PERIOD = 2
SECRET = "rotation-secret"


@pytest.fixture(scope="module")
def target(redis_server: EmbeddedRedis) -> Iterator[tuple[TargetProcess, str]]:
    env = target_env(
        redis_server,
        auth__mode="jwt",
        auth__jwt_rotation_seconds=PERIOD,
        auth__token_ttl_s=PERIOD,
        auth__leeway_s=0,
        auth__clients=f'[{{"client_id":"rot","client_secret":"{SECRET}"}}]',
    )
    with TargetProcess(env, workers=2) as process:
        yield process, env["APP_REDIS_PREFIX"]


def fresh(url: str, method: str, path: str, **kwargs: object) -> httpx.Response:
    # A new client per call: a new connection, which the kernel may hand to either worker.
    with httpx.Client(base_url=url) as client:
        return client.request(method, path, **kwargs)  # type: ignore[arg-type]


def issue(url: str) -> tuple[str, str]:
    response = fresh(
        url, "POST", "/v1/auth/token", json={"client_id": "rot", "client_secret": SECRET}
    )
    assert response.status_code == 200, response.text
    return response.json()["access_token"], response.headers["x-target-pid"]


def verify(url: str, token: str) -> tuple[int, str]:
    response = fresh(url, "GET", "/v1/models", headers={"authorization": f"Bearer {token}"})
    return response.status_code, response.headers["x-target-pid"]


@contextlib.contextmanager
def one_client_per_process(url: str, processes: int = 2) -> Iterator[dict[str, httpx.Client]]:
    """Kept-alive clients, one connected to each worker process (uvicorn keeps idle ones 5 s)."""
    pinned: dict[str, httpx.Client] = {}

    def all_pinned() -> bool:
        client = httpx.Client(base_url=url)
        pid = client.get("/healthz").headers["x-target-pid"]
        if pid in pinned:
            client.close()
        else:
            pinned[pid] = client
        return len(pinned) == processes

    try:
        wait_until(all_pinned, 20, f"a connection to each of {processes} processes")
        yield pinned
    finally:
        for client in pinned.values():
            client.close()


def verify_on(pid: str, client: httpx.Client, token: str) -> int:
    response = client.get("/v1/models", headers={"authorization": f"Bearer {token}"})
    assert response.headers["x-target-pid"] == pid, "the kept-alive connection moved"
    return response.status_code


def epoch() -> int:
    return int(time.time() // PERIOD)


def wait_for_epoch(target_epoch: int, min_into_s: float = 0.0) -> None:
    wait_until(
        lambda: time.time() >= target_epoch * PERIOD + min_into_s,
        PERIOD * 3,
        f"period {target_epoch}",
    )


def test_token_issued_by_one_process_verifies_on_the_other(
    target: tuple[TargetProcess, str],
) -> None:
    process, _ = target
    seen: dict[str, str] = {}  # issuing pid -> a token it issued

    def both_issued() -> bool:
        token, pid = issue(process.url)
        seen.setdefault(pid, token)
        return len(seen) >= 2

    wait_until(both_issued, 20, "tokens issued by both worker processes")
    assert len(seen) == 2
    for issuer, token in seen.items():
        # Verify on new connections until the *other* process has accepted it.
        def other_accepts(token: str = token, issuer: str = issuer) -> bool:
            status, pid = verify(process.url, token)
            assert status == 200
            return pid != issuer

        wait_until(other_accepts, 20, f"a process other than {issuer} to verify its token")
    pids = {verify(process.url, token)[1] for token in seen.values() for _ in range(4)}
    assert pids <= set(seen)


def test_rotation_publishes_next_keeps_previous_then_retires(
    target: tuple[TargetProcess, str], redis_server: EmbeddedRedis
) -> None:
    process, prefix = target
    with one_client_per_process(process.url) as pinned:
        _walk_one_key_through_its_life(process, prefix, redis_server, pinned)


def _walk_one_key_through_its_life(
    process: TargetProcess,
    prefix: str,
    redis_server: EmbeddedRedis,
    pinned: dict[str, httpx.Client],
) -> None:
    # Start 1 s into a 2 s period, so the token below outlives the next boundary by ≥ 1 s: ample
    # for a few loopback requests on a loaded machine, and it expires before its key retires.
    start = epoch() + 1
    wait_for_epoch(start, 1.0)
    old_token, _ = issue(process.url)
    old_kid = jwt.get_unverified_header(old_token)["kid"]
    assert old_kid.startswith(f"rs-{start}-")
    jwks = {k["kid"] for k in fresh(process.url, "GET", "/.well-known/jwks.json").json()["keys"]}
    assert old_kid in jwks
    next_kids = {k for k in jwks if k.startswith(f"rs-{start + 1}-")}
    assert len(next_kids) == 1, "the next period's key is published before it signs"

    wait_for_epoch(start + 1)
    # Overlap: the old token still verifies, on each process.
    assert {
        pid: verify_on(pid, client, old_token) for pid, client in pinned.items()
    } == dict.fromkeys(pinned, 200)
    new_token, _ = issue(process.url)
    new_kid = jwt.get_unverified_header(new_token)["kid"]
    assert {new_kid} == next_kids
    jwks = {k["kid"] for k in fresh(process.url, "GET", "/.well-known/jwks.json").json()["keys"]}
    assert {old_kid, new_kid} <= jwks

    wait_for_epoch(start + 2)
    # The old key is retired now: a fresh, otherwise valid token signed with it is refused.
    raw = redis.Redis(host=redis_server.host, port=redis_server.port).get(
        f"{prefix}jwt:{PERIOD}:{start}"
    )
    assert raw is not None
    old_key = RingKey.from_record(bytes(raw))  # type: ignore[arg-type]
    now = int(time.time())
    claims = {"iss": "ramplab-target", "aud": "ramplab", "sub": "rot", "iat": now, "nbf": now}
    forged = jwt.encode({**claims, "exp": now + 60}, old_key.rsa, "RS256", {"kid": old_kid})
    for _ in range(2):
        assert {
            pid: verify_on(pid, client, forged) for pid, client in pinned.items()
        } == dict.fromkeys(pinned, 401)
    jwks = {k["kid"] for k in fresh(process.url, "GET", "/.well-known/jwks.json").json()["keys"]}
    assert old_kid not in jwks
    assert new_kid in jwks
    text = fresh(process.url, "GET", "/metrics").text
    assert metric(text, "target_auth_failures_total", reason="retired_key") >= 4
    # One key per period over both processes, however many processes asked for it.
    assert metric(text, "target_jwt_keys_generated_total") <= epoch() - start + 4
