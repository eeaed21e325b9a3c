"""HTTPS on the reference target: a certificate generated at start that clients can trust
through the CA file it writes, a real TLS phase in the client's timing, and bad TLS settings
refused at start-up (exit 2, naming the key)."""

from __future__ import annotations

import ssl
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from ramplab.measure.client import ClientOptions, PhaseTrace, make_client
from target_service.embedded_redis import free_port
from tests.support.processes import REPO, Process, poll_until, python


def _https_ok(url: str, ca_file: Path) -> bool:
    if not ca_file.is_file():
        return False
    try:
        with make_client(ClientOptions(ca_file=str(ca_file))) as client:
            return client.get(url).status_code == 200
    except Exception:  # not up yet: any failure means "poll again"
        return False


@pytest.fixture(scope="module")
def https_target(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, Path]]:
    tmp = tmp_path_factory.mktemp("tls")
    ca_file = tmp / "ca" / "target-ca.pem"  # a folder that does not exist yet: the target makes it
    port = free_port()
    env = {"APP_CONFIG_FILE": str(REPO / "configs" / "app.toml"), "APP_TLS__ENABLED": "true",
           "APP_TLS__CA_FILE": str(ca_file)}  # fmt: skip
    proc = Process(python("-m", "target_service", "--port", str(port)), tmp / "target.log",
                   env=env).start()  # fmt: skip
    url = f"https://127.0.0.1:{port}"
    try:
        poll_until(lambda: _https_ok(url + "/readyz", ca_file), 30, "HTTPS /readyz", proc.running)
        yield url, ca_file
    finally:
        proc.stop()


def test_the_generated_certificate_verifies_strictly_for_every_hostname(
    https_target: tuple[str, Path],
) -> None:
    url, ca_file = https_target
    context = ssl.create_default_context(cafile=str(ca_file))
    context.verify_flags |= ssl.VERIFY_X509_STRICT  # Python 3.13's default
    port = url.rsplit(":", 1)[1]
    with make_client(ClientOptions(ca_file=str(ca_file)), tls=context) as client:
        for host in ("127.0.0.1", "localhost"):
            assert client.get(f"https://{host}:{port}/healthz").status_code == 200


def test_plain_http_is_not_served_and_an_untrusted_client_is_refused(
    https_target: tuple[str, Path],
) -> None:
    url, _ = https_target
    with (
        make_client(ClientOptions()) as client,  # the system's CAs only
        pytest.raises(Exception, match="CERTIFICATE_VERIFY_FAILED"),
    ):
        client.get(url + "/healthz")


def test_tls_is_a_client_phase_on_every_new_connection_and_none_on_reuse(
    https_target: tuple[str, Path],
) -> None:
    url, ca_file = https_target
    for reuse, expected in ((False, [True, True, True]), (True, [True, False, False])):
        options = ClientOptions(ca_file=str(ca_file), reuse_connections=reuse)
        seen = []
        with make_client(options) as client:
            for _ in expected:
                trace = PhaseTrace()
                response = client.get(url + "/healthz", extensions={"trace": trace})
                assert response.status_code == 200
                seen.append(trace.phases_ms()["tls"] > 0.0)
        assert seen == expected, f"reuse={reuse}"


@pytest.mark.parametrize(
    ("env", "named"),
    [
        ({"APP_TLS__CERT_FILE": "{cert}"}, "tls.key_file"),
        ({"APP_TLS__KEY_FILE": "{missing}"}, "tls.key_file"),
        ({"APP_TLS__CERT_FILE": "{cert}", "APP_TLS__KEY_FILE": "{cert}"}, "tls.key_file"),
    ],
    ids=["key-missing", "key-not-a-file", "key-not-a-key"],
)
def test_a_bad_tls_setting_stops_start_up_with_exit_2_naming_it(
    https_target: tuple[str, Path], tmp_path: Path, env: dict[str, str], named: str
) -> None:
    _, ca_file = https_target  # a PEM certificate, but no private key
    values = {"cert": str(ca_file), "missing": str(tmp_path / "nope.pem")}
    done = subprocess.run(
        python("-m", "target_service", "--port", str(free_port())),
        env={"PATH": "/usr/bin:/bin", "APP_CONFIG_FILE": str(REPO / "configs" / "app.toml"),
             "APP_TLS__ENABLED": "true", **{k: v.format(**values) for k, v in env.items()}},
        cwd=REPO, capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert done.returncode == 2, done.stderr[-2000:]
    last = done.stderr.strip().splitlines()[-1]
    assert named in last, last
    assert "Traceback" not in done.stderr
