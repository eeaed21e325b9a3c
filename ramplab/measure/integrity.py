"""Content integrity on request: the server's per-response signature, and its deterministic text.

The reference target signs every response (``docs/target.md``, "Response signing"): the UTF-8
bytes of ``<completion id> + "\\n" + <full content text>`` — for a stream every ``delta.content``
concatenated, for a plain response ``choices[0].message.content`` — with RS256 (RSA PKCS#1 v1.5,
SHA-256) or EdDSA (Ed25519), the key found in ``/.well-known/jwks.json`` by ``kid``. A stream
carries the signature in an SSE comment before ``data: [DONE]``::

    : ramplab-signature {"alg":"RS256","kid":"rs-…","sig":"<base64url>",...}

a plain response in the ``x-ramplab-signature``, ``-kid`` and ``-alg`` headers.

The canonical-content rule is duplicated from ``target_service/signing.py`` on purpose (ramplab
never imports the target, and the target never imports ramplab);
``tests/ramplab/measure/test_integrity.py`` signs with the target's code and verifies with this one,
so the two cannot drift apart.

The target's text is also deterministic: each output token is a word drawn from a fixed
vocabulary by ``random.Random(seed)``, the seed being the request's ``seed`` or the one the
target reports in its final timing comment (``target_service/textgen.py``, duplicated here on
purpose as well, and kept equal by the same test module). ``--verify-text`` checks it.

Both are off by default (``--verify-signature``, ``--verify-text``): they are extensions of the
reference target. When asked for, a missing, malformed or wrong signature, or text that is not
the seed's, fails the request with the error kind ``integrity`` — never a silent success.
"""

from __future__ import annotations

import base64
import binascii
import random
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass

import httpx
import jwt
import orjson
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric import ed25519, padding, rsa

from ramplab.errors import IntegrityError

SIGNATURE_COMMENT = "ramplab-signature"
SIGNATURE_HEADER = "x-ramplab-signature"
ERROR_KIND = "integrity"
Clock = Callable[[], float]


def signed_message(completion_id: str, content: str) -> bytes:
    """The bytes the target signs: ``<completion id> + "\\n" + <content>``, UTF-8."""
    return completion_id.encode() + b"\n" + content.encode("utf-8")


