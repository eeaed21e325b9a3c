"""The load generator's own CPU, per worker process, from ``/proc/PID/stat``.

Locust warns above 90 % CPU that its timings are no longer reliable; a probe whose worker sat
at a full core measured the client, not the target. ``CpuSampler`` reads each worker's
``utime + stime`` (clock ticks, fields 14 and 15 of ``/proc/PID/stat``) at every ``sample()``
and gives the share of one core each used between two instants (the probe's hold). Only
processes on this machine can be read: workers on other hosts are judged on lateness alone.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Mapping
from pathlib import Path

__all__ = ["CpuSampler", "cpu_ticks"]

TICKS_PER_S = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


def cpu_ticks(pid: int, proc: Path = Path("/proc")) -> int | None:
    """User plus system CPU of ``pid`` in clock ticks; ``None`` when it cannot be read."""
    try:
        text = (proc / str(pid) / "stat").read_text()
    except OSError:
        return None
    # The command name (field 2) is in parentheses and may hold spaces: split after it.
    fields = text[text.rfind(")") + 2 :].split()
    try:
        return int(fields[11]) + int(fields[12])  # utime, stime (fields 14 and 15)
    except (IndexError, ValueError):
        return None


class CpuSampler:
    """Samples named processes; ``share(start, end)`` is each one's CPU ÷ wall time over the
    first and last samples inside ``[start, end]`` (epoch seconds)."""

    def __init__(
        self,
        pids: Mapping[str, int],
        clock: Callable[[], float] = time.time,
        read: Callable[[int], int | None] = cpu_ticks,
    ) -> None:
        self.pids = dict(pids)
        self.clock = clock
        self.read = read
        self.samples: dict[str, list[tuple[float, int]]] = {name: [] for name in self.pids}

    @property
    def available(self) -> bool:
        return bool(self.pids) and all(self.read(pid) is not None for pid in self.pids.values())

    def sample(self) -> None:
        now = self.clock()
        for name, pid in self.pids.items():
            ticks = self.read(pid)
            if ticks is not None:
                self.samples[name].append((now, ticks))

    def share(self, start: float, end: float) -> dict[str, float]:
        """Share of one core per process over the window; processes with fewer than two
        samples in it are left out."""
        out: dict[str, float] = {}
        for name, series in self.samples.items():
            inside = [s for s in series if start <= s[0] <= end]
            if len(inside) < 2 or inside[-1][0] <= inside[0][0]:
                continue
            (t0, c0), (t1, c1) = inside[0], inside[-1]
            out[name] = (c1 - c0) / TICKS_PER_S / (t1 - t0)
        return out
