"""Records at scale: the summary and the report of 10 k → 10 M records, and bytes per record.

The records are real ones, multiplied: a short real run (``ramplab run --rates 20,50``, 16-token
streams, against the local reference target) gives ~1,000 records; a synthetic run directory of
N records is built from them — each synthetic record a real one with a new id, a place in a
ten-step ramp (step, arrival, intended start spread over the step's window) and its latencies
and gaps jittered by ±0.1 % so that no two are equal. Each figure is measured in a fresh
process (CPU = user + system, peak RSS = the child's maximum resident set):

- ``summary``: ``rebuild_summary`` of the run directory (what the master and ``ramplab
  report`` do) over ``requests.parquet``;
- ``report``: ``ramplab report RUN_DIR`` without a summary: the summary, report.md and
  report.html;
- ``baseline``: the same summary the way it was computed before the columnar records — every
  record of a ``requests.jsonl`` loaded as a ``RequestRecord`` and ``steps.measure`` run per
  step and over the run (the record-level definitions) — on the same records.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import orjson
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from ramplab.records.files import ROW_GROUP, parquet_writer
from ramplab.records.journal import JournalTail
from ramplab.records.schema import SCHEMA, dicts_of

REPO = Path(__file__).resolve().parents[1]
PYTHON = sys.executable
SIZES = (10_000, 100_000, 1_000_000, 10_000_000)
BASELINE_SIZES = (10_000, 100_000)
REPORT_SIZES = (10_000, 100_000, 1_000_000)
DUCKDB_SIZES = (1_000_000, 10_000_000)
RATES = [100 * (i + 1) for i in range(10)]  # the synthetic ramp's steps
JITTERED = ("ttft_ms", "ttft_send_ms", "ttlt_ms", "ttlt_send_ms", "tpot_ms", "total_ms",
            "answer_ttft_ms", "ttfb_ms")  # fmt: skip

SUMMARY = """
import sys
from pathlib import Path
from ramplab.runs.rebuild import rebuild_summary
summary = rebuild_summary(Path(sys.argv[1]))
print(summary.requests, summary.ttft_ms.p99, summary.itl_ms.p99)
"""
BASELINE = """
import sys
from pathlib import Path
from ramplab.campaign.schema import load_campaign
from ramplab.records.files import RecordFiles, scan_jsonl
from ramplab.results.steps import group_measured, measure
import json
run = Path(sys.argv[1])
campaign = load_campaign(run / "campaign.yaml")
start = json.loads((run / "progress.json").read_text())["run_start"]
records = [r for r in scan_jsonl(run / "requests.jsonl") if r is not None]
groups = group_measured(records, campaign.load_shape, start)
steps = [measure(g, st.measured_s) for g, st in zip(groups, campaign.load_shape.stages)]
total = measure([r for g in groups for r in g], 1.0)
print(total["requests"], total["ttft_ms"].p99, total["itl_ms"].p99)
"""


# Peak RSS read by the process itself at exit: ``wait4``'s ``ru_maxrss`` would count the pages
# of the (large) parent that the child shared between fork and exec.
PEAK = """
import atexit, sys
def _peak():
    for line in open("/proc/self/status"):
        if line.startswith("VmHWM:"):
            sys.stderr.write("\\nPEAK " + line.split()[1] + "\\n")
atexit.register(_peak)
"""
CLI = (
    PEAK
    + """
import runpy, sys
sys.argv = ["ramplab", *sys.argv[1:]]
runpy.run_module("ramplab", run_name="__main__")
"""
)

# DuckDB's exact percentiles of the same figures per step, for the query layer's choice: its
# own threads limited to the machine's, its memory as it needs.
DUCKDB = """
import sys, duckdb
path = sys.argv[1] + "/requests.parquet"
q = "[0.5, 0.9, 0.95, 0.99, 0.999]"
rows = duckdb.sql(
    f"SELECT step, quantile_cont(ttft_ms, {q}), quantile_cont(ttlt_ms, {q}), "
    f"quantile_cont(tpot_ms, {q}), quantile_cont(ttft_send_ms, {q}) "
    f"FROM '{path}' WHERE ok GROUP BY step ORDER BY step").fetchall()
