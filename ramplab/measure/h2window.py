"""A settable HTTP/2 receive window for the client (``--h2-window BYTES``, §4.1).

The window that throttles a streamed response is the receiver's: the server may have at most
SETTINGS_INITIAL_WINDOW_SIZE unacknowledged bytes in flight per stream (and the connection
window's worth over all streams) until the client's WINDOW_UPDATE arrives (RFC 9113 §6.9).

httpcore offers no setting for it. Its ``HTTP2Connection`` sends h2's default initial window
(65,535 bytes) and then widens both windows by 2**24 bytes at once — the connection's in
``_send_connection_init``, each stream's in ``_send_request_headers`` — so a client on stock
httpcore can never be the bottleneck the study describes. ``WindowedHTTP2Connection`` overrides
exactly those two methods: it advertises ``window`` as SETTINGS_INITIAL_WINDOW_SIZE, sizes the
connection window to the same figure (it can only grow above h2's 65,535; below that the
per-stream window is the binding one) and adds nothing per stream. Acknowledging data stays
h2's (``WindowManager``: a WINDOW_UPDATE once half the window is consumed, or 1 KiB / a quarter
of it when the window is exhausted).

httpcore creates its HTTP/2 connection inside ``HTTPConnection.handle_request``, so getting this
class used means a connection and a pool that pick it (``WindowedConnection``,
``WindowedPool``); both overrides copy httpcore 1.0's code for those methods, apart from the
lines marked. The version is pinned through httpx (<0.29 → httpcore 1.x).

The same classes serve every h2 client, with ``window=None`` keeping httpcore's own windows,
because of one more override, ``has_expired``: httpcore's HTTP/1.1 connection treats an idle
socket that has turned readable as closed by the server, its HTTP/2 connection does not. A
server that closes idle h2 connections (hypercorn after 5 s: GOAWAY, then FIN) therefore had its
closed connection reused, and the request failed "Server disconnected" — 39 of 88 requests of
the first h2 run of ``campaigns/decomposition.yaml``, where each user sends about every 10 s.
"""

from __future__ import annotations

import h2.settings
import httpcore
from httpcore._models import Origin, Request, Response
from httpcore._sync.connection import HTTPConnection
from httpcore._sync.http2 import HTTP2Connection, HTTPConnectionState, has_body_headers
from httpcore._sync.http11 import HTTP11Connection

H2_DEFAULT_WINDOW = 65_535  # RFC 9113 §6.9.2: every window starts here
H2_MAX_WINDOW = 2**31 - 1


class WindowedHTTP2Connection(HTTP2Connection):
    """httpcore's HTTP/2 connection with a receive window of ``window`` bytes (``None``:
    httpcore's), which notices a connection the server closed while it was idle."""

    def __init__(
        self,
        origin: Origin,
        stream: httpcore.NetworkStream,
        keepalive_expiry: float | None,
        window: int | None,
    ) -> None:
        super().__init__(origin=origin, stream=stream, keepalive_expiry=keepalive_expiry)
        self.window = window

    def has_expired(self) -> bool:
        # ours (module docstring): an idle connection whose socket has data or EOF waiting was
        # closed by the server (GOAWAY); a benign frame (a late PING) costs one new connection.
        if super().has_expired():
            return True
        idle = self._state == HTTPConnectionState.IDLE
        return idle and bool(self._network_stream.get_extra_info("is_readable"))

    def _send_connection_init(self, request: Request) -> None:
        if self.window is None:
            super()._send_connection_init(request)
            return
        self._h2_state.local_settings = h2.settings.Settings(
            client=True,
            initial_values={
                h2.settings.SettingCodes.ENABLE_PUSH: 0,
                h2.settings.SettingCodes.MAX_CONCURRENT_STREAMS: 100,
                h2.settings.SettingCodes.MAX_HEADER_LIST_SIZE: 65536,
                h2.settings.SettingCodes.INITIAL_WINDOW_SIZE: self.window,  # ours
            },
        )
        del self._h2_state.local_settings[h2.settings.SettingCodes.ENABLE_CONNECT_PROTOCOL]
        self._h2_state.initiate_connection()
        if self.window > H2_DEFAULT_WINDOW:  # ours: httpcore adds 2**24 unconditionally
            self._h2_state.increment_flow_control_window(self.window - H2_DEFAULT_WINDOW)
        self._write_outgoing_data(request)

    def _send_request_headers(self, request: Request, stream_id: int) -> None:
        if self.window is None:
            super()._send_request_headers(request, stream_id)
            return
        end_stream = not has_body_headers(request)
        authority = next(v for k, v in request.headers if k.lower() == b"host")
        headers = [
            (b":method", request.method),
            (b":authority", authority),
            (b":scheme", request.url.scheme),
            (b":path", request.url.target),
        ] + [
            (k.lower(), v)
            for k, v in request.headers
            if k.lower() not in (b"host", b"transfer-encoding")
        ]
        self._h2_state.send_headers(stream_id, headers, end_stream=end_stream)
        # ours: no increment_flow_control_window(2**24, stream_id) — the stream keeps `window`
        self._write_outgoing_data(request)


class WindowedConnection(HTTPConnection):
    """``HTTPConnection`` that makes a ``WindowedHTTP2Connection`` where h2 is spoken."""

    def __init__(self, window: int | None, **kwargs: object) -> None:
        super().__init__(**kwargs)  # type: ignore[arg-type]
        self.window = window

    def handle_request(self, request: Request) -> Response:
        if not self.can_handle_request(request.url.origin):
            raise RuntimeError(
                f"Attempted to send request to {request.url.origin} on connection to {self._origin}"
            )
        try:
            with self._request_lock:
                if self._connection is None:
                    stream = self._connect(request)
                    ssl_object = stream.get_extra_info("ssl_object")
                    http2_negotiated = (
                        ssl_object is not None and ssl_object.selected_alpn_protocol() == "h2"
                    )
                    if http2_negotiated or (self._http2 and not self._http1):
                        self._connection = WindowedHTTP2Connection(
                            self._origin, stream, self._keepalive_expiry, self.window
                        )
                    else:
                        self._connection = HTTP11Connection(
                            origin=self._origin,
                            stream=stream,
                            keepalive_expiry=self._keepalive_expiry,
                        )
        except BaseException:
            self._connect_failed = True
            raise
        return self._connection.handle_request(request)


class WindowedPool(httpcore.ConnectionPool):
    """A connection pool (no proxies) whose h2 connections receive with a ``window``-byte window
    (``None``: httpcore's) and drop a connection the server closed while it was idle."""

    def __init__(self, window: int | None, **kwargs: object) -> None:
        if window is not None and not 1 <= window <= H2_MAX_WINDOW:
            raise ValueError(f"h2 window {window} outside 1 … {H2_MAX_WINDOW} bytes")
        super().__init__(**kwargs)  # type: ignore[arg-type]
        self.window = window

    def create_connection(self, origin: Origin) -> httpcore.ConnectionInterface:
        return WindowedConnection(
            self.window,
            origin=origin,
            ssl_context=self._ssl_context,
            keepalive_expiry=self._keepalive_expiry,
            http1=self._http1,
            http2=self._http2,
            retries=self._retries,
            local_address=self._local_address,
            uds=self._uds,
            network_backend=self._network_backend,
            socket_options=self._socket_options,
        )
