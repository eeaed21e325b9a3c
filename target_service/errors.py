"""Every exception the target raises on purpose, in one tree split by what the caller does.

::

    TargetError                       root: catch this to catch anything the target means to raise
    ├── StartupError                  fatal: the process refuses to start (the CLI exits 2)
    │   ├── SettingsError             a settings key has an invalid value (named with the value)
    │   ├── TracingUnavailable        tracing is configured but OpenTelemetry is not installed
    │   └── CapacityError             Redis pool × processes > maxclients, capacity_check = refuse
    ├── Overloaded                    retryable: answer 503 with Retry-After and keep serving
    │   ├── RedisUnavailable          Redis did not answer in time, or refused
    │   └── QueueFull                 no scheduler slot and no room (or patience) in the queue
    ├── KidError                      refused credentials: the caller answers 401 with ``reason``
    └── APIError                      the answer itself, in the OpenAI wire format
        │                             {"error": {"message", "type", "code", "param"}}
        ├── InvalidRequest     400    the client fixes the request
        │   ├── BodyTooLarge   413
        │   └── NotFound       404    unknown model or route
        ├── Unauthorized       401    the client fetches a new token
        ├── RateLimited        429    the client retries after Retry-After
        └── Unavailable        503    the client retries after Retry-After (overload, outage)

    InjectedDisconnect                outside the tree on purpose: not an error but a signal that
                                      makes the server drop a stream (``midstream_mode = drop``)
"""

from __future__ import annotations

import math
from typing import Literal

import orjson
from starlette.responses import Response


class TargetError(Exception):
    """The root of every exception the target raises on purpose."""


class StartupError(TargetError):
    """The process cannot start as configured; the message says which setting and why."""


class SettingsError(StartupError):
    """Invalid settings; the message names every offending key and its value."""


class TracingUnavailable(StartupError):
    """Tracing is configured but the OpenTelemetry packages are not installed."""


class CapacityError(StartupError):
    """The pool × processes rule is violated and ``capacity_check = "refuse"``."""


class Overloaded(TargetError):
    """A dependency or the engine cannot take the request now; the caller answers 503."""


class RedisUnavailable(Overloaded):
    """Redis did not answer in time or refused; the caller answers 503."""

    def __init__(self, operation: str, cause: BaseException) -> None:
        super().__init__(f"redis {operation} failed: {type(cause).__name__}")
        self.operation = operation


class QueueFull(Overloaded):
    """No slot and no room (or no more patience) in the waiting queue."""

    def __init__(self, reason: Literal["queue_full", "queue_timeout"]) -> None:
        super().__init__(reason)
        self.reason = reason


class KidError(TargetError):
    """A ``kid`` that no verifying key carries; ``reason`` is ``unknown_kid`` or ``retired_key``."""

    def __init__(self, reason: str, message: str) -> None:
        super().__init__(message)
        self.reason = reason


class InjectedDisconnect(Exception):
    """Raised inside a stream to make the server drop the connection (``midstream_mode=drop``)."""


class APIError(TargetError):
    """An error answered to the client; subclasses set the HTTP status and the OpenAI type."""

    status = 500
    type = "server_error"

    def __init__(
        self,
        message: str,
        *,
        code: str | None = None,
        param: str | None = None,
        retry_after_s: float | None = None,
        headers: dict[str, str] | None = None,
    ) -> None:
        super().__init__(message)
        self.message = message
        self.code = code
        self.param = param
        self.retry_after_s = retry_after_s
        self.extra_headers = dict(headers or {})

    def body(self) -> dict[str, object]:
        return {
            "error": {
                "message": self.message,
                "type": self.type,
                "code": self.code,
                "param": self.param,
            }
        }

    def headers(self) -> dict[str, str]:
        headers = dict(self.extra_headers)
        if self.retry_after_s is not None:
            headers.update(retry_after_headers(self.retry_after_s))
        return headers

    def to_response(self) -> Response:
        return Response(
            orjson.dumps(self.body()),
            status_code=self.status,
            media_type="application/json",
            headers=self.headers(),
        )


def retry_after_headers(seconds: float) -> dict[str, str]:
    """``Retry-After`` in whole seconds rounded up (RFC 9110), ``retry-after-ms`` exact."""
    seconds = max(0.0, seconds)
    return {
        "retry-after": str(max(1, math.ceil(seconds))),
        "retry-after-ms": str(max(1, math.ceil(seconds * 1000))),
    }


class InvalidRequest(APIError):
    status = 400
    type = "invalid_request_error"


class BodyTooLarge(InvalidRequest):
    status = 413


class Unauthorized(APIError):
    status = 401
    type = "authentication_error"


class NotFound(InvalidRequest):
    status = 404


class RateLimited(APIError):
    status = 429
    type = "rate_limit_error"


class Unavailable(APIError):
    status = 503
    type = "service_unavailable"
