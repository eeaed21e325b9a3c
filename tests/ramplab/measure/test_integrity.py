"""Content integrity (``--verify-signature``, ``--verify-text``): the target's signatures and text
verify, tampering fails.

ramplab duplicates the target's canonical-content and text rules on purpose (neither package
imports the other); tests sign and generate with the target's own code and check with ramplab's,
so the copies cannot drift apart. Then the real target in each signing mode, and purpose-built
servers that tamper with content, signature, key id or text.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import httpx
import orjson
import pytest
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric import padding

from ramplab.measure.chain import Endpoint, RequestChain
from ramplab.measure.client import ClientOptions, make_client
from ramplab.measure.integrity import (
    IntegrityError,
    JwksKeys,
    Signature,
    Verifier,
    expected_text,
    signed_message,
)
from ramplab.measure.record import RequestRecord
from ramplab.options.settings import UserSettings
from ramplab.plugin.context import UserContext
from target_service import signing as target_signing
from target_service.keyring import RingKey
from target_service.textgen import generate_tokens
from tests.support.processes import REPO, TargetProcess
from tests.support.records import run_records
from tests.support.targets import ThreadTarget, settings_from_env
from tests.support.tiny_server import DONE, ROLE, Reply, TinyServer, usage

KEY = RingKey.generate(1)
CONTENTS = ["", "Hello world", " naïve — ünïcødé 🚀", "two\nlines\r\n", "x" * 5000]


def target_signature(completion_id: str, content: str, alg: str = "RS256") -> Signature:
    """Signed by the target's code, encoded the way the target sends it, read by ramplab."""
    message = target_signing.signed_message(completion_id, content)
    if alg == "RS256":
        sig, kid = KEY.rsa.sign(message, padding.PKCS1v15(), hashes.SHA256()), KEY.kid
    else:
        sig, kid = KEY.ed.sign(message), KEY.ed_kid
    signed = target_signing.Signature(alg, kid, sig, "sha256:-", 0.0, 0.0, 0.0)
    return Signature.from_comment(orjson.dumps(signed.comment()).decode())


def jwks_reply(method: str, path: str, headers: dict[str, str], body: bytes) -> Reply:
    keys = {"keys": KEY.public_jwks()}
    return Reply(200, {"content-type": "application/json"}, [orjson.dumps(keys)])


@pytest.fixture(scope="module")
def jwks_server() -> Iterator[TinyServer]:
    with TinyServer(jwks_reply) as srv:
        yield srv


def test_canonical_rule_is_the_targets() -> None:
    for content in CONTENTS:
        for completion_id in ("chatcmpl-abc", "chatcmpl-ü"):
            assert signed_message(completion_id, content) == target_signing.signed_message(
                completion_id, content
            )


@pytest.mark.parametrize("alg", ["RS256", "EdDSA"])
def test_target_signatures_verify_with_ramplab(jwks_server: TinyServer, alg: str) -> None:
    with httpx.Client() as client:
        keys = JwksKeys(client, jwks_server.url + "/.well-known/jwks.json")
        verifier = Verifier(keys)
        for content in CONTENTS:
            verifier.verify("chatcmpl-1", content, target_signature("chatcmpl-1", content, alg))
            with pytest.raises(IntegrityError, match="does not match the content"):
                verifier.verify(
                    "chatcmpl-1", content + ".", target_signature("chatcmpl-1", content, alg)
                )
            with pytest.raises(IntegrityError, match="does not match the content"):
                verifier.verify("chatcmpl-2", content, target_signature("chatcmpl-1", content, alg))
        # Plain responses carry the same signature in headers.
        message = target_signing.signed_message("chatcmpl-9", "plain")
        sig = (
            KEY.ed.sign(message)
            if alg == "EdDSA"
            else KEY.rsa.sign(message, padding.PKCS1v15(), hashes.SHA256())
        )
        kid = KEY.ed_kid if alg == "EdDSA" else KEY.kid
        headers = target_signing.Signature(alg, kid, sig, "-", 0.0, 0.0, 0.0).headers()
        verifier.verify("chatcmpl-9", "plain", Signature.from_headers(headers))
        assert keys.fetches == 1  # one JWKS fetch served every check


def _stream_body() -> dict[str, object]:
    return {
        "model": "ramplab-sim-1",
        "messages": [{"role": "user", "content": "sign this"}],
        "max_tokens": 9,
        "ignore_eos": True,
        "stream": True,
        "stream_options": {"include_usage": True},
        "chunk_size": 2,
    }


