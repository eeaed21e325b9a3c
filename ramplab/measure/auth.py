"""Credentials for the streaming user: none, a static API key, or the target's JWT flow.

JWT flow (DESIGN.md contract): ``POST {token_url}`` with ``{"client_id","client_secret"}`` answers
``{"access_token","token_type","expires_in"}``. The token is refreshed before it expires (once
80 % of its lifetime has passed), and after a 401 it is fetched again and the attempt repeated
once, so a key rotation on the server never shows up as an error. One ``JwtAuth`` is shared by all
users of a process; a lock keeps them from fetching the same token at once.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

import httpx

from ramplab.errors import AuthError

Clock = Callable[[], float]


class StaticKeyAuth:
    """``Authorization: Bearer <key>``; a 401 cannot be fixed by retrying."""

    def __init__(self, key: str) -> None:
        self._headers = {"authorization": f"Bearer {key}"}

    def headers(self) -> dict[str, str]:
        return self._headers

    def refresh(self) -> bool:
        return False


class JwtAuth:
    """Client-credentials JWTs, refreshed before expiry and after a 401."""

    def __init__(
        self,
        client: httpx.Client,
        token_url: str,
        client_id: str,
        client_secret: str,
        clock: Clock = time.monotonic,
        refresh_fraction: float = 0.8,
    ) -> None:
        self.client = client
        self.token_url = token_url
        self.client_id = client_id
        self.client_secret = client_secret
        self.clock = clock
        self.refresh_fraction = refresh_fraction
        self._lock = threading.Lock()
        self._token: str | None = None
        self._refresh_at = 0.0
        self._generation = 0
        self.fetches = 0  # tokens fetched, for tests and reports

    def _fetch(self) -> None:
        started = self.clock()
        try:
            response = self.client.post(
                self.token_url,
                json={"client_id": self.client_id, "client_secret": self.client_secret},
            )
        except httpx.HTTPError as exc:
            raise AuthError(f"token endpoint {self.token_url} unreachable: {exc}") from exc
        if response.status_code != 200:
            raise AuthError(f"token endpoint {self.token_url} answered {response.status_code}")
        try:
            data = response.json()
            token = str(data["access_token"])
            lifetime = float(data.get("expires_in", 60))
        except (ValueError, KeyError, TypeError) as exc:
            raise AuthError(f"token endpoint {self.token_url} sent no usable token") from exc
        self._token = token
        self._refresh_at = started + lifetime * self.refresh_fraction
        self._generation += 1
        self.fetches += 1

    def headers(self) -> dict[str, str]:
        if self._token is None or self.clock() >= self._refresh_at:
            with self._lock:
                if self._token is None or self.clock() >= self._refresh_at:
                    self._fetch()
        return {"authorization": f"Bearer {self._token}"}

    def refresh(self) -> bool:
        seen = self._generation
        with self._lock:
            # Another user may have refreshed while this one waited for the lock: reuse its token.
            if self._generation == seen:
                try:
                    self._fetch()
                except AuthError:
                    return False
        return True
