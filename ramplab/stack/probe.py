"""Preflight of a ``--target`` server: the mistakes that cost minutes, caught in seconds.

Before the ramp (and by ``ramplab validate --probe``), in this order:

1. **reach**: the host resolves (no retry: a name that does not resolve now will not in the next
   second) and accepts a TCP connection. A refused connection is retried for ``REFUSED_FOR_S``
   (a server restarting) and then fails naming it; a silent host (packets dropped) is waited for
   until the stack's health deadline. Each is a ``StackError`` (exit 4) with the reason, not
   "not reachable within 60 s".
2. **models** (``preflight.models``): ``GET /v1/models`` lists the campaign's ``workload.model``;
   if not, a ``CampaignError`` on that field listing what the server has (exit 2). A 404 means a
   server without the endpoint: the check is skipped with a note.
3. **request** (``preflight.request``): one real streaming request as the workers will send it;
   a 4xx is the campaign's mistake (exit 2, on ``preflight.request``), anything else the server's
   (exit 4) — either way with the status and the server's own message.

The ramp's workers would hit each of these on every request; failing here keeps the server's
words on the terminal instead of in a worker log or the records.
"""

from __future__ import annotations

import json
import os
import socket
import ssl
import time
from collections.abc import Callable, Mapping
from typing import cast
from urllib.parse import urlsplit

import httpx

from ramplab.campaign.schema import Campaign
from ramplab.errors import CampaignError, StackError, UsageError
from ramplab.measure.apis import LIMIT_KEYS, PATHS, Api, prompt_fields

__all__ = ["REFUSED_FOR_S", "preflight", "reach", "server_message"]

REFUSED_FOR_S = 2.0
_POLL_S = 0.25
_HTTP_TIMEOUT_S = 30.0
_PROMPT = "Say hello."


def _fail(message: str) -> StackError:
    return StackError("target", message, None, "")


def reach(url: str, timeout_s: float, clock: Callable[[], float] = time.monotonic) -> None:
    """``url``'s host resolves and accepts a TCP connection, or a ``StackError`` saying which
    of the two failed and how."""
    parts = urlsplit(url)
    host = parts.hostname or "127.0.0.1"
    port = parts.port or (443 if parts.scheme == "https" else 80)
    start = clock()
    while True:
        try:
            addresses = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
        except socket.gaierror as exc:
            raise _fail(f"cannot resolve {host}: {exc.strerror}") from None
        family, kind, proto, _, address = addresses[0]
        try:
            with socket.socket(family, kind, proto) as sock:
                sock.settimeout(min(1.0, timeout_s))
                sock.connect(address)
            return
        except ConnectionRefusedError:
            if clock() - start >= REFUSED_FOR_S:
                raise _fail(f"connection refused on {host}:{port} "
                            f"(tried for {REFUSED_FOR_S:g} s)") from None  # fmt: skip
        except OSError as exc:
            if clock() - start >= timeout_s:
                reason = exc.strerror or type(exc).__name__
                raise _fail(f"no connection to {host}:{port} within {timeout_s:g} s "
                            f"({reason})") from None  # fmt: skip
        time.sleep(_POLL_S)


def server_message(response: httpx.Response) -> str:
    """The server's own words: ``error.message`` of an OpenAI-style body, else the body's start."""
    text = response.text.strip()
    try:
        body = json.loads(text)
    except ValueError:
        return text[:300] or "(empty body)"
    if isinstance(body, Mapping):
        error = body.get("error", body.get("detail"))
        if isinstance(error, Mapping) and error.get("message"):
            return str(error["message"])
        if isinstance(error, str):
            return error
    return text[:300]


def _verify(campaign: Campaign) -> ssl.SSLContext | bool:
    w = campaign.workload
    if not w.verify_tls:
        return False
    if w.ca_file is not None:
        return ssl.create_default_context(cafile=str(w.ca_file))
    return True


