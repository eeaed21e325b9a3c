"""What a worker's schedule costs: built whole (before issue 24, part 4) vs streamed.

One worker of two walks its share of a Poisson schedule at 1,000 QPS, as the pacer reads it:
global indices and offsets as Python numbers. **Whole**: the old worker's path
(``bench/eager_schedule.py``): the global schedule (offsets and each arrival's stage), the share
dealt by ``worker_share``, its offsets, both as lists. **Streamed**: ``share_chunks`` over
``schedule_chunks``, one chunk as lists at a time. Each case runs in a fresh process; peak RSS
is the process's peak (``ru_maxrss``) less its RSS once imports are done, CPU its user + system
time over the walk. The whole schedule is measured on 1 h only: 10 h (36 M arrivals) was refused
by the cap it needed.
"""

from __future__ import annotations

import json
import resource
import subprocess
import sys
import time
from pathlib import Path

from bench.eager_schedule import eager_schedule
from ramplab.load.arrivals import Epoch, make_process, schedule_chunks, share_chunks, worker_share
from ramplab.load.shapes import parse_shape

QPS = 1000
SEED = 1
EPOCHS = [Epoch(0, ["w0", "w1"])]
WORKER = "w0"
CASES = [("whole", 1), ("streamed", 1), ("streamed", 10)]  # (how, hours)
BUDGET_MIB = 50  # a 10 h run's schedule, per worker (issue 24)


def _rss_kib() -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    raise RuntimeError("no VmRSS in /proc/self/status")


def _walk(how: str, hours: int) -> dict[str, float]:
    """One case, in this process: the share's length, peak RSS delta (MiB) and CPU (s)."""
    shape, process = parse_shape(f"{QPS}@{hours}h"), make_process("poisson")
    base_kib, cpu = _rss_kib(), time.process_time()
    count, last = 0, -1.0
    if how == "whole":
        offsets = eager_schedule(shape, process, SEED)
        stages = shape.stage_indices(offsets)
        share = worker_share(offsets, EPOCHS, WORKER)
        indices, times = share.tolist(), offsets[share].tolist()
        count, last = len(indices), times[-1]
        del offsets, stages, share, indices, times
    else:
        chunks = schedule_chunks(shape, process, SEED)
        for idx, off in share_chunks(chunks, EPOCHS, WORKER):
            indices, times = idx.tolist(), off.tolist()
            count += len(indices)
            last = times[-1] if times else last
    peak_kib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return {
        "arrivals": count,
        "last_offset_s": last,
        "peak_rss_mib": (peak_kib - base_kib) / 1024,
        "cpu_s": time.process_time() - cpu,
    }


def _measure(how: str, hours: int) -> dict[str, float]:
    out = subprocess.run(
        [sys.executable, "-m", "bench.schedule_memory", "--case", how, str(hours)],
        check=True,
        capture_output=True,
        text=True,
    )
    result: dict[str, float] = json.loads(out.stdout)
    return result


def run() -> str:
    results = {(how, hours): _measure(how, hours) for how, hours in CASES}
    whole, streamed = results["whole", 1], results["streamed", 1]
    assert whole["arrivals"] == streamed["arrivals"], "the two paths disagree"
    assert whole["last_offset_s"] == streamed["last_offset_s"], "the two paths disagree"
    lines = [
        "## Schedule memory per worker",
        "",
        f"One worker of two walks its share of a Poisson schedule at {QPS:,} QPS (seed {SEED}):",
        "the schedule built whole, as every process did before it streamed, vs streamed in",
        "chunks. Peak RSS over the process's RSS after imports; CPU = user + system.",
        "",
        "| run | schedule | arrivals (this worker) | peak RSS Δ | CPU |",
        "|---|---|---:|---:|---:|",
    ]
    for (how, hours), r in results.items():
        lines.append(
            f"| {hours} h × {QPS:,} QPS | {how} | {int(r['arrivals']):,} "
            f"| {r['peak_rss_mib']:.1f} MiB | {r['cpu_s']:.2f} s |"
        )
    ten_hours = results["streamed", 10]["peak_rss_mib"]
    verdict = "within" if ten_hours < BUDGET_MIB else "OVER"
    lines += [
        "",
        f"10 h streamed: {ten_hours:.1f} MiB, {verdict} the {BUDGET_MIB} MiB budget; whole "
        f"costs {whole['peak_rss_mib'] / max(streamed['peak_rss_mib'], 0.1):.0f}× the streamed "
        "peak on 1 h, and grows with the run.",
        "",
    ]
    return "\n".join(lines)


if __name__ == "__main__":
    if sys.argv[1:2] == ["--case"]:
        print(json.dumps(_walk(sys.argv[2], int(sys.argv[3]))))
    else:
        print(run())
