"""The JWT key ring, shared by every worker process through Redis.

Time is cut into periods of ``jwt_rotation_seconds``; period ``e`` (``e = ⌊now / P⌋``, wall clock,
which all processes of a host share) has its own key pair, RSA-2048 for JWTs and response
signatures plus an Ed25519 pair for the ``ed25519`` signing mode. The key of period ``e``:

* is **published** (JWKS, "next") from the start of period ``e − 1``, a whole period before it signs
  anything, so a client whose JWKS cache is younger than ``P`` already knows it;
* **signs** during period ``e``;
* keeps **verifying** during period ``e + 1`` ("previous"), which covers every token it signed
  because ``token_ttl_s ≤ P`` (validated in settings);
* is **retired** from period ``e + 2``: tokens carrying its ``kid`` are refused.

Agreement across processes: a period's keys live in Redis at ``<prefix>jwt:<P>:<e>`` (JSON with
the private keys as PKCS#8 PEM — the ring is the shared secret of the target's processes, so it
lives in the target's own Redis and never in logs). Exactly one process generates them: it takes
``SET <key>:lock NX PX`` and writes the keys with ``SET NX``; the others poll for the record. The
``SET NX`` on the record, not the lock, is what guarantees a single winner, so a lock holder that
dies only costs the others a short wait before they generate (and race with ``NX``) themselves.
Each process caches the records it has read; the request path touches Redis only when the period
changes (a background task fetches the next period's keys ahead of time).
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import logging
import secrets
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import orjson
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ed25519, rsa

from target_service.errors import KidError, RedisUnavailable
from target_service.metrics import TargetMetrics
from target_service.redis_pool import RedisPool

log = logging.getLogger("target_service.keyring")
Clock = Callable[[], float]


def _b64url_uint(value: int) -> str:
    raw = value.to_bytes((value.bit_length() + 7) // 8, "big")
    return base64.urlsafe_b64encode(raw).rstrip(b"=").decode()


@dataclass(frozen=True, slots=True)
class RingKey:
    """One period's key pairs."""

    epoch: int
    kid: str
    rsa: rsa.RSAPrivateKey
    ed_kid: str
    ed: ed25519.Ed25519PrivateKey

    def public_jwks(self) -> list[dict[str, str]]:
        numbers = self.rsa.public_key().public_numbers()
        ed_raw = self.ed.public_key().public_bytes(
            serialization.Encoding.Raw, serialization.PublicFormat.Raw
        )
        return [
            {
                "kty": "RSA",
                "use": "sig",
                "alg": "RS256",
                "kid": self.kid,
                "n": _b64url_uint(numbers.n),
                "e": _b64url_uint(numbers.e),
            },
            {
                "kty": "OKP",
                "crv": "Ed25519",
                "use": "sig",
                "alg": "EdDSA",
                "kid": self.ed_kid,
                "x": base64.urlsafe_b64encode(ed_raw).rstrip(b"=").decode(),
            },
        ]

    def to_record(self) -> bytes:
        pem = serialization.Encoding.PEM
        pkcs8 = serialization.PrivateFormat.PKCS8
        none = serialization.NoEncryption()
        return orjson.dumps(
            {
                "epoch": self.epoch,
                "kid": self.kid,
                "rsa": self.rsa.private_bytes(pem, pkcs8, none).decode(),
                "ed_kid": self.ed_kid,
                "ed": self.ed.private_bytes(pem, pkcs8, none).decode(),
            }
        )

    @classmethod
    def from_record(cls, raw: bytes) -> RingKey:
        data: dict[str, Any] = orjson.loads(raw)
        rsa_key = serialization.load_pem_private_key(data["rsa"].encode(), None)
        ed_key = serialization.load_pem_private_key(data["ed"].encode(), None)
        assert isinstance(rsa_key, rsa.RSAPrivateKey)
        assert isinstance(ed_key, ed25519.Ed25519PrivateKey)
        return cls(int(data["epoch"]), data["kid"], rsa_key, data["ed_kid"], ed_key)

    @classmethod
    def generate(cls, epoch: int) -> RingKey:
        suffix = secrets.token_hex(4)
        return cls(
            epoch,
            f"rs-{epoch}-{suffix}",
            rsa.generate_private_key(public_exponent=65537, key_size=2048),
            f"ed-{epoch}-{suffix}",
            ed25519.Ed25519PrivateKey.generate(),
        )


def kid_epoch(kid: str) -> int | None:
    parts = kid.split("-")
    if len(parts) != 3 or parts[0] not in ("rs", "ed") or not parts[1].isdigit():
        return None
    return int(parts[1])