gaps = duckdb.sql(
    f"SELECT step, quantile_cont(gap, {q}) FROM "
    f"(SELECT step, unnest(itl_ms) AS gap FROM '{path}' WHERE ok) GROUP BY step").fetchall()
print(len(rows), len(gaps))
"""


@dataclass(frozen=True, slots=True)
class Cost:
    cpu_s: float
    wall_s: float
    rss_mib: float
    output: str


def measured(argv: list[str]) -> Cost:
    """Run ``argv`` to completion; its CPU, wall time and peak RSS (``wait4``'s usage)."""
    started = time.perf_counter()
    proc = subprocess.Popen(argv, cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert proc.stdout is not None
    assert proc.stderr is not None
    out, err = proc.stdout.read(), proc.stderr.read()
    _, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    wall = time.perf_counter() - started
    if proc.returncode != 0:
        raise RuntimeError(f"{argv} exited {proc.returncode}: {err.decode()[-2000:]}")
    peak = int(err.decode().rsplit("PEAK ", 1)[1].split()[0])
    return Cost(usage.ru_utime + usage.ru_stime, wall, peak / 1024, out.decode())


def real_run(workdir: Path) -> Path:
    """A short real run on loopback: the records every synthetic one is copied from."""
    subprocess.run(
        [PYTHON, "-m", "ramplab", "run", "--rates", "20,50", "--step", "15s", "--warmup", "3s",
         "--max-tokens", "16", "--results-dir", str(workdir), "--run-name", "real"],
        cwd=REPO, check=True, stdout=subprocess.DEVNULL,
    )  # fmt: skip
    return workdir / "real"


def synthetic(real: pa.Table, n: int, out: Path, *, jsonl: bool) -> None:
    """A run directory of ``n`` records copied from ``real`` onto a ten-step ramp."""
    out.mkdir(parents=True)
    hold = n / sum(RATES)
    (out / "campaign.yaml").write_text(
        "name: scale\nshape:\n  kind: stepped\n"
        f"  rates: {RATES}\n  hold: {hold:.6f}s\n  warmup: 0s\n"
        "arrivals: constant\nworkload: {max_tokens: 16}\n"
    )
    run_start = 1_800_000_000.0
    counts = [round(rate * hold) for rate in RATES]
    counts[-1] += n - sum(counts)
    (out / "progress.json").write_bytes(orjson.dumps(
        {"run_start": run_start, "dispatched": counts, "dropped": [0] * len(RATES), "final": True}
    ))  # fmt: skip
    rng = np.random.default_rng(n)
    steps = np.repeat(np.arange(len(RATES)), counts)
    within = np.concatenate([np.sort(rng.uniform(0, hold, c)) for c in counts])
    intended = run_start + steps * hold + within
    jsonl_file = (out / "requests.jsonl").open("wb") if jsonl else None
    with parquet_writer(out / "requests.parquet") as writer:
        for at in range(0, n, ROW_GROUP):
            size = min(ROW_GROUP, n - at)
            chunk = real.take(pa.array(rng.integers(0, real.num_rows, size)))
            chunk = chunk.set_column(
                chunk.schema.get_field_index("request_id"),
                "request_id",
                pa.array([os.urandom(16).hex() for _ in range(size)]),
            )
            for name, values in (
                ("step", steps[at : at + size].astype(np.int32)),
                ("arrival", np.arange(at, at + size)),
                ("intended_start", intended[at : at + size]),
            ):
                index = chunk.schema.get_field_index(name)
                chunk = chunk.set_column(index, name, pa.array(values, SCHEMA.field(name).type))
            for name in JITTERED:
                index = chunk.schema.get_field_index(name)
                factor = pa.array(1 + rng.uniform(-1e-3, 1e-3, size))
                chunk = chunk.set_column(index, name, pc.multiply(chunk.column(name), factor))
            itl = chunk.column("itl_ms").combine_chunks()
            gaps = itl.values.to_numpy() * (1 + rng.uniform(-1e-3, 1e-3, len(itl.values)))
            jittered = pa.ListArray.from_arrays(itl.offsets, pa.array(gaps), mask=itl.is_null())
            chunk = chunk.set_column(chunk.schema.get_field_index("itl_ms"), "itl_ms", jittered)
            chunk = chunk.cast(SCHEMA)
            writer.write_table(chunk)
            if jsonl_file is not None:
                for batch in chunk.to_batches():
                    jsonl_file.write(b"".join(orjson.dumps(r) + b"\n" for r in dicts_of(batch)))
    if jsonl_file is not None:
        jsonl_file.close()


def _proc(pid: int) -> tuple[float, float]:
    """A process's CPU seconds and resident MiB, from /proc: the CPU time of every thread (ZMQ
    receives in threads of its own) from ``schedstat``, in nanoseconds — ``stat``'s 10 ms ticks
    are too coarse for a few milliseconds a second."""
    cpu_ns = 0
    for task in Path(f"/proc/{pid}/task").iterdir():
        with contextlib.suppress(OSError):
            cpu_ns += int((task / "schedstat").read_text().split()[0])
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    rss = int(fields[21]) * os.sysconf("SC_PAGE_SIZE") / 2**20
    return cpu_ns / 1e9, rss


@dataclass(frozen=True, slots=True)
class Live:
    workers: int
    qps: int
    records: int
    seconds: float
    cpu_s: float
    rss_start_mib: float
    rss_end_mib: float

    @property
    def cpu_us_per_record(self) -> float:
        return self.cpu_s / max(1, self.records) * 1e6


def marginal_us(low: Live, high: Live) -> float:
    """The master's CPU for one more record: the slope between two rates (its own timers,
    heartbeats and progress writes cost the same at any rate and cancel out)."""
    cpu = high.cpu_s / high.seconds - low.cpu_s / low.seconds
    records = high.records / high.seconds - low.records / low.seconds
    return cpu / records * 1e6


def live_master(workdir: Path, workers: int, qps: int = 100, seconds: int = 40) -> Live:
    """A live run on loopback: the master's CPU per record while the load runs (samples from
    /proc between 10 s in and 5 s before the end, so start-up and the summary are left out)."""
    out = workdir / f"live-{workers}-{qps}"
    proc = subprocess.Popen(
        [PYTHON, "-m", "ramplab", "run", "--rates", str(qps), "--step", f"{seconds}s",
         "--warmup", "0s", "--max-tokens", "16", "--workers", str(workers),
         "--results-dir", str(workdir), "--run-name", out.name],
        cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 120
        master = None
        while master is None and time.monotonic() < deadline:
            with contextlib.suppress(OSError, ValueError, KeyError):
                master = int(json.loads((out / "run.json").read_text())["processes"]["master"])
            time.sleep(0.2)
        if master is None:
            raise RuntimeError("the run's master never started")
        tail = JournalTail(out / "requests.arrows")
        started = time.monotonic()
        samples: list[tuple[float, float, float, int]] = []
        records = 0
        while time.monotonic() - started < seconds - 5:
            records += sum(batch.num_rows for batch in tail.poll())
            elapsed = time.monotonic() - started
            if elapsed >= 10:
                cpu, rss = _proc(master)
                samples.append((elapsed, cpu, rss, records))
            time.sleep(1.0)
    finally:
        proc.wait(timeout=300)
    (t0, cpu0, rss0, n0), (t1, cpu1, rss1, n1) = samples[0], samples[-1]
    return Live(workers, qps, n1 - n0, t1 - t0, cpu1 - cpu0, rss0, rss1)


def _row(label: str, n: int, cost: Cost, baseline: Cost | None = None) -> str:
    ratio = (f"{baseline.cpu_s / cost.cpu_s:.1f}× less CPU, "
             f"{baseline.rss_mib / cost.rss_mib:.1f}× less memory") if baseline else ""  # fmt: skip
    return (f"| {label} | {n:,} | {cost.wall_s:.1f} | {cost.cpu_s:.1f} | {cost.rss_mib:,.0f} | "
            f"{ratio} |")  # fmt: skip


def run() -> str:
    rows: list[str] = []
    disk: list[str] = []
    with tempfile.TemporaryDirectory(prefix="ramplab-scale-") as tmp:
        workdir = Path(tmp)
        real_dir = real_run(workdir / "real-run")
        real = pq.read_table(real_dir / "requests.parquet")
        real = real.filter(pc.field("ok"))
        print(f"records_scale: {real.num_rows} real successful records", flush=True)
        for n in SIZES:
            run_dir = workdir / f"n{n}"
            synthetic(real, n, run_dir, jsonl=n in BASELINE_SIZES)
            size = (run_dir / "requests.parquet").stat().st_size
            line = f"| {n:,} | {size / n:,.0f} B"
            if n in BASELINE_SIZES:
                old = (run_dir / "requests.jsonl").stat().st_size
                line += f" | {old / n:,.0f} B |"
            else:
                line += " | |"
            disk.append(line)
            print(f"records_scale: {n:,} records written", flush=True)
            summary = measured([PYTHON, "-c", PEAK + SUMMARY, str(run_dir)])
            baseline = None
            if n in BASELINE_SIZES:
                baseline = measured([PYTHON, "-c", PEAK + BASELINE, str(run_dir)])
                # Same records, same figures: the two paths must agree before they are compared.
                if summary.output != baseline.output:
                    raise RuntimeError(f"figures differ: {summary.output} vs {baseline.output}")
                rows.append(_row("baseline: objects + steps.measure", n, baseline))
            rows.append(_row("summary (columnar)", n, summary, baseline))
            if n in DUCKDB_SIZES:
                duck = measured([PYTHON, "-c", PEAK + DUCKDB, str(run_dir)])
                rows.append(_row("DuckDB: latency + ITL percentiles per step only", n, duck))
            if n in REPORT_SIZES:
                shutil.rmtree(run_dir / "logs", ignore_errors=True)
                (run_dir / "requests.jsonl").unlink(missing_ok=True)
                report = measured([PYTHON, "-c", CLI, "report", str(run_dir)])
                rows.append(_row("`ramplab report` (summary + report.md + report.html)", n,
                                 report))  # fmt: skip
            shutil.rmtree(run_dir)
            print(f"records_scale: {n:,} records measured", flush=True)
        live = [live_master(workdir, w, qps) for w in (2, 8) for qps in (10, 100)]
    return "\n".join(
        [
            "## Records at scale: summary and report CPU and memory, bytes per record",
            "",
            "A real short run's successful 16-token records, multiplied onto a ten-step ramp "
            "(`bench/records_scale.py`); each figure in a fresh process. The baseline is the "
            "summary as it was computed before the columnar records: every record loaded as an "
            "object from `requests.jsonl`, the record-level definitions per step.",
            "",
            "| what | records | wall s | CPU s | peak RSS MiB | vs baseline |",
            "|---|---:|---:|---:|---:|---|",
            *rows,
            "",
            "| records | `requests.parquet` per record | `requests.jsonl` per record |",
            "|---:|---:|---:|",
            *disk,
            "",
            *_live_table(live),
        ]
    )


def _live_table(live: list[Live]) -> list[str]:
    rows = []
    for index, r in enumerate(live):
        marginal = f"{marginal_us(live[index - 1], r):.1f}" if r.qps == 100 else ""
        rows.append(f"| {r.workers} | {r.qps} | {r.records:,} | {r.cpu_us_per_record:.1f} | "
                    f"{marginal} | {r.rss_start_mib:.0f} → {r.rss_end_mib:.0f} |")  # fmt: skip
    return [
        "The master during a live run (`ramplab run --rates QPS --step 40s`, 16-token streams, "
        "local target): its CPU between 10 s in and 5 s before the end over the records "
        "written in that window, and its resident memory at both ends. The master's own "
        "timers cost the same at any rate; the marginal cost of a record is the slope between "
        "10 and 100 QPS.",
        "",
        "| workers | QPS | records | master CPU per record µs | marginal µs per record | "
        "master RSS MiB (start → end) |",
        "|---:|---:|---:|---:|---:|---|",
        *rows,
        "",
    ]
