"""Response signatures, verified the way a client would: against the target's JWKS.

One target with an admin token; each test sets the signing mode it needs through
``PUT /admin/config`` (which also proves the mode switches at run time).
"""

from __future__ import annotations

import asyncio
import base64
import statistics
from collections.abc import Iterator

import httpx
import jwt
import pytest
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric import ed25519, padding, rsa

from target_service.embedded_redis import EmbeddedRedis
from target_service.signing import signed_message
from tests.support.processes import TargetProcess
from tests.target.stress_helpers import (
    ADMIN_TOKEN,
    chat_body,
    metric,
    parse_sse,
    target_env,
)

ADMIN = {"authorization": f"Bearer {ADMIN_TOKEN}"}


@pytest.fixture(scope="module")
def url(redis_server: EmbeddedRedis) -> Iterator[str]:
    env = target_env(redis_server, admin_token=ADMIN_TOKEN, signing__threads=32)
    with TargetProcess(env) as process:
        yield process.url


def set_signing(url: str, **fields: object) -> None:
    response = httpx.put(url + "/admin/config", json={"signing": fields}, headers=ADMIN)
    assert response.status_code == 200, response.text
    assert response.json()["config"]["signing"]["mode"] == fields.get("mode", "locked")


def jwks_key(url: str, kid: str) -> object:
    keys = {k["kid"]: k for k in httpx.get(url + "/.well-known/jwks.json").json()["keys"]}
    return jwt.PyJWK(keys[kid]).key


def unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def verify(url: str, alg: str, kid: str, sig: str, message: bytes) -> None:
    key = jwks_key(url, kid)
    if alg == "RS256":
        assert isinstance(key, rsa.RSAPublicKey)
        assert key.key_size == 2048
        key.verify(unb64(sig), message, padding.PKCS1v15(), hashes.SHA256())
    else:
        assert alg == "EdDSA"
        assert isinstance(key, ed25519.Ed25519PublicKey)
        key.verify(unb64(sig), message)


def stream(url: str, max_tokens: int = 4) -> str:
    body = chat_body(stream=True, max_tokens=max_tokens)
    response = httpx.post(url + "/v1/chat/completions", json=body)
    assert response.status_code == 200, response.text
    assert "auth;dur=" in response.headers["server-timing"]
    assert "ratelimit;dur=" in response.headers["server-timing"]
    return response.text


@pytest.mark.parametrize(
    ("mode", "alg"), [("locked", "RS256"), ("parallel", "RS256"), ("ed25519", "EdDSA")]
)
def test_stream_signature_verifies_against_jwks(url: str, mode: str, alg: str) -> None:
    set_signing(url, mode=mode)
    parsed = parse_sse(stream(url, max_tokens=6))
    signature = parsed.comments["ramplab-signature"]
    assert signature["alg"] == alg
    verify(
        url,
        alg,
        signature["kid"],
        signature["sig"],
        signed_message(parsed.completion_id, parsed.content),
    )
    timing = parsed.comments["ramplab-timing"]
    assert timing["sign_ms"] > 0
    assert timing["lock_wait_ms"] >= 0
    assert parsed.done


def test_a_signature_over_other_content_does_not_verify(url: str) -> None:
    set_signing(url, mode="locked")
    parsed = parse_sse(stream(url, max_tokens=6))
    signature = parsed.comments["ramplab-signature"]
    with pytest.raises(InvalidSignature):
        verify(
            url,
            "RS256",
            signature["kid"],
            signature["sig"],
            signed_message(parsed.completion_id, parsed.content + "x"),
        )


@pytest.mark.parametrize("mode", ["locked", "ed25519"])
def test_plain_response_carries_the_signature_in_headers(url: str, mode: str) -> None:
    set_signing(url, mode=mode)
    response = httpx.post(url + "/v1/chat/completions", json=chat_body(max_tokens=5))
    assert response.status_code == 200
    body = response.json()
    h = response.headers
    message = signed_message(body["id"], body["choices"][0]["message"]["content"])
    verify(
        url,
        h["x-ramplab-signature-alg"],
        h["x-ramplab-signature-kid"],
        h["x-ramplab-signature"],
        message,
    )
    assert "sign;dur=" in h["server-timing"]


def test_off_sends_no_signature(url: str) -> None:
    set_signing(url, mode="off")
    parsed = parse_sse(stream(url))
    assert "ramplab-signature" not in parsed.comments
    assert parsed.comments["ramplab-timing"]["sign_ms"] == 0
    response = httpx.post(url + "/v1/chat/completions", json=chat_body())
    assert "x-ramplab-signature" not in response.headers


async def _lock_waits(url: str, concurrency: int) -> list[float]:
    limits = httpx.Limits(max_connections=concurrency * 2)
    async with httpx.AsyncClient(base_url=url, limits=limits, timeout=60) as client:

        async def one() -> float:
            response = await client.post(
                "/v1/chat/completions", json=chat_body(stream=True, max_tokens=4)
            )
            assert response.status_code == 200
            return float(parse_sse(response.text).comments["ramplab-timing"]["lock_wait_ms"])

        return list(await asyncio.gather(*(one() for _ in range(concurrency))))


@pytest.mark.timing  # asserts on measured time: run alone, after the rest
def test_lock_wait_grows_with_concurrency_when_locked_not_when_parallel(url: str) -> None:
    # work_factor 8 makes each critical section ≈ 2 ms of RSA (4,400 signs/s per core): 32
    # streams that end together then queue ≈ 32 × 2 ms on the lock, far above scheduling noise.
    set_signing(url, mode="locked", work_factor=8)
    before = metric(httpx.get(url + "/metrics").text, "target_sign_lock_wait_seconds_count")
    alone = [asyncio.run(_lock_waits(url, 1))[0] for _ in range(5)]
    locked = asyncio.run(_lock_waits(url, 32))
    set_signing(url, mode="parallel", work_factor=8)
    parallel = asyncio.run(_lock_waits(url, 32))
    set_signing(url, mode="locked", work_factor=1)
    after = metric(httpx.get(url + "/metrics").text, "target_sign_lock_wait_seconds_count")
    assert after - before == 5 + 32 + 32
    # Factors, not times: in locked mode the mean wait at 32 is many sections long, while a
    # request alone finds the lock free; parallel mode has no lock (its computations share the
    # 2 cores inside ``sign`` instead), so its wait is exactly zero.
    assert statistics.mean(locked) > 5 * max(statistics.mean(alone), 0.05)
    assert max(locked) > 10 * 1.0  # at least ten ≥ 1 ms sections queued ahead of the last one
    assert parallel == [0.0] * 32