class KeyRing:
    """This process's view of the shared ring."""

    def __init__(
        self,
        pool: RedisPool,
        prefix: str,
        period_s: int,
        metrics: TargetMetrics,
        clock: Clock = time.time,
        poll_s: float = 0.02,
        lock_ms: int = 10_000,
    ) -> None:
        self._pool = pool
        self._prefix = f"{prefix}jwt:{period_s}:"
        self.period_s = period_s
        self._metrics = metrics
        self._clock = clock
        self._poll_s = poll_s
        self._lock_ms = lock_ms
        self._cache: dict[int, RingKey] = {}
        self._generating: dict[int, asyncio.Task[RingKey]] = {}

    def epoch(self) -> int:
        return int(self._clock() // self.period_s)

    async def current(self) -> RingKey:
        """The key that signs now."""
        return await self.get(self.epoch(), create=True)

    async def get(self, epoch: int, create: bool) -> RingKey:
        cached = self._cache.get(epoch)
        if cached is not None:
            return cached
        found = await self._read(epoch)
        if found is None:
            if not create:
                raise KeyError(epoch)
            # One generation per period and process, however many requests ask at once.
            task = self._generating.get(epoch)
            if task is None:
                task = asyncio.ensure_future(self._create(epoch))
                self._generating[epoch] = task
                task.add_done_callback(lambda _: self._generating.pop(epoch, None))
            found = await asyncio.shield(task)
        self._cache[epoch] = found
        for old in [e for e in self._cache if e < epoch - 2]:
            del self._cache[old]
        return found

    async def verifying_key(self, kid: str) -> RingKey:
        """The ring key whose RSA ``kid`` is ``kid``, if it still verifies."""
        epoch = kid_epoch(kid)
        now = self.epoch()
        if epoch is None or epoch > now + 1:
            raise KidError("unknown_kid", "the token's key id is not in the key ring")
        if epoch < now - 1:
            raise KidError("retired_key", "the token was signed by a retired key")
        try:
            key = await self.get(epoch, create=False)
        except KeyError:
            raise KidError("unknown_kid", "the token's key id is not in the key ring") from None
        if key.kid != kid:
            raise KidError("unknown_kid", "the token's key id is not in the key ring")
        return key

    async def published(self) -> list[RingKey]:
        """Previous (if it exists), current and next keys, oldest first."""
        now = self.epoch()
        keys: list[RingKey] = []
        with contextlib.suppress(KeyError):
            keys.append(await self.get(now - 1, create=False))
        keys.append(await self.get(now, create=True))
        keys.append(await self.get(now + 1, create=True))
        return keys

    async def maintain(self) -> None:
        """Background task: keep the current and next periods' keys fetched ahead of use."""
        while True:
            try:
                await self.published()
            except RedisUnavailable as exc:
                log.warning("key ring refresh failed: %s", exc)
            await asyncio.sleep(min(self.period_s / 4, 5.0))

    def _key(self, epoch: int) -> str:
        return f"{self._prefix}{epoch}"

    async def _read(self, epoch: int) -> RingKey | None:
        raw = await self._pool.run("keyring_get", lambda r: r.get(self._key(epoch)))
        return (
            None
            if raw is None
            else RingKey.from_record(raw.encode() if isinstance(raw, str) else raw)
        )

    async def _create(self, epoch: int) -> RingKey:
        key = self._key(epoch)
        # Alive while it signs or verifies (periods e−1 … e+1), plus slack for a slow clock.
        ttl_ms = int(self.period_s * 4 * 1000)
        got_lock = await self._pool.run(
            "keyring_lock",
            lambda r: r.set(key + ":lock", str(self._clock()), nx=True, px=self._lock_ms),
        )
        if not got_lock:
            deadline = time.monotonic() + self._lock_ms / 1000
            while time.monotonic() < deadline:
                await asyncio.sleep(self._poll_s)
                found = await self._read(epoch)
                if found is not None:
                    return found
        fresh = await asyncio.to_thread(RingKey.generate, epoch)
        record = fresh.to_record()
        won = await self._pool.run("keyring_set", lambda r: r.set(key, record, nx=True, px=ttl_ms))
        if won:
            self._metrics.key_rotations_total.inc()
            log.info("generated key ring period %d (kid %s)", epoch, fresh.kid)
            return fresh
        stored = await self._read(epoch)
        if stored is None:
            raise RedisUnavailable("keyring_get", LookupError("record vanished"))
        return stored
