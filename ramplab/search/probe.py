"""One probe: a normal run directory at one constant rate, against a target that stays up.

The search starts the reference target once (``search_run.py``) and gives each probe a fresh
Locust master and workers pointed at it: the master's shape is the probe's (warm-up, then
``windows`` equal stages) and a Locust master runs exactly one shape, so it cannot be reused,
but the target — the slow part to start, and the thing being measured — is never restarted
and never sees settings change within a search. Each probe leaves the same files as
``ramplab run`` (``campaign.yaml``, ``requests.parquet``, ``summary.json``, ``report.*``,
``run.json``, ``logs/``), so ``ramplab report`` and ``compare`` read it like any run.

While the probe runs, its workers' CPU is sampled (``cpu.py``) and the live watch
(``watch.py``) may stop it early: the master gets SIGINT, writes what it has, and the summary
is rebuilt over the windows that ran — the same path as an interrupted ``ramplab run``.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import yaml

from ramplab.campaign.schema import Campaign
from ramplab.campaign.search import SearchSpec
from ramplab.errors import StackError, UsageError
from ramplab.report.run import write_report
from ramplab.results.summary import RunSummary
from ramplab.runs.rebuild import CAMPAIGN_FILE, interrupted_summary, load_summary
from ramplab.runs.rundir import RunDir
from ramplab.search.cpu import CpuSampler
from ramplab.search.watch import ProbeWatch
from ramplab.stack.local import LocalStack, StackConfig

__all__ = ["ProbeRun", "probe_campaign", "run_probe"]

# Beyond the shape and its drain, how long a probe's master may take to start and finish.
MASTER_SLACK_S = 60.0


class _StopProbe(Exception):
    """The live watch decided: this probe cannot pass."""


@dataclass(slots=True)
class ProbeRun:
    """What one probe produced; ``summary`` is ``None`` when nothing was measured."""

    rate: float
    run_dir: Path
    summary: RunSummary | None = None
    cpu: dict[str, float] = field(default_factory=dict)
    cpu_measured: bool = False
    early: str | None = None
    failure: str | None = None  # the run itself failed (a process died, a timeout)
    interrupted: bool = False
    started: float = 0.0
    finished: float = 0.0


def probe_campaign(campaign: Campaign, spec: SearchSpec, rate: float) -> Campaign:
    """The campaign of one probe: its shape at ``rate``; gates and the search section dropped
    (the probe's verdict is the search's, not the gates')."""
    return campaign.model_copy(
        update={"shape": spec.shape_text(rate), "steps": None, "gates": [], "search": None}
    )


def _campaign_text(campaign: Campaign) -> str:
    data = campaign.model_dump(mode="json", exclude={"search"})
    data = {k: v for k, v in data.items() if v is not None}
    return yaml.safe_dump(data, sort_keys=False)


def _write_meta(run_dir: Path, meta: dict[str, Any]) -> None:
    (RunDir(run_dir).run_json).write_text(json.dumps(meta, indent=2) + "\n", encoding="utf-8")


def run_probe(
    campaign: Campaign,
    spec: SearchSpec,
    rate: float,
    run_dir: Path,
    *,
    target_url: str,
    workers: int,
    locustfile: Path,
    on_tick: Any = None,
) -> ProbeRun:
    """Run one probe at ``rate`` into ``run_dir``; ``on_tick(watch)`` is called every poll.
    ``KeyboardInterrupt``-like exceptions raised by ``on_tick`` or a signal handler propagate
    after the probe's processes are stopped and its summary is saved."""
    probe = probe_campaign(campaign, spec, rate)
    shape = probe.load_shape
    try:
        (run_dir / "logs").mkdir(parents=True)
    except OSError as exc:
        raise UsageError("--results-dir", f"{run_dir}: {exc.strerror}") from None
    (run_dir / CAMPAIGN_FILE).write_text(_campaign_text(probe), encoding="utf-8")
    config = StackConfig(
        locustfile=locustfile,
        run_dir=run_dir,
        locust_args=probe.locust_args(),
        workers=workers,
        locust_env=probe.locust_env(),
        target_url=target_url,
        health_timeout_s=campaign.stack.health_timeout_s,
    )
    stack = LocalStack(config)
    result = ProbeRun(rate=rate, run_dir=run_dir, started=time.time())
    meta: dict[str, Any] = {
        "probe_qps": rate,
        "shape": probe.shape_text(),
        "target": target_url,
        "workers": workers,
        "started": datetime.now(UTC).isoformat(),
    }
    _write_meta(run_dir, meta)
    watch = ProbeWatch(run_dir, shape, spec)
    sampler = CpuSampler({})
    stopped_at: float | None = None
    try:
        stack.start()
        sampler = CpuSampler({w.name: w.pid for w in stack.workers})
        result.cpu_measured = sampler.available
        meta["processes"] = {p.name: p.pid for p in stack.processes}

        def tick() -> None:
            sampler.sample()
            watch.poll()
            if on_tick is not None:
                on_tick(watch)
            why = watch.reason()
            if why is not None:
                raise _StopProbe(why)

        timeout = shape.duration_s + probe.drain_s + MASTER_SLACK_S
        code = stack.wait(timeout, tick)
        if code is None:
            result.failure = f"the master did not finish within {timeout:g} s"
        elif code not in (0, 3) and not (code == 4 and _generator_bound(run_dir)):
            # 4 with a generator-bound summary is a measured probe: the search judges it.
            result.failure = f"the master exited with code {code} (log: {run_dir}/logs)"
    except _StopProbe as exc:
        stopped_at = time.time()
        result.early = str(exc)
    except StackError as exc:
        result.failure = str(exc)
    except BaseException:  # Ctrl-C, SIGTERM: stop, keep what ran, let the caller see it
        stopped_at = time.time()
        result.interrupted = True
        raise
    finally:
        meta["exit_codes"] = stack.stop()
        sampler.sample()
        result.finished = time.time()
        meta["finished"] = datetime.now(UTC).isoformat()
        _write_meta(run_dir, meta)
        result.summary = _summary(run_dir, stopped_at, result)
        if watch.run_start is not None:
            hold_start = watch.run_start + shape.stages[0].measured_start_s
            hold_end = min(watch.run_start + shape.duration_s, stopped_at or result.finished)
            result.cpu = sampler.share(hold_start, hold_end)
    return result


def _generator_bound(run_dir: Path) -> bool:
    """The master's summary says the generator was the bottleneck (``results/selfcheck.py``)."""
    try:
        return RunSummary.read(RunDir(run_dir).summary).generator_bound is True
    except UsageError:
        return False


def _summary(run_dir: Path, stopped_at: float | None, result: ProbeRun) -> RunSummary | None:
    """The master's summary, or the one rebuilt over what ran before an early stop."""
    if not RunDir(run_dir).records.exist():
        return None
    try:
        if stopped_at is not None:
            summary = interrupted_summary(run_dir, stopped_at)
        else:
            summary = load_summary(run_dir)
            if summary.rebuilt:
                summary.write(RunDir(run_dir).summary)
    except UsageError as exc:
        result.failure = result.failure or f"no summary: {exc}"
        return None
    write_report(run_dir, summary, summary.gates)
    return summary
