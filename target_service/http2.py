"""HTTP/2 on the target (``http = "2"``, §4.1): the same app served by hypercorn instead of uvicorn.

uvicorn speaks HTTP/1.1 only, so the h2 effects the study names ("HTTP/2 flow-control window too
small") need a second server. hypercorn negotiates h2 over TLS by ALPN (``h2``, then
``http/1.1``) and, on cleartext, accepts h2 with prior knowledge (a client that opens with the
h2 preface) as well as HTTP/1.1.

The flow-control window that throttles a streamed response is the *receiver's*, i.e. the
client's: the target may send at most what the client's SETTINGS_INITIAL_WINDOW_SIZE and its
WINDOW_UPDATEs allow (RFC 9113 §5.2). The target's own receive window only paces request bodies
(a few hundred bytes of JSON here), and hypercorn offers no setting for it, so none is exposed:
the window under study is set on the client (``--h2-window``). What hypercorn can set and the
target passes on: the largest frame it accepts (``h2_max_frame_bytes``) and the streams it
allows at once per connection (``h2_max_streams``).

One process only: hypercorn's multi-worker mode is a different launcher (``hypercorn.run``) with
its own socket sharing and signal handling; the settings refuse ``workers > 1`` with h2.
"""

from __future__ import annotations

from hypercorn.asyncio import serve as hypercorn_serve
from hypercorn.config import Config
from starlette.applications import Starlette

from target_service.settings import Settings
from target_service.tls import TlsFiles


def hypercorn_config(settings: Settings, tls: TlsFiles | None) -> Config:
    config = Config()
    config.bind = [f"{settings.host}:{settings.port}"]
    config.loglevel = settings.log_level.upper()
    config.accesslog = None
    config.graceful_timeout = 5.0
    config.h2_max_inbound_frame_size = settings.h2_max_frame_bytes
    config.h2_max_concurrent_streams = settings.h2_max_streams
    if tls is not None:
        config.certfile = tls.cert_file
        config.keyfile = tls.key_file
    return config


def serve_h2(app: Starlette, settings: Settings, tls: TlsFiles | None) -> None:
    """Serve until SIGINT/SIGTERM (hypercorn installs the handlers and shuts down gracefully)."""
    import uvloop

    uvloop.run(hypercorn_serve(app, hypercorn_config(settings, tls)))  # type: ignore[arg-type]
