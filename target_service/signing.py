"""Per-response signatures, and the critical section of the study's §4.2.

What is signed: the UTF-8 bytes of ``<completion id> + "\\n" + <the full content text>`` (for a
stream, the concatenation of every ``delta.content``; for a plain response,
``choices[0].message.content``). RS256 is RSA-2048 PKCS#1 v1.5 with SHA-256 over those bytes,
EdDSA is Ed25519 over the same bytes; the key is the key ring's current key, published in the JWKS
under the ``kid`` given with the signature. A stream carries it in an SSE comment line before the
timing comment and ``data: [DONE]``::

    : ramplab-signature {"alg":"RS256","kid":"rs-…","sig":"<base64url>","digest":"sha256:<hex>"}

(``digest`` is SHA-256 of the signed bytes, a convenience for debugging, not part of what is
verified); a plain response carries ``x-ramplab-signature``, ``x-ramplab-signature-kid`` and
``x-ramplab-signature-alg`` headers.

Modes (``signing.mode``, switchable at run time):

* ``locked`` — one ``threading.Lock`` per process held while the signature is computed. The work
  runs on a thread pool, so the event loop keeps serving while requests pile up on the lock: that
  queue *is* the study's critical section, whose wait grows with concurrency;
* ``parallel`` — the same thread pool without the lock (RSA signing releases the GIL, so signatures
  run on every core);
* ``ed25519`` — Ed25519 in parallel, ~10× cheaper than RSA;
* ``off`` — no signature.

Timing, three parts: ``queue`` from asking for a signature on the event loop until a signing
thread runs it (thread hand-off, which includes waiting for the GIL), ``lock_wait`` blocked in
``Lock.acquire`` (``locked`` mode only — there is no lock to wait for otherwise, so it is 0) and
``sign`` the computation itself. ``work_factor`` computes that many signatures per response, to
make the section heavier on purpose.
"""

from __future__ import annotations

import asyncio
import base64
import hashlib
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric import padding

from target_service.keyring import KeyRing, RingKey
from target_service.metrics import TargetMetrics
from target_service.settings import SigningSettings

SIGNATURE_COMMENT = "ramplab-signature"


def signed_message(completion_id: str, content: str) -> bytes:
    return completion_id.encode() + b"\n" + content.encode("utf-8")


def b64url(raw: bytes) -> str:
    return base64.urlsafe_b64encode(raw).rstrip(b"=").decode()


@dataclass(frozen=True, slots=True)
class Signature:
    alg: str
    kid: str
    sig: bytes
    digest: str
    queue_s: float
    lock_wait_s: float
    sign_s: float

    def comment(self) -> dict[str, Any]:
        return {"alg": self.alg, "kid": self.kid, "sig": b64url(self.sig), "digest": self.digest}

    def headers(self) -> dict[str, str]:
        return {
            "x-ramplab-signature": b64url(self.sig),
            "x-ramplab-signature-kid": self.kid,
            "x-ramplab-signature-alg": self.alg,
        }


class Signer:
    """Signs responses in the configured mode; one per process."""

    def __init__(self, settings: SigningSettings, ring: KeyRing, metrics: TargetMetrics) -> None:
        self.settings = settings
        self.ring = ring
        self._metrics = metrics
        self._lock = threading.Lock()
        self.threads = settings.threads
        self._executor = ThreadPoolExecutor(max_workers=settings.threads, thread_name_prefix="sign")

    async def sign(self, message: bytes) -> Signature | None:
        mode = self.settings.mode
        if mode == "off":
            return None
        key = await self.ring.current()
        loop = asyncio.get_running_loop()
        rounds = self.settings.work_factor
        asked = time.perf_counter()
        sig, entered, started, ended = await loop.run_in_executor(
            self._executor, self._compute, mode, key, message, rounds
        )
        signature = Signature(
            alg="EdDSA" if mode == "ed25519" else "RS256",
            kid=key.ed_kid if mode == "ed25519" else key.kid,
            sig=sig,
            digest="sha256:" + hashlib.sha256(message).hexdigest(),
            queue_s=entered - asked,
            lock_wait_s=started - entered if mode == "locked" else 0.0,
            sign_s=ended - started,
        )
        self._metrics.sign_queue.observe(signature.queue_s)
        self._metrics.sign_lock_wait.observe(signature.lock_wait_s)
        self._metrics.sign_duration.labels(mode).observe(signature.sign_s)
        return signature

    def _compute(
        self, mode: str, key: RingKey, message: bytes, rounds: int
    ) -> tuple[bytes, float, float, float]:
        entered = time.perf_counter()
        if mode == "locked":
            with self._lock:
                started = time.perf_counter()
                sig = self._rsa(key, message, rounds)
                return sig, entered, started, time.perf_counter()
        started = entered
        if mode == "ed25519":
            for _ in range(rounds):
                sig = key.ed.sign(message)
        else:
            sig = self._rsa(key, message, rounds)
        return sig, entered, started, time.perf_counter()

    @staticmethod
    def _rsa(key: RingKey, message: bytes, rounds: int) -> bytes:
        for _ in range(rounds):
            sig = key.rsa.sign(message, padding.PKCS1v15(), hashes.SHA256())
        return sig

    def close(self) -> None:
        self._executor.shutdown(wait=False, cancel_futures=True)