def _b64url_decode(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


@dataclass(frozen=True, slots=True)
class Signature:
    """A signature as the server sent it."""

    alg: str
    kid: str
    sig: bytes

    @classmethod
    def from_comment(cls, payload: str) -> Signature:
        """The JSON of a ``: ramplab-signature {...}`` comment line."""
        try:
            data = orjson.loads(payload)
            return cls(str(data["alg"]), str(data["kid"]), _b64url_decode(str(data["sig"])))
        except (orjson.JSONDecodeError, KeyError, TypeError, ValueError, binascii.Error) as exc:
            raise IntegrityError(f"unreadable signature comment: {payload[:200]!r}") from exc

    @classmethod
    def from_headers(cls, headers: Mapping[str, str]) -> Signature | None:
        """The ``x-ramplab-signature*`` headers of a plain response; None when there are none."""
        sig = headers.get(SIGNATURE_HEADER)
        if sig is None:
            return None
        try:
            return cls(
                headers.get(SIGNATURE_HEADER + "-alg", ""),
                headers.get(SIGNATURE_HEADER + "-kid", ""),
                _b64url_decode(sig),
            )
        except (ValueError, binascii.Error) as exc:
            raise IntegrityError(f"unreadable signature header: {sig[:200]!r}") from exc


PublicKey = rsa.RSAPublicKey | ed25519.Ed25519PublicKey


class JwksKeys:
    """Public keys by ``kid`` from a JWKS URL, fetched again when an unknown ``kid`` shows up.

    A key rotation publishes the next key ahead of its use, so one fetch usually serves a whole
    period; a refetch is attempted at most once per ``min_refetch_s`` so a bad ``kid`` cannot
    turn every response into a JWKS request. Shared by every user of a process.
    """

    def __init__(
        self,
        client: httpx.Client,
        url: str,
        headers: Mapping[str, str] | None = None,
        min_refetch_s: float = 1.0,
        clock: Clock = time.monotonic,
    ) -> None:
        self.client = client
        self.url = url
        self.headers = dict(headers or {})
        self.min_refetch_s = min_refetch_s
        self.clock = clock
        self._keys: dict[str, PublicKey] = {}
        self._fetched_at: float | None = None
        self._lock = threading.Lock()
        self.fetches = 0

    def get(self, kid: str) -> PublicKey:
        key = self._keys.get(kid)
        if key is not None:
            return key
        with self._lock:
            key = self._keys.get(kid)
            if key is None:
                now = self.clock()
                if self._fetched_at is None or now - self._fetched_at >= self.min_refetch_s:
                    self._fetched_at = now
                    self._keys = self._fetch()
                key = self._keys.get(kid)
        if key is None:
            raise IntegrityError(f"kid {kid!r} is not in the JWKS at {self.url}")
        return key

    def _fetch(self) -> dict[str, PublicKey]:
        self.fetches += 1
        try:
            response = self.client.get(self.url, headers=self.headers)
            response.raise_for_status()
            entries = response.json()["keys"]
        except (httpx.HTTPError, ValueError, KeyError, TypeError) as exc:
            raise IntegrityError(f"JWKS {self.url} unusable: {exc}") from exc
        keys: dict[str, PublicKey] = {}
        for entry in entries:
            try:
                key = jwt.PyJWK(entry).key
            except (jwt.PyJWTError, KeyError, TypeError, ValueError):
                continue  # a key type we cannot use cannot have signed anything we check
            if isinstance(key, rsa.RSAPublicKey | ed25519.Ed25519PublicKey) and "kid" in entry:
                keys[str(entry["kid"])] = key
        return keys


_SYLLABLES = ("ka", "lo", "mi", "ren", "tu", "sa", "vel", "no", "qui", "dra", "fen", "zo", "ith")


def _vocabulary(size: int = 2048) -> tuple[str, ...]:
    rng = random.Random(20240607)
    words = {
        "".join(rng.choice(_SYLLABLES) for _ in range(rng.randint(1, 3))) for _ in range(size * 2)
    }
    return tuple(" " + word for word in sorted(words)[:size])


_VOCABULARY = _vocabulary()


def expected_text(seed: int, tokens: int) -> str:
    """The reference target's output for ``seed``: ``tokens`` words, each with a leading space."""
    return "".join(random.Random(seed).choices(_VOCABULARY, k=tokens))


class Verifier:
    """Checks one response's content: its signature (``keys`` given), its text (``text``)."""

    def __init__(self, keys: JwksKeys | None, text: bool = False) -> None:
        self.keys = keys
        self.text = text

    def check(
        self,
        completion_id: str | None,
        content: str,
        signature: Signature | None,
        seed: int | None,
        tokens: int | None,
    ) -> None:
        """Every check asked for; raises ``IntegrityError`` naming the first that fails."""
        if self.keys is not None:
            self.verify(completion_id, content, signature)
        if self.text:
            if seed is None or tokens is None:
                raise IntegrityError("the response declares no seed and token count to check")
            if content != expected_text(seed, tokens):
                raise IntegrityError(
                    f"the text is not the {tokens} tokens of seed {seed} "
                    f"({len(content)} characters received)"
                )

    def verify(self, completion_id: str | None, content: str, signature: Signature | None) -> None:
        """Raises ``IntegrityError`` naming what is wrong; returns when the signature holds."""
        if signature is None:
            raise IntegrityError("the response carries no signature")
        if not completion_id:
            raise IntegrityError("the response carries no completion id to check")
        if self.keys is None:
            raise IntegrityError("no JWKS to verify the signature with")
        key = self.keys.get(signature.kid)
        message = signed_message(completion_id, content)
        try:
            if signature.alg == "RS256" and isinstance(key, rsa.RSAPublicKey):
                key.verify(signature.sig, message, padding.PKCS1v15(), hashes.SHA256())
            elif signature.alg == "EdDSA" and isinstance(key, ed25519.Ed25519PublicKey):
                key.verify(signature.sig, message)
            else:
                raise IntegrityError(
                    f"algorithm {signature.alg!r} does not match the JWKS key {signature.kid!r}"
                )
        except InvalidSignature:
            raise IntegrityError(
                f"{signature.alg} signature by {signature.kid!r} does not match the content "
                f"of {completion_id} ({len(content)} characters)"
            ) from None