def _run(url: str, body: dict[str, object], n: int) -> list[RequestRecord]:
    with make_client(ClientOptions()) as client:
        verifier = Verifier(JwksKeys(client, url + "/.well-known/jwks.json"))
        chain = RequestChain(
            client, Endpoint(url + "/v1/chat/completions", 10.0), verifier=verifier
        )
        return [chain.run(body) for _ in range(n)]


@pytest.mark.parametrize("mode", ["locked", "parallel", "ed25519"])
def test_real_target_signatures_verify_in_each_mode(mode: str) -> None:
    env = {"APP_SIGNING__MODE": mode, "APP_LATENCY__ITL_MS": "1"}
    with ThreadTarget(settings_from_env(env)) as target:
        streamed = _run(target.url, _stream_body(), 4)
        plain = _run(target.url, {**_stream_body(), "stream": False, "stream_options": None}, 2)
    for record in streamed + plain:
        assert record.ok, record.error_detail
        assert record.integrity == "verified"
        assert record.output_tokens == 9


def test_unsigned_target_fails_integrity_when_asked() -> None:
    env = {"APP_SIGNING__MODE": "off", "APP_LATENCY__ITL_MS": "1"}
    with ThreadTarget(settings_from_env(env)) as target:
        (record,) = _run(target.url, _stream_body(), 1)
        with make_client(ClientOptions()) as client:
            unchecked = RequestChain(client, Endpoint(target.url + "/v1/chat/completions")).run(
                _stream_body()
            )
    assert record.error_kind == "integrity"
    assert record.integrity == "failed"
    assert record.error_detail is not None
    assert "no signature" in record.error_detail
    assert record.ttft_ms is not None  # the timings are kept
    assert unchecked.ok  # without --verify-signature nothing is checked
    assert unchecked.integrity is None


def _event(completion_id: str, text: str) -> bytes:
    data = {"id": completion_id, "choices": [{"index": 0, "delta": {"content": text}}]}
    return b"data: " + json.dumps(data).encode() + b"\n\n"


def _comment(signature: Signature | dict[str, str]) -> bytes:
    payload = signature
    if isinstance(signature, Signature):
        sig = target_signing.b64url(signature.sig)
        payload = {"alg": signature.alg, "kid": signature.kid, "sig": sig}
    return b": ramplab-signature " + json.dumps(payload).encode() + b"\n\n"


def tamper_handler(method: str, path: str, headers: dict[str, str], body: bytes) -> Reply:
    if path == "/.well-known/jwks.json":
        return jwks_reply(method, path, headers, body)
    cid = "chatcmpl-t"
    sent = [_event(cid, "Hello"), _event(cid, " world")]
    kind = headers.get("x-case", "")
    signs = {
        "good": target_signature(cid, "Hello world"),
        "good_ed": target_signature(cid, "Hello world", "EdDSA"),
        "content": target_signature(cid, "Hello world!"),  # the server signed other text
        "id": target_signature("chatcmpl-u", "Hello world"),
    }
    if kind in signs:
        tail = [_comment(signs[kind])]
    elif kind == "kid":
        good = target_signature(cid, "Hello world")
        tail = [_comment(Signature(good.alg, "rs-unknown", good.sig))]
    elif kind == "alg":  # an RSA signature claimed as EdDSA
        good = target_signature(cid, "Hello world")
        tail = [_comment(Signature("EdDSA", good.kid, good.sig))]
    elif kind == "garbled":
        tail = [b": ramplab-signature {not json\n\n"]
    else:
        tail = []  # no signature at all
    return Reply(body=[ROLE, *sent, usage(2), *tail, DONE])


@pytest.mark.parametrize(
    ("case", "problem"),
    [
        ("content", "does not match the content"),
        ("id", "does not match the content"),
        ("kid", "not in the JWKS"),
        ("alg", "does not match the JWKS key"),
        ("garbled", "unreadable signature"),
        ("none", "no signature"),
    ],
)
def test_tampered_responses_fail_as_integrity(case: str, problem: str) -> None:
    with TinyServer(tamper_handler) as srv, make_client(ClientOptions()) as client:
        verifier = Verifier(JwksKeys(client, srv.url + "/.well-known/jwks.json"))
        chain = RequestChain(
            client, Endpoint(srv.url + "/v1/chat/completions", 5.0), verifier=verifier
        )
        good = chain.run(_stream_body(), {"x-case": "good"})
        good_ed = chain.run(_stream_body(), {"x-case": "good_ed"})
        bad = chain.run(_stream_body(), {"x-case": case})
    assert good.ok, good.error_detail  # the control cases
    assert good.integrity == "verified"
    assert good_ed.ok, good_ed.error_detail
    assert good_ed.integrity == "verified"
    assert not bad.ok
    assert bad.error_kind == "integrity"
    assert bad.integrity == "failed"
    assert bad.error_detail is not None
    assert problem in bad.error_detail
    assert bad.status == 200
    assert bad.output_tokens == 2  # everything measured is kept
    assert bad.ttft_ms is not None
    assert bad.ttlt_ms is not None


