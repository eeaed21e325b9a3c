"""The generator's CPU per process: real /proc of this process, and the window arithmetic."""

from __future__ import annotations

import os
import time

import pytest

from ramplab.search.cpu import TICKS_PER_S, CpuSampler, cpu_ticks


@pytest.mark.skipif(not os.path.exists("/proc/self/stat"), reason="needs Linux /proc")
def test_cpu_ticks_grow_while_this_process_computes() -> None:
    before = cpu_ticks(os.getpid())
    deadline = time.process_time() + 0.2
    while time.process_time() < deadline:
        pass
    after = cpu_ticks(os.getpid())
    assert before is not None
    assert after is not None
    assert after - before >= 0.1 * TICKS_PER_S


def test_a_missing_process_reads_as_none() -> None:
    assert cpu_ticks(2**22 + 12345) is None


def test_share_is_cpu_over_wall_time_inside_the_window() -> None:
    now = [0.0]
    ticks = {"worker-1": [0, 50, 100, 150, 300], "worker-2": [0, 10, 20, 30, 40]}
    pids = {"worker-1": 1, "worker-2": 2}
    reads = {1: iter(ticks["worker-1"]), 2: iter(ticks["worker-2"])}
    sampler = CpuSampler(pids, clock=lambda: now[0], read=lambda pid: next(reads[pid]))
    for t in (0.0, 1.0, 2.0, 3.0, 4.0):
        now[0] = t
        sampler.sample()
    share = sampler.share(1.0, 3.0)  # samples at 1, 2, 3: the warm-up and the tail are out
    assert share["worker-1"] == pytest.approx(100 / TICKS_PER_S / 2.0)
    assert share["worker-2"] == pytest.approx(20 / TICKS_PER_S / 2.0)
    assert sampler.share(3.5, 3.9) == {}
