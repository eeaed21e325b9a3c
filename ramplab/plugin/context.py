"""What all streaming users of one process share: settings, HTTP client, auth, model, results sink.

Built once per process from Locust's options (by ``ramplab.plugin.plugin``) and passed to each
user; a sink is any callable taking a finished ``RequestRecord`` (the results writer in a local
run, the forwarder to the master on a worker, nothing at all when no results directory was asked
for).
"""

from __future__ import annotations

import random
import select
import ssl
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import httpx

from ramplab.errors import AuthError, UsageError
from ramplab.measure.auth import JwtAuth, StaticKeyAuth
from ramplab.measure.chain import Auth, NoAuth
from ramplab.measure.client import ClientOptions, MeasuredClient, make_client, ssl_context
from ramplab.measure.integrity import JwksKeys, Verifier
from ramplab.measure.record import RequestRecord
from ramplab.measure.sockets import DnsCache, PollFactory
from ramplab.options.kinds import parse_address
from ramplab.options.settings import UserSettings
from ramplab.options.workload import load_file_prompts, workload_of
from ramplab.results.failures import server_words
from ramplab.workload.prompts import Messages
from ramplab.workload.source import Workload
from ramplab.workload.tokenizers import ApproxTokenizer, Tokenizer, load_tokenizer

if TYPE_CHECKING:  # OpenTelemetry is loaded only when tracing is on
    from ramplab.measure.otel import AttemptTracer

Sink = Callable[[RequestRecord], None]


def client_options(settings: UserSettings) -> ClientOptions:
    return ClientOptions(
        verify_tls=settings.verify_tls,
        ca_file=settings.ca_file,
        dns_cache=settings.dns_cache,
        reuse_connections=settings.reuse_connections,
        http2=settings.http2,
        h2_window=settings.h2_window,
        resolver=parse_address(settings.resolver, "--resolver") if settings.resolver else None,
        connect_timeout_s=settings.connect_timeout_s,
        read_timeout_s=settings.read_timeout_s,
    )


def make_auth(settings: UserSettings, client: httpx.Client, host: str) -> Auth:
    if settings.auth == "api-key":
        assert settings.api_key is not None
        return StaticKeyAuth(settings.api_key)
    if settings.auth == "jwt":
        assert settings.client_id is not None
        assert settings.client_secret is not None
        return JwtAuth(
            client, host + settings.token_path, settings.client_id, settings.client_secret
        )
    return NoAuth()


def _tracer(settings: UserSettings, worker: str) -> AttemptTracer | None:
    if settings.otlp_endpoint is None:
        return None
    try:
        from ramplab.measure.otel import AttemptTracer
    except ImportError as exc:
        raise UsageError(
            "--otlp-endpoint", f"needs OpenTelemetry: pip install 'ramplab[tracing]' ({exc})"
        ) from None
    return AttemptTracer.create(
        settings.otlp_endpoint, settings.otlp_service_name, settings.trace_sample_ratio, worker
    )


def _verifier(settings: UserSettings, client: httpx.Client, host: str) -> Verifier | None:
    if not (settings.verify_signature or settings.verify_text):
        return None
    keys = None
    if settings.verify_signature:
        keys = JwksKeys(client, host + settings.jwks_path, settings.extra_headers)
    return Verifier(keys, text=settings.verify_text)


@dataclass(slots=True)
class UserContext:
    """Per-process state of the streaming users.

    ``client`` serves the process's own calls (model discovery, tokens, JWKS); each user makes its
    requests with a client of its own from ``new_client()`` (see ``client.py`` for why), all
    sharing ``tls`` and ``dns``.
    """

    settings: UserSettings
    host: str
    client: httpx.Client
    tls: ssl.SSLContext
    dns: DnsCache
    auth: Auth
    worker: str
    sinks: list[Sink] = field(default_factory=list)
    rng: random.Random = field(default_factory=random.Random)
    counter: Tokenizer = field(default_factory=ApproxTokenizer)  # --tokenizer, one a process
    prompts: list[Messages] | None = None  # the --prompts-file, read once per process
    verifier: Verifier | None = None  # --verify-signature/-text: one JWKS cache per process
    workload: Workload | None = None  # --dataset, --shared-prefix, --output-lengths (datasets/)
    poll: PollFactory = select.poll  # the OS poll idle connections are checked with (client.py)
    tracer: AttemptTracer | None = None  # --otlp-endpoint: a span per attempt (tracing.py)
    _model: str | None = None
    _lock: threading.Lock = field(default_factory=threading.Lock)

    @classmethod
    def create(
        cls, settings: UserSettings, host: str, worker: str, poll: PollFactory = select.poll
    ) -> UserContext:
        if not host:
            raise UsageError(
                "--host", "required (the target's base URL, e.g. http://127.0.0.1:8000)"
            )
        if not host.startswith(("http://", "https://")):
            raise UsageError("--host", f"{host!r} must start with http:// or https://")
        host = host.rstrip("/")
        # Read here, where a bad file stops the process with exit 2, not in each user.
        prompts = load_file_prompts(settings) if settings.prompts_file else None
        workload = workload_of(settings)
        options = client_options(settings)
        tls, dns = ssl_context(options), DnsCache()
        client = make_client(options, tls=tls, dns=dns, poll=poll)
        return cls(
            settings=settings,
            host=host,
            client=client,
            tls=tls,
            dns=dns,
            auth=make_auth(settings, client, host),
            worker=worker,
            rng=random.Random(settings.seed),
            counter=load_tokenizer(settings.tokenizer),
            prompts=prompts,
            verifier=_verifier(settings, client, host),
            workload=workload,
            poll=poll,
            tracer=_tracer(settings, worker),
            _model=settings.model,
        )

    def new_client(self) -> MeasuredClient:
        """A client for one user: its own connection, the process's TLS context and DNS cache."""
        return make_client(
            client_options(self.settings), tls=self.tls, dns=self.dns, poll=self.poll
        )

    @property
    def url(self) -> str:
        return self.host + self.settings.path

    def model(self) -> str:
        """The configured model, or the first one the server lists (asked once per process)."""
        if self._model is None:
            with self._lock:
                if self._model is None:
                    self._model = self._first_model()
        return self._model

    def _first_model(self) -> str:
        url = self.host + "/v1/models"
        try:
            headers = {**self.settings.extra_headers, **self.auth.headers()}
            response = self.client.get(url, headers=headers)
        except (AuthError, httpx.HTTPError) as exc:
            raise UsageError("--model", f"not given and GET {url} failed: {exc}") from exc
        if response.status_code >= 400:  # the server's own words, not httpx's
            words = server_words(response.text) or "(empty body)"
            raise UsageError(
                "--model", f"not given and GET {url} → {response.status_code}: {words}"
            )
        try:
            return str(response.json()["data"][0]["id"])
        except (ValueError, KeyError, IndexError, TypeError) as exc:
            raise UsageError("--model", f"not given and GET {url} listed none: {exc}") from exc

    def emit(self, record: RequestRecord) -> None:
        for sink in self.sinks:
            sink(record)