def test_option_builds_one_verifier_per_process(jwks_server: TinyServer) -> None:
    context = UserContext.create(
        UserSettings(model="m", verify_signature=True), jwks_server.url, "w"
    )
    assert context.verifier is not None
    assert context.verifier.keys.url == jwks_server.url + "/.well-known/jwks.json"
    assert UserContext.create(UserSettings(model="m"), jwks_server.url, "w").verifier is None


@pytest.mark.slow
def test_locust_run_with_verify_signature(tmp_path: Path) -> None:
    with TargetProcess({"APP_SIGNING__MODE": "ed25519", "APP_LATENCY__ITL_MS": "2"}) as target:
        done = subprocess.run(
            [sys.executable, "-m", "locust", "-f", "locustfiles/llm_stream.py",
             "--host", target.url, "--headless", "-u", "2", "-r", "2", "-t", "3s",
             "--max-tokens", "8", "--ignore-eos",
             "--verify-signature", "--results-dir", str(tmp_path), "--only-summary"],
            cwd=REPO, capture_output=True, text=True, timeout=60, check=False,
        )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    lines = run_records(tmp_path)
    ended = [r for r in lines if r["error_kind"] != "unfinished"]  # ``-t`` cuts the last ones
    assert ended
    assert all(r["ok"] and r["integrity"] == "verified" for r in ended)


def test_text_rule_is_the_targets() -> None:
    for seed in (0, 1, 12345, 2**31 + 7):
        for tokens in (0, 1, 7, 300):
            assert expected_text(seed, tokens) == "".join(generate_tokens(seed, tokens))


def test_real_target_text_verifies_with_the_reported_or_requested_seed() -> None:
    env = {"APP_SIGNING__MODE": "off", "APP_LATENCY__ITL_MS": "1"}
    with ThreadTarget(settings_from_env(env)) as target, make_client(ClientOptions()) as client:
        chain = RequestChain(
            client,
            Endpoint(target.url + "/v1/chat/completions", 10.0),
            verifier=Verifier(None, text=True),
        )
        streamed = [chain.run(_stream_body()) for _ in range(3)]  # the target picks a seed
        plain = {**_stream_body(), "stream": False, "stream_options": None}
        seeded = chain.run({**plain, "seed": 42})
        unseeded = chain.run(plain)
    for record in [*streamed, seeded]:
        assert record.ok, record.error_detail
        assert record.integrity == "verified"
    assert unseeded.error_kind == "integrity"  # a plain response reports no seed of its own
    assert unseeded.error_detail is not None
    assert "no seed" in unseeded.error_detail


def _seeded_stream(text_parts: list[str], seed: int) -> Reply:
    timing = b': ramplab-timing {"seed": %d}\n\n' % seed
    events = [_event("chatcmpl-s", part) for part in text_parts]
    return Reply(body=[ROLE, *events, usage(len(text_parts)), timing, DONE])


def test_text_not_of_the_seed_fails_as_integrity() -> None:
    words = [generate_tokens(3, 2)[0], generate_tokens(3, 2)[1]]

    def handler(method: str, path: str, headers: dict[str, str], body: bytes) -> Reply:
        if headers.get("x-case") == "good":
            return _seeded_stream(words, 3)
        return _seeded_stream([words[0], " tampered"], 3)

    with TinyServer(handler) as srv, make_client(ClientOptions()) as client:
        chain = RequestChain(
            client, Endpoint(srv.url + "/x", 5.0), verifier=Verifier(None, text=True)
        )
        good = chain.run(_stream_body(), {"x-case": "good"})
        bad = chain.run(_stream_body(), {"x-case": "bad"})
    assert good.ok, good.error_detail
    assert good.integrity == "verified"
    assert bad.error_kind == "integrity"
    assert bad.error_detail is not None
    assert "not the 2 tokens of seed 3" in bad.error_detail
