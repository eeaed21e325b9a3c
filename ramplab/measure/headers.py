"""A response's head, read: its headers by name, the server's timing and delay, and whether the
head already says the body cannot be what was asked for.

Checked before the body is read, so a response that is not an answer fails with a name of its
own instead of as a stream that "ended without ``[DONE]``": a redirect (``http_status``, with its
Location: redirects are not followed, since a load test must measure the URL it was given), a
body compressed although ``Accept-Encoding: identity`` was sent (``unsupported_encoding``: the
SSE parser reads bytes as they arrive and cannot see through gzip), a Content-Type that is not
an event stream, or JSON for a plain request (``unexpected_content_type``: typically an HTML
page from a proxy, a login wall or the wrong port). A response with no Content-Type passes: the
body decides.
"""

from __future__ import annotations

import email.utils
import math
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass

Clock = Callable[[], float]


@dataclass(frozen=True, slots=True)
class HeadFailure:
    """Why a response's head rules out the answer; ``snippet``: add the body's first bytes."""

    kind: str
    detail: str
    snippet: bool = False


def header_map(raw: Iterable[tuple[bytes, bytes]]) -> dict[str, str]:
    """Response headers by lower-case name; a repeated header's values joined with ", ", as
    ``httpx.Headers.get`` gives them."""
    out: dict[str, str] = {}
    for key, value in raw:
        name, text = key.decode("latin-1").lower(), value.decode("latin-1")
        out[name] = f"{out[name]}, {text}" if name in out else text
    return out


def parse_server_timing(header: str) -> dict[str, float]:
    """``Server-Timing: queue;dur=1.2, prefill;dur=3.4`` → ``{"queue": 1.2, "prefill": 3.4}``."""
    out: dict[str, float] = {}
    for metric in header.split(","):
        name, *params = (part.strip() for part in metric.split(";"))
        for param in params:
            key, _, value = param.partition("=")
            if key.strip().lower() == "dur" and name:
                try:
                    out[name] = float(value.strip().strip('"'))
                except ValueError:
                    continue
    return out


def parse_retry_after(headers: Mapping[str, str], wall: Clock) -> float | None:
    """Seconds the server asked to wait: ``retry-after-ms`` first (as the openai SDK reads it),
    then ``Retry-After`` in either of RFC 9110's forms, delay-seconds or an HTTP-date (counted
    from ``wall``, the Unix-time clock, never below 0)."""
    ms = headers.get("retry-after-ms")
    if ms is not None:
        try:
            delay = float(ms) / 1000.0
        except ValueError:
            pass
        else:
            if math.isfinite(delay):
                return max(delay, 0.0)
    value = headers.get("retry-after")
    if value is None:
        return None
    try:
        delay = float(value)
    except ValueError:
        try:
            date = email.utils.parsedate_to_datetime(value.strip())
        except (TypeError, ValueError):
            return None  # neither form: as if it had not been sent
        if date.tzinfo is None:
            return None  # an HTTP-date is GMT; a date without a zone is not one
        return max(date.timestamp() - wall(), 0.0)
    return max(delay, 0.0) if math.isfinite(delay) else None


def _media_type(headers: Mapping[str, str]) -> str | None:
    value = headers.get("content-type")
    if value is None:
        return None
    return value.split(";", 1)[0].strip().lower()


def _is_json(media_type: str) -> bool:
    return media_type == "application/json" or media_type.endswith("+json")


def head_failure(status: int, headers: Mapping[str, str], stream: bool) -> HeadFailure | None:
    """What the head of a response with ``status`` < 400 rules out, or None if it may be an
    answer (a streamed one when ``stream``)."""
    if 300 <= status < 400:
        location = headers.get("location")
        where = f"to {location!r}" if location else "without a Location"
        return HeadFailure(
            "http_status",
            f"HTTP {status} redirect {where}: redirects are not followed, point the target URL "
            "at where the server sends it",
        )
    codings = [
        coding
        for part in headers.get("content-encoding", "").split(",")
        if (coding := part.strip().lower()) and coding != "identity"
    ]
    if codings:
        return HeadFailure(
            "unsupported_encoding",
            f"Content-Encoding {', '.join(codings)} although Accept-Encoding: identity was "
            "sent: the body cannot be read as it arrives",
        )
    media_type = _media_type(headers)
    if media_type is None:
        return None
    wanted = "text/event-stream" if stream else "application/json"
    if media_type == wanted or (not stream and _is_json(media_type)):
        return None
    return HeadFailure(
        "unexpected_content_type",
        f"HTTP {status} with Content-Type {headers['content-type']!r}, expected {wanted}",
        snippet=True,
    )
