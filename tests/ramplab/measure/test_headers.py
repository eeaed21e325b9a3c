"""Reading a response's head: Retry-After in both of RFC 9110's forms, and what a head rules out."""

from __future__ import annotations

import email.utils

import pytest

from ramplab.measure.headers import head_failure, parse_retry_after

NOW = 1_800_000_000.0


def wall() -> float:
    return NOW


@pytest.mark.parametrize(
    ("headers", "seconds"),
    [
        ({"retry-after": "5"}, 5.0),
        ({"retry-after": "2.5"}, 2.5),
        ({"retry-after": "-3"}, 0.0),
        ({"retry-after": email.utils.formatdate(NOW + 7, usegmt=True)}, 7.0),
        ({"retry-after": email.utils.formatdate(NOW - 60, usegmt=True)}, 0.0),  # passed: now
        ({"retry-after-ms": "1500", "retry-after": "9"}, 1.5),  # the finer one wins
        ({"retry-after-ms": "soon", "retry-after": "9"}, 9.0),
        ({"retry-after": "Fri, 31 Dec 2026 23:59:60"}, None),  # no zone: not an HTTP-date
        ({"retry-after": "later"}, None),
        ({"retry-after": "nan"}, None),
        ({}, None),
    ],
)
def test_retry_after_in_both_forms(headers: dict[str, str], seconds: float | None) -> None:
    assert parse_retry_after(headers, wall) == (None if seconds is None else pytest.approx(seconds))


@pytest.mark.parametrize(
    ("status", "headers", "stream", "kind"),
    [
        (200, {"content-type": "text/event-stream; charset=utf-8"}, True, None),
        (200, {}, True, None),  # no Content-Type: the body decides
        (200, {"content-type": "application/json"}, False, None),
        (200, {"content-type": "application/vnd.api+json"}, False, None),
        (200, {"content-type": "application/json"}, True, "unexpected_content_type"),
        (200, {"content-type": "text/html"}, False, "unexpected_content_type"),
        (200, {"content-encoding": "identity"}, True, None),
        (200, {"content-encoding": "br"}, True, "unsupported_encoding"),
        (308, {"location": "https://elsewhere/v1"}, True, "http_status"),
        (301, {}, True, "http_status"),
    ],
)
def test_what_a_head_rules_out(
    status: int, headers: dict[str, str], stream: bool, kind: str | None
) -> None:
    failure = head_failure(status, headers, stream)
    assert (failure and failure.kind) == kind
