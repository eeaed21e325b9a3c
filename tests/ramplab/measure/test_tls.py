"""HTTPS: verification on by default, a CA bundle or an explicit switch to pass, TLS timed.

The certificate is made by the test (cryptography), for 127.0.0.1 and localhost.
"""

from __future__ import annotations

import datetime as dt
import ipaddress
import ssl
from collections.abc import Iterator
from pathlib import Path

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from ramplab.measure.chain import Endpoint, RequestChain
from ramplab.measure.client import ClientOptions, make_client
from ramplab.measure.record import RequestRecord
from tests.support.tiny_server import DONE, ROLE, Reply, TinyServer, chunk, usage

BODY = {"model": "m", "messages": [{"role": "user", "content": "hi"}], "stream": True}


def make_cert(directory: Path) -> tuple[Path, Path]:
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "ramplab test")])
    now = dt.datetime.now(dt.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - dt.timedelta(minutes=5))
        .not_valid_after(now + dt.timedelta(hours=1))
        .add_extension(
            x509.SubjectAlternativeName(
                [x509.IPAddress(ipaddress.ip_address("127.0.0.1")), x509.DNSName("localhost")]
            ),
            critical=False,
        )
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(key, hashes.SHA256())
    )
    cert_path, key_path = directory / "cert.pem", directory / "key.pem"
    cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_path.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    return cert_path, key_path


def handler(method: str, path: str, headers: dict[str, str], body: bytes) -> Reply:
    return Reply(
        headers={"server-timing": "queue;dur=1.5, prefill;dur=2.25"},
        body=[ROLE, chunk(" a"), chunk(" b"), usage(2), DONE],
    )


@pytest.fixture(scope="module")
def cert(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    return make_cert(tmp_path_factory.mktemp("tls"))


@pytest.fixture(scope="module")
def server(cert: tuple[Path, Path]) -> Iterator[TinyServer]:
    ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    ctx.load_cert_chain(*cert)
    with TinyServer(handler, ctx) as srv:
        yield srv


def run(url: str, options: ClientOptions, n: int = 1) -> list[RequestRecord]:
    with make_client(options) as client:
        chain = RequestChain(client, Endpoint(url, 5.0))
        return [chain.run(BODY) for _ in range(n)]


def test_verification_is_on_by_default(server: TinyServer) -> None:
    (record,) = run(server.url + "/v1/chat/completions", ClientOptions())
    assert not record.ok
    assert record.error_kind == "tls_error"
    assert "CERTIFICATE_VERIFY_FAILED" in (record.error_detail or "")


def test_ca_file_verifies_and_tls_is_timed(server: TinyServer, cert: tuple[Path, Path]) -> None:
    (record,) = run(server.url + "/v1/chat/completions", ClientOptions(ca_file=str(cert[0])))
    assert record.ok, record.error_detail
    assert record.phases_ms["tls"] > 0
    assert record.phases_ms["connect"] > 0
    assert record.server_timing_ms == {"queue": 1.5, "prefill": 2.25}


def test_insecure_switch_turns_verification_off(server: TinyServer) -> None:
    (record,) = run(server.url + "/v1/chat/completions", ClientOptions(verify_tls=False))
    assert record.ok, record.error_detail
    assert record.phases_ms["tls"] > 0


def test_connection_reuse_switch(server: TinyServer, cert: tuple[Path, Path]) -> None:
    url = server.url + "/v1/chat/completions"
    before = server.connections
    reused = run(url, ClientOptions(ca_file=str(cert[0])), n=3)
    assert server.connections - before == 1
    assert [r.phases_ms["tls"] > 0 for r in reused] == [True, False, False]
    before = server.connections
    fresh = run(url, ClientOptions(ca_file=str(cert[0]), reuse_connections=False), n=3)
    assert server.connections - before == 3
    assert all(r.phases_ms["tls"] > 0 and r.phases_ms["connect"] > 0 for r in fresh)


def test_dns_is_timed_and_cached(server: TinyServer, cert: tuple[Path, Path]) -> None:
    url = f"https://localhost:{server.port}/v1/chat/completions"
    options = ClientOptions(ca_file=str(cert[0]), reuse_connections=False)
    cached = run(url, options, n=2)
    assert all(r.ok for r in cached), [r.error_detail for r in cached]
    assert cached[0].phases_ms["dns"] > 0
    assert cached[1].phases_ms["dns"] < cached[0].phases_ms["dns"]
    uncached = run(
        url, ClientOptions(ca_file=str(cert[0]), reuse_connections=False, dns_cache=False), n=2
    )
    assert all(r.phases_ms["dns"] > 0 for r in uncached)
