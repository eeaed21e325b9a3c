"""HTTP/2 end to end on loopback (§4.1): the target served by hypercorn (``APP_HTTP=2``, h2 with
prior knowledge on cleartext), the client's ``http2`` switch, its phases over h2, and the
``h2_window`` receive window reaching the wire.

The window check counts frames, not time: the client's writes on the connection are parsed
with hyperframe, and the WINDOW_UPDATE frames it sends while one streamed response arrives are
counted. httpcore widens each stream by 16 MiB once (one WINDOW_UPDATE after the headers) and a
few KB never consume half of that, so it sends no other;
a 256-byte window must be reopened every few hundred bytes, so it sends at least one per 256
bytes of the response body's quarter (h2 acknowledges at half a window, or a quarter when the
window is exhausted) — asserted as ≥ body_bytes / 512, a margin of 2 over h2's own rule.
"""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import hyperframe.frame
import pytest

from ramplab.measure.client import ClientOptions, PhaseTrace, make_client
from target_service.errors import SettingsError
from target_service.settings import load_settings
from tests.support.processes import TargetProcess
from tests.target.stress_helpers import chat_body, wait_until

MAX_TOKENS = 64


@pytest.fixture(scope="module")
def h2_target(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TargetProcess]:
    log = tmp_path_factory.mktemp("h2") / "target.log"
    env = {"APP_HTTP": "2", "APP_LATENCY__ITL_MS": "1", "APP_LATENCY__PREFILL_OVERHEAD_MS": "1"}
    with TargetProcess(env, log_path=log) as target:
        yield target


class WriteLog:
    """Every byte the client writes on one connection, parsed into HTTP/2 frames on demand."""

    def __init__(self) -> None:
        self.data = bytearray()

    def frames(self) -> list[hyperframe.frame.Frame]:
        data = bytes(self.data)
        if data.startswith(b"PRI * HTTP/2.0"):
            data = data[24:]
        out = []
        while len(data) >= 9:
            frame, length = hyperframe.frame.Frame.parse_frame_header(memoryview(data[:9]))
            frame.parse_body(memoryview(data[9 : 9 + length]))
            out.append(frame)
            data = data[9 + length :]
        return out


def _stream(client: httpx.Client, url: str) -> tuple[httpx.Response, int, PhaseTrace]:
    trace = PhaseTrace()
    body = chat_body(stream=True, max_tokens=MAX_TOKENS)
    with client.stream("POST", url + "/v1/chat/completions", json=body,
                       extensions={"trace": trace}) as response:  # fmt: skip
        size = sum(len(chunk) for chunk in response.iter_raw())
    return response, size, trace


def _window_updates(url: str, window: int | None) -> tuple[int, int]:
    """(WINDOW_UPDATE frames on the stream, body bytes) of the second streamed request of a
    connection: the first opens it, then the test listens to what the client writes."""
    with make_client(ClientOptions(http2=True, h2_window=window)) as client:
        _stream(client, url)
        (connection,) = client._transport._pool.connections  # type: ignore[attr-defined]
        stream = connection._connection._network_stream
        log = WriteLog()
        write = stream.write

        def logged(buffer: bytes, timeout: float | None = None) -> None:
            log.data += buffer
            write(buffer, timeout)

        stream.write = logged
        _, size, _ = _stream(client, url)
    updates = [
        f for f in log.frames()
        if isinstance(f, hyperframe.frame.WindowUpdateFrame) and f.stream_id != 0
    ]  # fmt: skip
    return len(updates), size


def test_a_streamed_request_over_h2_says_http2_and_keeps_its_phases(
    h2_target: TargetProcess,
) -> None:
    with make_client(ClientOptions(http2=True)) as client:
        first, size, trace = _stream(client, h2_target.url)
        second, _, reused = _stream(client, h2_target.url)
    assert first.status_code == 200
    assert first.http_version == "HTTP/2"
    assert size > 0
    phases = trace.phases_ms()
    assert trace.connected
    assert phases["connect"] > 0
    assert phases["send"] > 0
    assert phases["wait"] > 0
    assert trace.headers_at is not None
    assert trace.went_out is not None
    # The second request multiplexes onto the same connection: no connect phase again.
    assert second.http_version == "HTTP/2"
    assert not reused.connected
    assert reused.phases_ms()["connect"] == 0.0
    assert "wait" in reused.phases_ms()


def test_http11_clients_are_still_served_by_the_h2_target(h2_target: TargetProcess) -> None:
    with make_client(ClientOptions()) as client:
        response = client.get(h2_target.url + "/healthz")
    assert response.status_code == 200
    assert response.http_version == "HTTP/1.1"


def test_a_tiny_receive_window_reaches_the_wire(h2_target: TargetProcess) -> None:
    default_updates, _ = _window_updates(h2_target.url, None)
    tiny_updates, size = _window_updates(h2_target.url, 256)
    assert default_updates == 1  # httpcore's own +16 MiB right after the request headers
    assert size > 2048  # enough body for the window to matter
    assert tiny_updates >= size // 512, (tiny_updates, size)


def test_h2_with_several_workers_is_refused_naming_the_setting() -> None:
    with pytest.raises(SettingsError, match="workers"):
        load_settings(http="2", workers=2)


def test_the_h2_window_must_fit_the_protocol() -> None:
    with pytest.raises(ValueError, match="window"):
        make_client(ClientOptions(http2=True, h2_window=2**31))


def test_a_connection_the_server_closed_while_idle_is_not_reused(h2_target: TargetProcess) -> None:
    """Regression (the first h2 run of campaigns/decomposition.yaml: 39 of 88 requests failed
    "Server disconnected"): hypercorn closes an h2 connection after 5 s idle; httpcore's HTTP/2
    connection, unlike its HTTP/1.1 one, did not notice and sent the next request on it."""
    with make_client(ClientOptions(http2=True)) as client:
        first = client.get(h2_target.url + "/v1/models")
        assert first.http_version == "HTTP/2"
        (connection,) = client._transport._pool.connections  # type: ignore[attr-defined]
        stream = connection._connection._network_stream
        # The server's idle timeout, observed rather than slept through: its GOAWAY/FIN arrives.
        wait_until(lambda: bool(stream.get_extra_info("is_readable")), 15, "the server's close")
        again = client.get(h2_target.url + "/v1/models")
        assert again.status_code == 200
        assert again.http_version == "HTTP/2"
        (fresh,) = client._transport._pool.connections  # type: ignore[attr-defined]
        assert fresh is not connection
