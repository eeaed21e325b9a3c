"""Who is calling: client-credentials token issue, and bearer verification in three modes.

``auth.mode``:

* ``off`` — nobody is refused; the caller's identity (for rate limits and usage) is a hash of
  whatever ``Authorization`` header it sent, so an OpenAI client with any key works unchanged;
* ``api_key`` — ``Authorization: Bearer <key>`` must match one of ``auth.api_keys``;
* ``jwt`` — an RS256 token issued by ``POST /v1/auth/token`` and verified against the shared key
  ring (``keyring.py``).

Verification is deliberately narrow, because PyJWT checks ``exp``/``nbf``/``iat`` only when present
and ``iss`` only when asked: the header must say ``RS256`` and carry a ``kid`` of a verifying ring
key (checked before any cryptography, so ``alg: none`` and HS256-with-the-public-key never reach a
verifier); PyJWT then runs with the fixed algorithm list ``["RS256"]``, the audience, the issuer, a
small leeway and ``require`` on every claim we issue. Each refusal is a 401 with an OpenAI-style
body and a ``reason`` label on ``target_auth_failures_total``. Tokens and secrets are never logged
or echoed; the identity of a JWT caller is its ``sub``.
"""

from __future__ import annotations

import hashlib
import hmac
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import jwt

from target_service.errors import KidError, Unauthorized
from target_service.keyring import KeyRing
from target_service.metrics import TargetMetrics
from target_service.settings import AuthSettings

REQUIRED_CLAIMS = ["exp", "iat", "nbf", "iss", "aud", "sub"]
ALGORITHMS = ["RS256"]

_JWT_REASONS: list[tuple[type[jwt.InvalidTokenError], str, str]] = [
    (jwt.ExpiredSignatureError, "expired", "the access token has expired"),
    (jwt.ImmatureSignatureError, "not_yet_valid", "the access token is not yet valid"),
    (jwt.InvalidAudienceError, "audience", "the access token is for another audience"),
    (jwt.InvalidIssuerError, "issuer", "the access token has an unknown issuer"),
    (jwt.MissingRequiredClaimError, "missing_claim", "the access token lacks a required claim"),
    (jwt.InvalidSignatureError, "signature", "the access token's signature does not verify"),
    (jwt.DecodeError, "malformed", "the access token is malformed"),
]


def anonymous_identity(authorization: str) -> str:
    """A stable, non-secret name for a caller: a hash of its credential, never the credential."""
    if not authorization:
        return "anonymous"
    return "key-" + hashlib.sha256(authorization.encode()).hexdigest()[:16]


@dataclass(frozen=True, slots=True)
class Caller:
    identity: str
    auth_s: float


class Authenticator:
    def __init__(
        self,
        settings: AuthSettings,
        ring: KeyRing,
        metrics: TargetMetrics,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.settings = settings
        self.ring = ring
        self._metrics = metrics
        self._clock = clock

    def _refuse(self, reason: str, message: str, code: str = "invalid_token") -> Unauthorized:
        self._metrics.auth_failures_total.labels(reason).inc()
        return Unauthorized(
            message, code=code, headers={"www-authenticate": f'Bearer error="{code}"'}
        )

    # -- issue -------------------------------------------------------------------------------

    def check_client(self, client_id: str, client_secret: str) -> None:
        matched = False
        for client in self.settings.clients:
            # Compare every entry in constant time, so timing tells nothing about which failed.
            same_id = hmac.compare_digest(client.client_id.encode(), client_id.encode())
            same_secret = hmac.compare_digest(
                client.client_secret.get_secret_value().encode(), client_secret.encode()
            )
            matched |= same_id and same_secret
        if not matched:
            raise self._refuse(
                "invalid_client", "client authentication failed", code="invalid_client"
            )

    async def issue(self, client_id: str, client_secret: str) -> dict[str, Any]:
        self.check_client(client_id, client_secret)
        key = await self.ring.current()
        now = int(self._clock())
        claims = {
            "iss": self.settings.issuer,
            "aud": self.settings.audience,
            "sub": client_id,
            "iat": now,
            "nbf": now,
            "exp": now + self.settings.token_ttl_s,
            "jti": uuid.uuid4().hex,
        }
        token = jwt.encode(claims, key.rsa, algorithm="RS256", headers={"kid": key.kid})
        self._metrics.tokens_issued_total.inc()
        return {
            "access_token": token,
            "token_type": "Bearer",
            "expires_in": self.settings.token_ttl_s,
        }

    # -- verify ------------------------------------------------------------------------------

    async def authenticate(self, authorization: str) -> Caller:
        start = time.perf_counter()
        mode = self.settings.mode
        if mode == "off":
            identity = anonymous_identity(authorization)
        else:
            scheme, _, credential = authorization.partition(" ")
            credential = credential.strip()
            if scheme.lower() != "bearer" or not credential:
                raise self._refuse(
                    "missing", "missing bearer credential in the Authorization header"
                )
            if mode == "api_key":
                identity = self._check_api_key(credential)
            else:
                identity = await self._check_jwt(credential)
        return Caller(identity, time.perf_counter() - start)

    def _check_api_key(self, credential: str) -> str:
        matched = False
        for key in self.settings.api_keys:
            matched |= hmac.compare_digest(key.get_secret_value().encode(), credential.encode())
        if not matched:
            raise self._refuse("invalid_api_key", "incorrect API key provided", "invalid_api_key")
        return anonymous_identity(credential)

    async def _check_jwt(self, token: str) -> str:
        try:
            header = jwt.get_unverified_header(token)
        except jwt.InvalidTokenError:
            raise self._refuse("malformed", "the access token is malformed") from None
        if header.get("alg") not in ALGORITHMS:
            raise self._refuse("algorithm", "the access token's algorithm is not accepted")
        kid = header.get("kid")
        if not isinstance(kid, str):
            raise self._refuse("unknown_kid", "the access token has no key id")
        try:
            key = await self.ring.verifying_key(kid)
        except KidError as exc:
            raise self._refuse(exc.reason, str(exc)) from None
        try:
            claims = jwt.decode(
                token,
                key.rsa.public_key(),
                algorithms=ALGORITHMS,
                audience=self.settings.audience,
                issuer=self.settings.issuer,
                leeway=self.settings.leeway_s,
                options={"require": REQUIRED_CLAIMS},
            )
        except jwt.InvalidTokenError as exc:
            for kind, reason, message in _JWT_REASONS:
                if isinstance(exc, kind):
                    raise self._refuse(reason, message) from None
            raise self._refuse("invalid", "the access token is invalid") from None
        subject = claims["sub"]
        if not isinstance(subject, str) or not subject:
            raise self._refuse("missing_claim", "the access token lacks a required claim")
        return subject
