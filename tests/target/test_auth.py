"""Token issue and bearer verification on a real target process (``auth.mode = jwt``).

Forged tokens that need a valid signature are signed with the ring's own private key, read from
the target's Redis the way another target process would read it: each attack then differs from a
good token in exactly the one property under test, and the failure-reason counter proves that the
target refused it for that reason and not another.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import jwt
import orjson
import pytest
import redis
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa

from target_service.embedded_redis import EmbeddedRedis
from target_service.keyring import RingKey
from tests.support.processes import TargetProcess
from tests.target.stress_helpers import ADMIN_TOKEN, chat_body, metric, target_env

CLIENT_ID = "tester"
CLIENT_SECRET = "s3cret-" + uuid.uuid4().hex
PERIOD = 300
ISSUER = "ramplab-target"
AUDIENCE = "ramplab"


class Target:
    def __init__(self, process: TargetProcess, env: dict[str, str], server: EmbeddedRedis) -> None:
        self.process = process
        self.prefix = env["APP_REDIS_PREFIX"]
        self.redis = redis.Redis(host=server.host, port=server.port)
        self.log_path = process.log_path

    @property
    def url(self) -> str:
        return self.process.url

    def ring_key(self, epoch: int) -> RingKey:
        raw = self.redis.get(f"{self.prefix}jwt:{PERIOD}:{epoch}")
        assert raw is not None, f"no ring record for period {epoch}"
        return RingKey.from_record(bytes(raw))  # type: ignore[arg-type]

    def current_key(self) -> RingKey:
        # Asking for a token makes sure the current period's key exists.
        token(self.url)
        return self.ring_key(int(time.time() // PERIOD))


@pytest.fixture(scope="module")
def target(
    redis_server: EmbeddedRedis, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Target]:
    clients = orjson.dumps([{"client_id": CLIENT_ID, "client_secret": CLIENT_SECRET}]).decode()
    env = target_env(redis_server, auth__mode="jwt", auth__clients=clients, admin_token=ADMIN_TOKEN)
    log = tmp_path_factory.mktemp("auth") / "target.log"
    with TargetProcess(env, log_path=log) as process:
        yield Target(process, env, redis_server)


def token(url: str) -> str:
    response = httpx.post(
        url + "/v1/auth/token", json={"client_id": CLIENT_ID, "client_secret": CLIENT_SECRET}
    )
    assert response.status_code == 200, response.text
    return str(response.json()["access_token"])


def call(url: str, authorization: str | None) -> httpx.Response:
    headers = {} if authorization is None else {"authorization": authorization}
    return httpx.post(url + "/v1/chat/completions", json=chat_body(max_tokens=1), headers=headers)


def claims(**changes: Any) -> dict[str, Any]:
    now = int(time.time())
    base: dict[str, Any] = {
        "iss": ISSUER,
        "aud": AUDIENCE,
        "sub": CLIENT_ID,
        "iat": now,
        "nbf": now,
        "exp": now + 120,
    }
    base.update(changes)
    return {k: v for k, v in base.items() if v is not None}


def b64(raw: bytes) -> str:
    return base64.urlsafe_b64encode(raw).rstrip(b"=").decode()


# -- token issue ------------------------------------------------------------------------------


def test_token_from_json_is_rs256_with_required_claims_and_verifies_against_jwks(
    target: Target,
) -> None:
    access = token(target.url)
    header = jwt.get_unverified_header(access)
    jwks = httpx.get(target.url + "/.well-known/jwks.json")
    assert jwks.status_code == 200
    assert "max-age=" in jwks.headers["cache-control"]
    keys = {k["kid"]: k for k in jwks.json()["keys"]}
    assert header["alg"] == "RS256"
    assert header["kid"] in keys
    public = jwt.PyJWK(keys[header["kid"]]).key
    decoded = jwt.decode(access, public, algorithms=["RS256"], audience=AUDIENCE, issuer=ISSUER)
    assert decoded["sub"] == CLIENT_ID
    assert {"kid", "alg"} <= set(header)
    assert {"iss", "aud", "sub", "iat", "exp"} <= set(decoded)
    assert call(target.url, f"Bearer {access}").status_code == 200


def test_token_from_oauth_form_and_basic_auth(target: Target) -> None:
    form = httpx.post(
        target.url + "/v1/auth/token",
        data={
            "grant_type": "client_credentials",
            "client_id": CLIENT_ID,
            "client_secret": CLIENT_SECRET,
        },
    )
    assert form.status_code == 200, form.text
    body = form.json()
    assert body["token_type"] == "Bearer"
    assert body["expires_in"] == 300
    basic = httpx.post(
        target.url + "/v1/auth/token",
        data={"grant_type": "client_credentials"},
        auth=(CLIENT_ID, CLIENT_SECRET),
    )
    assert basic.status_code == 200, basic.text
    assert call(target.url, "Bearer " + basic.json()["access_token"]).status_code == 200


@pytest.mark.parametrize(
    ("payload", "status", "code"),
    [
        ({"client_id": CLIENT_ID, "client_secret": "wrong"}, 401, "invalid_client"),
        ({"client_id": "nobody", "client_secret": CLIENT_SECRET}, 401, "invalid_client"),
        ({"client_id": CLIENT_ID}, 400, "invalid_request"),
    ],
    ids=["wrong-secret", "unknown-client", "missing-secret"],
)
def test_token_refused_for_bad_credentials(
    target: Target, payload: dict[str, str], status: int, code: str
) -> None:
    response = httpx.post(target.url + "/v1/auth/token", json=payload)
    assert response.status_code == status
    assert response.json()["error"]["code"] == code


# -- attacks ----------------------------------------------------------------------------------


def _rs256(key: RingKey, payload: dict[str, Any], kid: str | None = None) -> str:
    return jwt.encode(payload, key.rsa, algorithm="RS256", headers={"kid": kid or key.kid})


def _no_token(t: Target) -> str | None:
    return None


def _garbage(t: Target) -> str | None:
    return "Bearer not.a.jwt-at-all"


def _alg_none(t: Target) -> str | None:
    kid = t.current_key().kid
    header = b64(orjson.dumps({"alg": "none", "typ": "JWT", "kid": kid}))
    return f"Bearer {header}.{b64(orjson.dumps(claims()))}."


def _hs256_with_public_key(t: Target) -> str | None:
    key = t.current_key()
    pem = key.rsa.public_key().public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
    )
    signing_input = (
        b64(orjson.dumps({"alg": "HS256", "typ": "JWT", "kid": key.kid}))
        + "."
        + b64(orjson.dumps(claims()))
    )
    mac = hmac.new(pem, signing_input.encode(), hashlib.sha256).digest()
    return f"Bearer {signing_input}.{b64(mac)}"


def _expired(t: Target) -> str | None:
    now = int(time.time())
    return "Bearer " + _rs256(t.current_key(), claims(iat=now - 600, nbf=now - 600, exp=now - 60))


def _not_yet_valid(t: Target) -> str | None:
    return "Bearer " + _rs256(t.current_key(), claims(nbf=int(time.time()) + 600))


def _wrong_audience(t: Target) -> str | None:
    return "Bearer " + _rs256(t.current_key(), claims(aud="someone-else"))


def _wrong_issuer(t: Target) -> str | None:
    return "Bearer " + _rs256(t.current_key(), claims(iss="https://evil.example"))


def _unknown_kid(t: Target) -> str | None:
    epoch = int(time.time() // PERIOD)
    stranger = RingKey.generate(epoch)
    return "Bearer " + _rs256(stranger, claims(), kid=f"rs-{epoch}-00000000")


def _foreign_key_with_real_kid(t: Target) -> str | None:
    forged = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    real_kid = t.current_key().kid
    return "Bearer " + jwt.encode(claims(), forged, algorithm="RS256", headers={"kid": real_kid})


def _tampered_payload(t: Target) -> str | None:
    header, _, signature = token(t.url).split(".")
    return f"Bearer {header}.{b64(orjson.dumps(claims(sub='admin')))}.{signature}"


def _retired_key(t: Target) -> str | None:
    # A genuine ring record for the period before the previous one: retired by construction.
    epoch = int(time.time() // PERIOD) - 2
    retired = RingKey.generate(epoch)
    t.redis.set(f"{t.prefix}jwt:{PERIOD}:{epoch}", retired.to_record(), px=60_000)
    return "Bearer " + _rs256(retired, claims())


ATTACKS: dict[str, tuple[Callable[[Target], str | None], str]] = {
    "no-token": (_no_token, "missing"),
    "garbage": (_garbage, "malformed"),
    "alg-none": (_alg_none, "algorithm"),
    "hs256-signed-with-public-key": (_hs256_with_public_key, "algorithm"),
    "expired": (_expired, "expired"),
    "not-yet-valid": (_not_yet_valid, "not_yet_valid"),
    "wrong-audience": (_wrong_audience, "audience"),
    "wrong-issuer": (_wrong_issuer, "issuer"),
    "unknown-kid": (_unknown_kid, "unknown_kid"),
    "foreign-key-real-kid": (_foreign_key_with_real_kid, "signature"),
    "tampered-payload": (_tampered_payload, "signature"),
    "retired-key": (_retired_key, "retired_key"),
}


def _failures(t: Target, reason: str) -> float:
    text = httpx.get(t.url + "/metrics").text
    return metric(text, "target_auth_failures_total", reason=reason)


@pytest.mark.parametrize("attack", list(ATTACKS))
def test_attack_is_refused_with_401_for_its_reason(target: Target, attack: str) -> None:
    forge, reason = ATTACKS[attack]
    authorization = forge(target)
    before = _failures(target, reason)
    response = call(target.url, authorization)
    assert response.status_code == 401, response.text
    error = response.json()["error"]
    assert error["type"] == "authentication_error"
    assert set(error) == {"message", "type", "code", "param"}
    assert response.headers["www-authenticate"].startswith("Bearer")
    assert _failures(target, reason) == before + 1


@pytest.mark.parametrize("missing", ["exp", "iat", "nbf", "iss", "aud", "sub"])
def test_token_missing_a_required_claim_is_refused(target: Target, missing: str) -> None:
    forged = _rs256(target.current_key(), claims(**{missing: None}))
    before = _failures(target, "missing_claim")
    response = call(target.url, f"Bearer {forged}")
    assert response.status_code == 401, response.text
    assert response.json()["error"]["type"] == "authentication_error"
    # Refused because the claim is missing, not for some other property of the token.
    assert _failures(target, "missing_claim") == before + 1


def test_small_leeway_accepts_a_token_just_past_expiry(target: Target) -> None:
    # exp 2 s in the past, inside the default 5 s leeway: a clock step between hosts is tolerated.
    now = int(time.time())
    forged = _rs256(target.current_key(), claims(iat=now - 100, nbf=now - 100, exp=now - 2))
    assert call(target.url, f"Bearer {forged}").status_code == 200


def test_models_need_a_token_too(target: Target) -> None:
    assert httpx.get(target.url + "/v1/models").status_code == 401
    ok = httpx.get(
        target.url + "/v1/models", headers={"authorization": f"Bearer {token(target.url)}"}
    )
    assert ok.status_code == 200


def test_secrets_and_tokens_never_reach_the_log(target: Target) -> None:
    access = token(target.url)
    call(target.url, f"Bearer {access}")
    call(target.url, "Bearer " + access[:-4] + "AAAA")
    admin = {"authorization": f"Bearer {ADMIN_TOKEN}"}
    # The admin token is used (right and wrong) and printed masked in the settings, never plain.
    changed = httpx.put(target.url + "/admin/config", json={"faults": {"seed": 7}}, headers=admin)
    assert changed.status_code == 200, changed.text
    wrong = {"authorization": f"Bearer {ADMIN_TOKEN}x"}
    assert httpx.get(target.url + "/admin/config", headers=wrong).status_code == 401
    assert target.log_path is not None
    text = Path(target.log_path).read_text()
    assert "target settings:" in text  # the log is really being written
    assert '"admin_token": "********"' in text
    assert CLIENT_SECRET not in text
    assert ADMIN_TOKEN not in text
    assert access not in text
    assert access.split(".")[2] not in text
