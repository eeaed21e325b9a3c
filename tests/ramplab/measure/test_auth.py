"""The JWT flow across key rotation: zero auth errors; static keys; refresh before expiry.

The token server is purpose-built: RS256 tokens with a ``kid``; every ``ROTATE_EVERY`` chat
requests it rotates its signing key and retires the key before the previous one, so a token
signed two rotations ago is refused with 401 although it has not expired — exactly what a client
sees when a server rotates keys. The client must refresh once and retry, never report an error.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator

import httpx
import jwt
import pytest
from cryptography.hazmat.primitives.asymmetric import rsa

from ramplab.measure.auth import AuthError, JwtAuth, StaticKeyAuth
from ramplab.measure.chain import Endpoint, RequestChain
from ramplab.measure.client import ClientOptions, make_client
from tests.support.tiny_server import DONE, ROLE, Reply, TinyServer, chunk, usage

ROTATE_EVERY = 4
BODY = {"model": "m", "messages": [{"role": "user", "content": "hi"}], "stream": True}


class TokenServer:
    def __init__(self) -> None:
        self.keys = [
            rsa.generate_private_key(public_exponent=65537, key_size=2048) for _ in range(2)
        ]
        self.kids = ["k0", "k1"]  # [previous, current]
        self.counter = 0
        self.next_kid = 2
        self.issued = 0
        self.rejected = 0
        self.lock = threading.Lock()

    def rotate(self) -> None:
        self.keys = [self.keys[1], rsa.generate_private_key(public_exponent=65537, key_size=2048)]
        self.kids = [self.kids[1], f"k{self.next_kid}"]
        self.next_kid += 1

    def __call__(self, method: str, path: str, headers: dict[str, str], body: bytes) -> Reply:
        json_type = {"content-type": "application/json"}
        if path == "/v1/auth/token":
            creds = json.loads(body)
            if creds != {"client_id": "c1", "client_secret": "s1"}:
                return Reply(401, json_type, [b'{"error":{"message":"bad credentials"}}'])
            with self.lock:
                token = jwt.encode(
                    {"sub": "c1", "aud": "ramplab", "exp": 2_000_000_000},
                    self.keys[1],
                    algorithm="RS256",
                    headers={"kid": self.kids[1]},
                )
                self.issued += 1
            answer = {"access_token": token, "token_type": "Bearer", "expires_in": 3600}
            return Reply(200, json_type, [json.dumps(answer).encode()])
        with self.lock:
            self.counter += 1
            if self.counter % ROTATE_EVERY == 0:
                self.rotate()
            token = headers.get("authorization", "").removeprefix("Bearer ")
            try:
                kid = jwt.get_unverified_header(token)["kid"]
                key = self.keys[self.kids.index(kid)].public_key()
                jwt.decode(token, key, algorithms=["RS256"], audience="ramplab")
            except (jwt.PyJWTError, ValueError, KeyError):
                self.rejected += 1
                return Reply(401, json_type, [b'{"error":{"message":"invalid token"}}'])
        return Reply(body=[ROLE, chunk(" a"), chunk(" b"), usage(2), DONE])


@pytest.fixture
def tokens() -> Iterator[tuple[TokenServer, TinyServer]]:
    token_server = TokenServer()
    with TinyServer(token_server) as srv:
        yield token_server, srv


def test_key_rotation_gives_zero_auth_errors(tokens: tuple[TokenServer, TinyServer]) -> None:
    token_server, srv = tokens
    with make_client(ClientOptions()) as client:
        auth = JwtAuth(client, srv.url + "/v1/auth/token", "c1", "s1")
        chain = RequestChain(client, Endpoint(srv.url + "/v1/chat/completions", 5.0), auth=auth)
        records = [chain.run(BODY) for _ in range(30)]
    assert [r.error_kind for r in records if not r.ok] == []
    assert token_server.rejected >= 3  # the rotation did bite: old tokens were refused...
    refreshed = [r for r in records if r.attempts == 2]
    assert len(refreshed) == token_server.rejected  # ...and each refusal was healed by one refresh
    assert all(r.attempt_log[0].status == 401 for r in refreshed)
    assert auth.fetches == token_server.issued == 1 + token_server.rejected


def test_refresh_before_expiry_without_any_401() -> None:
    now = [0.0]
    issued: list[int] = []

    def handler(method: str, path: str, headers: dict[str, str], body: bytes) -> Reply:
        issued.append(1)
        answer = {"access_token": f"t{len(issued)}", "token_type": "Bearer", "expires_in": 10}
        return Reply(200, {"content-type": "application/json"}, [json.dumps(answer).encode()])

    with TinyServer(handler) as srv, httpx.Client() as client:
        auth = JwtAuth(client, srv.url + "/token", "c", "s", clock=lambda: now[0])
        assert auth.headers() == {"authorization": "Bearer t1"}
        now[0] = 7.9  # under 80 % of the 10 s lifetime: reuse
        assert auth.headers() == {"authorization": "Bearer t1"}
        now[0] = 8.0  # 80 %: refresh ahead of expiry
        assert auth.headers() == {"authorization": "Bearer t2"}
    assert len(issued) == 2


def test_bad_credentials_are_an_auth_error_not_a_crash(
    tokens: tuple[TokenServer, TinyServer],
) -> None:
    _, srv = tokens
    with make_client(ClientOptions()) as client:
        auth = JwtAuth(client, srv.url + "/v1/auth/token", "c1", "wrong")
        with pytest.raises(AuthError, match="answered 401"):
            auth.headers()
        record = RequestChain(client, Endpoint(srv.url + "/v1/chat/completions"), auth=auth).run(
            BODY
        )
    assert record.error_kind == "auth_error"
    assert not record.ok


def test_static_key_is_sent_and_a_401_is_not_retried(
    tokens: tuple[TokenServer, TinyServer],
) -> None:
    _, srv = tokens
    with make_client(ClientOptions()) as client:
        chain = RequestChain(
            client, Endpoint(srv.url + "/v1/chat/completions"), auth=StaticKeyAuth("nope")
        )
        record = chain.run(BODY)
    assert record.error_kind == "auth_error"
    assert record.status == 401
    assert record.attempts == 1
