"""A run's failures as a person reads them: grouped by error kind, with the server's own words.

The terminal, the reports and the error ceiling all group by kind (``http_status``,
``timeout``, … — docs/metrics.md), never by HTTP status alone: "200×3" says nothing of what went
wrong, ``no_done×3`` does. For ``http_status`` the statuses follow in parentheses.

The error ceiling (``max_error_ratio``, 0.5 by default, a campaign key and ``--max-error-ratio``):
a run whose every request failed, or whose error ratio passes the ceiling, measured a broken
set-up rather than a server under load; it exits 3 like a missed gate, with the top kinds and one
server message each.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Mapping, Sequence

from ramplab.measure.record import RequestRecord
from ramplab.results.summary import RunSummary

__all__ = ["DEFAULT_MAX_ERROR_RATIO", "ceiling_verdict", "kinds_text", "server_words", "top_kinds"]

DEFAULT_MAX_ERROR_RATIO = 0.5
_WORDS_MAX = 200


def _statuses(errors: Mapping[str, int]) -> dict[str, int]:
    """The error-status part of ``errors`` (by final status): 3xx–5xx only, a 200 with a broken
    stream is not an HTTP error."""
    return {k: v for k, v in errors.items() if k.isdigit() and int(k) >= 300}


def kinds_text(error_kinds: Mapping[str, int], errors: Mapping[str, int]) -> str:
    """``http_status×3 (503×2, 429×1), timeout×1``: kinds by count, statuses inside
    ``http_status`` (when the statuses account for every one of them); ``0`` for none."""
    parts = []
    statuses = _statuses(errors)
    for kind, count in sorted(error_kinds.items(), key=lambda kv: (-kv[1], kv[0])):
        text = f"{kind}×{count}"
        if kind == "http_status" and statuses and sum(statuses.values()) == count:
            inner = sorted(statuses.items(), key=lambda kv: (-kv[1], kv[0]))
            text += " (" + ", ".join(f"{k}×{v}" for k, v in inner) + ")"
        parts.append(text)
    return ", ".join(parts) or "0"


def server_words(detail: str | None) -> str | None:
    """The server's message in a record's ``error_detail``: an OpenAI-style body's
    ``error.message`` (or ``detail``), else the text's start, on one line."""
    if not detail:
        return None
    text = detail.strip()
    try:
        body = json.loads(text)
    except ValueError:
        body = None
    if isinstance(body, Mapping):
        error = body.get("error", body.get("detail"))
        if isinstance(error, Mapping) and error.get("message"):
            text = str(error["message"])
        elif isinstance(error, str):
            text = error
    text = " ".join(text.split())
    return text[:_WORDS_MAX] + ("…" if len(text) > _WORDS_MAX else "")


def top_kinds(records: Sequence[RequestRecord], limit: int = 3) -> list[str]:
    """The ``limit`` most frequent error kinds of ``records``, each ``kind×N (statuses): the
    first server message of that kind``."""
    failed = [r for r in records if not r.ok]
    kinds = Counter(r.error_kind or "unknown" for r in failed)
    lines = []
    for kind, count in kinds.most_common(limit):
        mine = [r for r in failed if (r.error_kind or "unknown") == kind]
        statuses = Counter(str(r.status) for r in mine if r.status is not None)
        text = kinds_text({kind: count}, dict(statuses))
        words = next((w for w in (server_words(r.error_detail) for r in mine) if w), None)
        lines.append(f"{text}: {words}" if words else text)
    return lines


def ceiling_verdict(summary: RunSummary, max_error_ratio: float) -> str | None:
    """Why the run passes the error ceiling (``every request failed (11 of 11)``, ``error ratio
    0.62 > max_error_ratio 0.5 (31 of 50 failed)``), or ``None`` when it does not."""
    n = summary.requests
    if n == 0:
        return None  # no record at all: a failed run (exit 4), not an error ratio
    # Requests cut in flight (``unfinished``) did not succeed either: a server that never
    # answers leaves only those.
    failed = n - summary.ok
    cut = f", {summary.unfinished} of them unfinished" if summary.unfinished else ""
    if failed == n:
        return f"every request failed ({failed} of {n}{cut})"
    ratio = failed / n
    if ratio > max_error_ratio:
        return (
            f"error ratio {ratio:.2f} > max_error_ratio {max_error_ratio:g} "
            f"({failed} of {n} failed{cut})"
        )
    return None