def _headers(client: httpx.Client, base: str, campaign: Campaign) -> dict[str, str]:
    """The request headers of the campaign's auth mode (secrets from the file or the
    ``RAMPLAB_*`` variables, as the workers read them)."""
    auth = campaign.workload.auth
    headers = dict(campaign.workload.extra_headers)
    if auth.mode == "api-key":
        key = auth.api_key or os.environ.get("RAMPLAB_API_KEY", "")
        headers["authorization"] = f"Bearer {key}"
    elif auth.mode == "jwt":
        url = base + auth.token_path
        body = {
            "client_id": auth.client_id or os.environ.get("RAMPLAB_CLIENT_ID", ""),
            "client_secret": auth.client_secret or os.environ.get("RAMPLAB_CLIENT_SECRET", ""),
        }
        response = client.post(url, json=body)
        if response.status_code != 200:
            raise CampaignError("workload.auth", f"POST {url} → {response.status_code}: "
                                f"{server_message(response)}")  # fmt: skip
        headers["authorization"] = f"Bearer {response.json().get('access_token', '')}"
    return headers


def _listed(client: httpx.Client, base: str, headers: dict[str, str]) -> tuple[list[str], str]:
    """The models ``GET /v1/models`` lists, or ``[]`` and why the list is not known (a 404: a
    server without the endpoint)."""
    url = base + "/v1/models"
    response = client.get(url, headers=headers)
    if response.status_code == 404:
        return [], f"GET {url} → 404: the server lists no models, model check skipped"
    if response.status_code != 200:
        raise _fail(f"GET {url} → {response.status_code}: {server_message(response)}")
    try:
        return [str(m["id"]) for m in response.json()["data"]], ""
    except (ValueError, KeyError, TypeError):
        return [], f"GET {url} answered no model list, model check skipped"


def _check_request(
    client: httpx.Client, base: str, campaign: Campaign, model: str | None, headers: dict[str, str]
) -> None:
    w = campaign.workload
    api = cast("Api", w.api)
    url = base + (w.api_path or PATHS[api])
    body: dict[str, object] = {
        **prompt_fields(api, [{"role": "user", "content": _PROMPT}]),
        LIMIT_KEYS[api]: min(w.max_tokens, 4),
        "stream": w.stream,
        **w.extra_body,
    }
    if model is not None:
        body["model"] = model
    with client.stream("POST", url, json=body, headers=headers) as response:
        if response.status_code < 400:
            for _ in response.iter_bytes():
                pass
            return
        response.read()
    what = f"POST {url} → {response.status_code}: {server_message(response)}"
    if 400 <= response.status_code < 500:
        raise CampaignError("preflight.request", what)
    raise _fail(what)


def preflight(base: str, campaign: Campaign, timeout_s: float, note: Callable[[str], None]) -> None:
    """Every check of the campaign's ``preflight`` against ``base`` (``reach`` always)."""
    reach(base, timeout_s)
    checks = campaign.preflight
    if not (checks.models or checks.request):
        return
    try:
        with httpx.Client(verify=_verify(campaign), timeout=_HTTP_TIMEOUT_S) as client:
            headers = _headers(client, base, campaign)
            model = campaign.workload.model
            if checks.models or model is None:  # no model given: the workers take the first
                listed, skipped = _listed(client, base, headers)
                if skipped:
                    note(skipped)
                if checks.models and model is not None and listed and model not in listed:
                    raise CampaignError(
                        "workload.model",
                        f"{model!r} is not served by {base} (GET /v1/models lists: "
                        f"{', '.join(repr(m) for m in listed)})",
                    )
                model = model or next(iter(listed), None)
            if checks.request:
                _check_request(client, base, campaign, model, headers)
    except UsageError:
        raise
    except (httpx.HTTPError, ValueError, AttributeError, ssl.SSLError) as exc:
        raise _fail(f"preflight against {base} failed: {type(exc).__name__}: {exc}") from None
