"""HTTPS for the reference target: the certificate it serves, given or generated at start.

Two ways, both checked before uvicorn starts so a bad setting stops the process with exit 2
naming the key, never a traceback from deep inside the TLS library:

- **given**: ``tls.cert_file`` and ``tls.key_file`` (PEM); the pair is loaded once here, so a
  key that does not belong to the certificate is refused at start-up;
- **generated** (neither given): a throw-away certificate authority and a server certificate it
  signs, for ``tls.hostnames`` (names and IP addresses), made fresh at every start and never
  written anywhere but a private temporary directory — plus ``tls.ca_file`` when set, the CA's
  certificate that clients trust (``ramplab --ca-file``). A CA and a leaf rather than one
  self-signed leaf: OpenSSL's strict verification (Python ≥ 3.13's default) refuses a leaf that
  doubles as its own trust anchor.

ECDSA P-256 keys: a handshake costs the same order as on real deployments, and generating them
takes milliseconds, so a start-up stays fast.
"""

from __future__ import annotations

import datetime
import ipaddress
import os
import shutil
import ssl
import tempfile
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from target_service.errors import SettingsError
from target_service.settings import TlsSettings

__all__ = ["TlsFiles", "prepare_tls"]

VALIDITY = datetime.timedelta(days=2)


@dataclass(frozen=True, slots=True)
class TlsFiles:
    """What uvicorn serves (``ssl_certfile``, ``ssl_keyfile``); ``scratch`` is removed at exit."""

    cert_file: str
    key_file: str
    scratch: str | None = None

    def close(self) -> None:
        if self.scratch is not None:
            shutil.rmtree(self.scratch, ignore_errors=True)


def prepare_tls(settings: TlsSettings, *, generate: bool = True) -> TlsFiles | None:
    """The files to serve HTTPS with, or ``None`` when TLS is off. ``generate=False`` (``--check``)
    only validates: given files are loaded, nothing is generated or written."""
    if not settings.enabled:
        return None
    if settings.cert_file is not None and settings.key_file is not None:
        _check_pair(settings.cert_file, settings.key_file)
        return TlsFiles(settings.cert_file, settings.key_file)
    if not generate:
        return None
    scratch = tempfile.mkdtemp(prefix="ramplab-target-tls-")
    ca_key, ca_cert = _authority()
    key, cert = _server(ca_key, ca_cert, settings.hostnames)
    cert_file = Path(scratch, "cert.pem")
    key_file = Path(scratch, "key.pem")
    cert_file.write_bytes(_pem(cert) + _pem(ca_cert))
    key_file.touch(mode=0o600)
    key_file.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    if settings.ca_file is not None:
        _write_atomically(Path(settings.ca_file), _pem(ca_cert))
    return TlsFiles(str(cert_file), str(key_file), scratch)


def _check_pair(cert_file: str, key_file: str) -> None:
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    try:
        context.load_cert_chain(cert_file, key_file)
    except ssl.SSLError as exc:
        raise SettingsError(
            f"invalid settings: tls.key_file={key_file!r} (env APP_TLS__KEY_FILE): not the "
            f"private key of tls.cert_file={cert_file!r}, or not PEM ({exc.reason or exc})"
        ) from None
    except OSError as exc:
        raise SettingsError(
            f"invalid settings: tls.cert_file={cert_file!r} / tls.key_file={key_file!r}: "
            f"{exc.strerror}"
        ) from None


def _pem(cert: x509.Certificate) -> bytes:
    return cert.public_bytes(serialization.Encoding.PEM)


def _write_atomically(path: Path, data: bytes) -> None:
    # A client started as soon as the target answers must never read half a certificate.
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + f".{os.getpid()}.tmp")
    tmp.write_bytes(data)
    os.replace(tmp, path)


def _now() -> datetime.datetime:
    return datetime.datetime.now(datetime.UTC)


_CA_USAGE = x509.KeyUsage(
    digital_signature=False, content_commitment=False, key_encipherment=False,
    data_encipherment=False, key_agreement=False, key_cert_sign=True, crl_sign=True,
    encipher_only=False, decipher_only=False,
)  # fmt: skip


_CA_USAGE = x509.KeyUsage(
    digital_signature=False, content_commitment=False, key_encipherment=False,
    data_encipherment=False, key_agreement=False, key_cert_sign=True, crl_sign=True,
    encipher_only=False, decipher_only=False,
)  # fmt: skip


def _authority() -> tuple[ec.EllipticCurvePrivateKey, x509.Certificate]:
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "ramplab target test CA")])
    public = key.public_key()
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(public)
        .serial_number(x509.random_serial_number())
        .not_valid_before(_now() - datetime.timedelta(minutes=5))
        .not_valid_after(_now() + VALIDITY)
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(_CA_USAGE, critical=True)
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(public), critical=False)
        .sign(key, hashes.SHA256())
    )
    return key, cert


def _server(
    ca_key: ec.EllipticCurvePrivateKey, ca_cert: x509.Certificate, hostnames: list[str]
) -> tuple[ec.EllipticCurvePrivateKey, x509.Certificate]:
    key = ec.generate_private_key(ec.SECP256R1())
    names: list[x509.GeneralName] = []
    for host in hostnames:
        try:
            names.append(x509.IPAddress(ipaddress.ip_address(host)))
        except ValueError:
            names.append(x509.DNSName(host))
    ca_public = ca_key.public_key()
    cert = (
        x509.CertificateBuilder()
        .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, hostnames[0])]))
        .issuer_name(ca_cert.subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(_now() - datetime.timedelta(minutes=5))
        .not_valid_after(_now() + VALIDITY)
        .add_extension(x509.SubjectAlternativeName(names), critical=False)
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
        .add_extension(
            x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_public), critical=False
        )
        .sign(ca_key, hashes.SHA256())
    )
    return key, cert
