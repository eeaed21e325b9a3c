"""Errors the target answers with, in the OpenAI wire format.

Hierarchy, split by what a client should do about it::

    APIError                       {"error": {"message", "type", "code", "param"}}
    ├── InvalidRequest     400     fix the request
    │   └── BodyTooLarge   413
    ├── Unauthorized       401     fetch a new token
    ├── NotFound           404     unknown model or route
    ├── RateLimited        429     retry after Retry-After
    └── Unavailable        503     retry after Retry-After (overload, outage, Redis down)
"""

from __future__ import annotations

import math

import orjson
from starlette.responses import Response


class APIError(Exception):
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
