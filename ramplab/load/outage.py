"""An outage window scheduled on the reference target at exact run offsets, and the recovery.

Measuring "time to recover after an outage ends" needs the outage's end on the run's clock. The
reference target can inject outage windows (``faults.outages``, relative to the moment its admin
API applied the change), so the master, which owns the run's start time, sets the window itself
through ``PUT /admin/config`` right after it makes the plan: ``start_s`` is converted from run
offsets to "seconds after this PUT". The target's clock starts when it applies the change,
between our send and its answer, so the window is placed within that round trip (milliseconds
on loopback). With several target processes the others apply it up to the target's
``admin_poll_s`` later (0.5 s by default): use one process when the recovery time matters to
better than that. Other servers have no such API; there the option is refused at the PUT.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

import httpx

from ramplab.errors import UsageError
from ramplab.load.shapes import parse_duration

ADMIN_PATH = "/admin/config"
RECOVERY_WINDOW_S = 1.0
RECOVERY_THRESHOLD = 0.95


@dataclass(frozen=True, slots=True)
class Outage:
    """A window of ``duration_s`` starting ``start_s`` after the run start."""

    start_s: float
    duration_s: float

    @property
    def end_s(self) -> float:
        return self.start_s + self.duration_s


def parse_outage(text: str, field: str = "--ramplab-outage") -> Outage:
    """``"START+DURATION"`` in run time, e.g. ``"5s+3s"`` or ``"5+3"``."""
    start, plus, duration = text.partition("+")
    if not plus:
        raise UsageError(field, f"expected START+DURATION, e.g. 5s+3s, got {text!r}")
    try:
        outage = Outage(parse_duration(start, field), parse_duration(duration, field))
    except UsageError as exc:
        raise UsageError(field, str(exc)) from None
    if outage.duration_s <= 0:
        raise UsageError(field, f"the outage needs a duration > 0, got {text!r}")
    return outage


def schedule_outage(
    host: str,
    token: str,
    outage: Outage,
    run_start_epoch: float,
    *,
    wall: Callable[[], float] = time.time,
    timeout_s: float = 5.0,
) -> float:
    """Ask the target to fail from ``outage.start_s`` to ``outage.end_s`` of the run.

    Returns the epoch time the window ends (on our clock). Raises ``UsageError`` for a refused
    token or a server without the admin API, ``RuntimeError`` for any other refusal.
    """
    sent = wall()
    body = {
        "faults": {
            "outages": [
                {
                    "start_s": max(0.0, run_start_epoch + outage.start_s - sent),
                    "duration_s": outage.duration_s,
                }
            ]
        }
    }
    response = httpx.put(
        host.rstrip("/") + ADMIN_PATH,
        json=body,
        headers={"authorization": f"Bearer {token}"},
        timeout=timeout_s,
    )
    if response.status_code in (401, 403):
        raise UsageError("--ramplab-admin-token", f"the target refused it ({response.status_code})")
    if response.status_code == 404:
        raise UsageError(
            "--ramplab-outage",
            f"{host} has no {ADMIN_PATH} (not the reference target, or APP_ADMIN_TOKEN unset)",
        )
    if response.status_code != 200:
        raise RuntimeError(
            f"PUT {ADMIN_PATH} answered {response.status_code}: {response.text[:300]}"
        )
    return run_start_epoch + outage.end_s
