"""Start-up: settings, the embedded Redis, the metrics directory, then uvicorn (hypercorn for
``http = "2"``, ``http2.py``).

With ``--workers N > 1`` uvicorn runs N processes on one shared listening socket. Anything they
must share is prepared here, once, in the parent: the embedded Redis (its URL reaches the workers as
``APP_REDIS_URL``) and the Prometheus multiprocess directory (``PROMETHEUS_MULTIPROC_DIR``, which
must exist before a worker imports ``prometheus_client``).
"""

from __future__ import annotations

import gc
import json
import os
import shutil
import signal
import sys
import tempfile
from typing import Annotated, Any

import typer
import uvicorn
from starlette.applications import Starlette

from target_service.app import create_app
from target_service.embedded_redis import EmbeddedRedis
from target_service.errors import StartupError
from target_service.http2 import serve_h2
from target_service.settings import Settings, load_settings
from target_service.shutdown import GRACEFUL_SHUTDOWN_S
from target_service.tls import TlsFiles, prepare_tls
from target_service.tracing import require_sdk

# Collect the young generation every 20,000 net allocations instead of 700: a stream allocates
# a few hundred objects, and at the default the collector ran hundreds of times a second under
# bench/target_stream.py's load.
GC_YOUNG_THRESHOLD = 20_000


def settle_gc() -> None:
    """Call once the app is built: what exists by then (modules, settings, keys, pydantic
    schemas) lives as long as the process, so ``gc.freeze()`` keeps every later full collection
    from scanning it again — measured: the collector's time under load fell from ~4 % to ~0.6 %
    of the run."""
    gc.freeze()
    gc.set_threshold(GC_YOUNG_THRESHOLD, *gc.get_threshold()[1:])


def app_from_environment() -> Starlette:
    """uvicorn's factory in each worker process: settings and metrics dir come from the env."""
    app = create_app(load_settings(), multiproc_dir=os.environ.get("PROMETHEUS_MULTIPROC_DIR"))
    settle_gc()
    return app


cli = typer.Typer(add_completion=False, help="The ramplab reference target: a simulated LLM API.")


def _exit_on_sigterm(signum: int, _frame: object) -> None:
    raise SystemExit(128 + signum)


def serve(settings: Settings, tls: TlsFiles | None = None) -> None:
    embedded: EmbeddedRedis | None = None
    multiproc_dir: str | None = None
    # uvicorn shuts down gracefully on SIGTERM, restores the handler it found and raises the signal
    # again; with the default handler that kills us before the ``finally`` below stops the
    # embedded Redis. A handler that raises SystemExit lets the clean-up run.
    signal.signal(signal.SIGTERM, _exit_on_sigterm)
    try:
        if settings.redis_url is None:
            embedded = EmbeddedRedis().start()
            settings.redis_url = embedded.url
            os.environ["APP_REDIS_URL"] = embedded.url
            print(f"target: embedded Redis on {embedded.url}", file=sys.stderr, flush=True)
        options: dict[str, Any] = {
            "host": settings.host,
            "port": settings.port,
            "loop": "uvloop",
            "http": "httptools",
            "log_level": settings.log_level,
            "access_log": False,
            "timeout_graceful_shutdown": GRACEFUL_SHUTDOWN_S,
        }
        if tls is not None:
            options.update(ssl_certfile=tls.cert_file, ssl_keyfile=tls.key_file)
        if settings.http == "2":
            app = create_app(settings)
            settle_gc()
            serve_h2(app, settings, tls)
            return
        if settings.workers == 1:
            app = create_app(settings)
            settle_gc()
            uvicorn.run(app, **options)
            return
        multiproc_dir = tempfile.mkdtemp(prefix="ramplab-target-metrics-")
        os.environ["PROMETHEUS_MULTIPROC_DIR"] = multiproc_dir
        for key, value in (
            ("HOST", settings.host),
            ("PORT", settings.port),
            ("WORKERS", settings.workers),
        ):
            os.environ[f"APP_{key}"] = str(value)
        uvicorn.run(
            "target_service.server:app_from_environment",
            factory=True,
            workers=settings.workers,
            **options,
        )
    finally:
        if embedded is not None:
            embedded.close()
        if multiproc_dir is not None:
            shutil.rmtree(multiproc_dir, ignore_errors=True)
        if tls is not None:
            tls.close()


@cli.command()
def main(
    host: Annotated[
        str | None, typer.Option(help="Address to bind (default from settings).")
    ] = None,
    port: Annotated[int | None, typer.Option(help="Port to bind; 0 picks a free one.")] = None,
    workers: Annotated[int | None, typer.Option(help="Worker processes sharing the port.")] = None,
    check: Annotated[
        bool,
        typer.Option(
            "--check", help="Validate the settings (file and APP_* variables) and exit: 0 or 2."
        ),
    ] = False,
) -> None:
    """Serve the target until interrupted."""
    overrides = {
        key: value
        for key, value in (("host", host), ("port", port), ("workers", workers))
        if value is not None
    }
    try:
        settings = load_settings(**overrides)
        require_sdk(settings.tracing)
        tls = prepare_tls(settings.tls, generate=not check)
    except StartupError as exc:
        print(f"target: {exc}", file=sys.stderr)
        raise typer.Exit(2) from None
    print("target settings: " + json.dumps(settings.masked()), file=sys.stderr, flush=True)
    if check:
        return
    if tls is not None:
        print(f"target: serving HTTPS with {tls.cert_file}", file=sys.stderr, flush=True)
    serve(settings, tls)
