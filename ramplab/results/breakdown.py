"""Where the time of a typical and of a slow request goes: client phases joined with the server's.

Two groups of successful requests, ranked by TTLT (from the intended start):

- **median**: TTLT between its 45th and 55th percentiles (at least the one nearest the median);
- **slowest 1 %**: TTLT at or above its 99th percentile (at least the slowest one).

Each segment is the group's **mean** of that phase, so the segments of one group add up to its
mean TTLT (within the ~2 ms the client's phases leave unaccounted, ``docs/metrics.md``).

The join rule. The client's view is the final attempt's phases after the client's own delay:
``lateness`` (intended start → first send), ``retries`` (earlier attempts and back-off before
the final send), ``dns``, ``connect``, ``tls``, ``stall`` (a new connection up → the request
written: the generator's own time), ``send``, ``wait`` (request written → response
head), ``first_token``, ``stream``. The server's phases all happen after the request was written
and before the last token reached the client, i.e. inside the client's ``wait + first_token +
stream`` window, so the joined view places them there: a "before the server" segment equal to
the client's time up to the end of ``send``, then the server's ``auth``, ``ratelimit``,
``queue``, ``prefill``, ``decode``, ``sign_queue``, ``lock_wait``, ``sign`` as the server
reported them, then "network & client": the rest of the window the server's phases do not
explain (transfer, the client reading, framework time). The reference target counts the
signature inside ``decode``; it is taken out of ``decode`` (``digest.py``) so no time counts
twice. When the server's phases add up to more than the window (two processes' clocks,
rounding), that remainder is 0 and the joined bar is longer by the excess — shown, not hidden.
A group gets the joined view only when every one of its requests carried server timings (other
servers send none: the client's view stands alone).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import numpy as np

from ramplab.results.digest import CLIENT_COLUMNS, PHASE_COLUMNS, SERVER_COLUMNS, Floats

__all__ = [
    "CLIENT_LABELS",
    "SERVER_LABELS",
    "PhaseBreakdown",
    "breakdowns",
    "group_breakdown",
]

Group = Literal["median", "p99"]

CLIENT_LABELS = {
    "lateness": "generator lateness",
    "retries": "earlier attempts & back-off",
    "dns": "DNS",
    "connect": "TCP connect",
    "tls": "TLS",
    "stall": "generator stall (new connection)",
    "send": "send request",
    "wait": "wait for response head",
    "first_token": "head → first token",
    "stream": "stream to last token",
}
SERVER_LABELS = {
    "before": "before the server",
    "auth": "server: auth",
    "ratelimit": "server: rate limit",
    "queue": "server: queue",
    "prefill": "server: prefill",
    "decode": "server: decode",
    "sign_queue": "server: signing hand-off",
    "lock_wait": "server: signing lock wait",
    "sign": "server: signing",
    "unseen": "network & client",
}
GROUP_LABELS: dict[Group, str] = {"median": "median (p45–p55)", "p99": "slowest 1 %"}
_BEFORE = ("lateness", "retries", "dns", "connect", "tls", "stall", "send")
_WINDOW = ("wait", "first_token", "stream")


@dataclass(frozen=True)
class PhaseBreakdown:
    """One group's mean time per segment (ms), in the client's and the joined server's view."""

    group: Group
    count: int
    ttlt_ms: float  # the group's mean TTLT
    client: dict[str, float]  # CLIENT_COLUMNS order
    server: dict[str, float] | None  # SERVER_LABELS order; None without server timings

    @property
    def label(self) -> str:
        return GROUP_LABELS[self.group]

    def share(self, *segments: str) -> float:
        """The named segments' part of the group's mean TTLT (client or server names)."""
        if self.ttlt_ms <= 0:
            return 0.0
        total = sum(self.client.get(s, 0.0) + (self.server or {}).get(s, 0.0) for s in segments)
        return total / self.ttlt_ms


def _rows(phases: Floats, group: Group) -> Floats:
    ttlt = phases[:, 0]
    chosen: Floats
    if group == "p99":
        chosen = phases[ttlt >= np.percentile(ttlt, 99)]
        return chosen if len(chosen) else phases[[int(np.argmax(ttlt))]]
    lo, hi = np.percentile(ttlt, [45, 55])
    chosen = phases[(ttlt >= lo) & (ttlt <= hi)]
    if len(chosen):
        return chosen
    nearest: Floats = phases[[int(np.argmin(np.abs(ttlt - np.median(ttlt))))]]
    return nearest


def group_breakdown(phases: Floats, group: Group) -> PhaseBreakdown | None:
    """The breakdown of ``phases`` (rows as in ``digest.PHASE_COLUMNS``); ``None`` when empty."""
    if phases.size == 0:
        return None
    rows = _rows(phases, group)
    mean = dict(zip(PHASE_COLUMNS, rows.mean(axis=0), strict=True))
    client = {k: float(mean[k]) for k in CLIENT_COLUMNS}
    server = None
    if bool(np.all(rows[:, PHASE_COLUMNS.index("server_seen")] == 1.0)):
        inside = {k: float(mean[k]) for k in SERVER_COLUMNS}
        window = sum(client[k] for k in _WINDOW)
        server = {
            "before": sum(client[k] for k in _BEFORE),
            **inside,
            "unseen": max(0.0, window - sum(inside.values())),
        }
    return PhaseBreakdown(group, len(rows), float(mean["ttlt"]), client, server)


def breakdowns(phases: Floats) -> list[PhaseBreakdown]:
    """The median and slowest-1 % groups (none for no successful request)."""
    out = [group_breakdown(phases, g) for g in ("median", "p99")]
    return [b for b in out if b is not None]
