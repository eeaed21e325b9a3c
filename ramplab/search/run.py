"""``ramplab search``: probes chosen by ``search.py``, run by ``probe.py``, judged by
``verdict.py``.

Layout of a search::

    results/<name>-search-<UTC time>/
        campaign.yaml          the campaign as given
        search.json            every probe and the answer, rewritten after each probe
        search.md, search.html the report: probes in order, the bracket, the verdict
        logs/target.log        the reference target, started once for the whole search
        probe-01-8qps/         a normal run directory per probe (ramplab report reads it)
        probe-02-16qps/ ...

The target is started once and kept up: between probes the search waits until the target's
scheduler is idle (``target_running_sequences`` and ``target_waiting_sequences`` both 0 on its
``/metrics``, at most ``search.settle``), so a failed probe's queue never leaks into the next
one, then ``search.cooldown``. With ``--target`` nothing is started and only the cooldown
applies (a foreign server's metrics are unknown).

Exit codes: 0 an answer (found, or at least ``max_qps``, or the bracket when ``max_probes``
ran out), 2 bad input, 3 every probe failed (even the lowest rate misses the SLO), 4 the
generator was the limit (no rate: the reason is printed) or a probe run failed, 130
interrupted (every finished probe kept).
"""

from __future__ import annotations

import re
import sys
import time
import urllib.request
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from rich.console import Console, Group
from rich.live import Live
from rich.text import Text

from ramplab.campaign import preflight
from ramplab.campaign.schema import NAME_RULE, Campaign, is_valid_name
from ramplab.campaign.search import SearchSpec
from ramplab.errors import UsageError
from ramplab.exitcodes import ExitCode
from ramplab.results.acceptance import pass_probability, threshold
from ramplab.results.confidence import Interval
from ramplab.runs.naming import new_results_dir
from ramplab.runs.rebuild import CAMPAIGN_FILE
from ramplab.runs.signals import Interrupted, interruptible
from ramplab.search.probe import ProbeRun, probe_campaign, run_probe
from ramplab.search.report import write_search_report
from ramplab.search.strategy import Answer, Outcome, answer, bracket, next_rate
from ramplab.search.table import (
    SEARCH_FILE,
    print_search,
    probe_table,
    write,
)
from ramplab.search.verdict import Window, judge, windows_of
from ramplab.search.watch import ProbeWatch
from ramplab.stack.process import ManagedProcess, ProcessSpec, free_port
from ramplab.stack.readiness import HttpReady

__all__ = ["SearchRequest", "execute_search"]

_EXIT = {
    "found": ExitCode.OK,
    "above-max": ExitCode.OK,
    "probe-limit": ExitCode.OK,
    "below-min": ExitCode.SLO_MISSED,
    "generator-limited": ExitCode.RUN_FAILED,
    "interrupted": ExitCode.INTERRUPTED,
}
_IDLE_METRICS = re.compile(r"^target_(running|waiting)_sequences(?:\{[^}]*\})?\s+(\S+)", re.M)


@dataclass(slots=True)
class SearchRequest:
    """The CLI's ``search`` arguments after parsing; ``spec`` has the CLI overrides applied."""

    campaign: Campaign
    campaign_text: str
    spec: SearchSpec
    locustfile: Path
    results_dir: Path = Path("results")
    run_name: str | None = None
    target_url: str | None = None
    workers: int | None = None
    redis_url: str | None = None
    argv: Sequence[str] = field(default_factory=list)


def check(request: SearchRequest) -> None:
    """Everything refused before a directory exists; ``UsageError`` names the field."""
    campaign = request.campaign
    if not campaign.slo:
        raise UsageError("slo", "a search needs an SLO to search against, e.g. slo: {ttft_ms: 800}")
    if campaign.mode != "open":
        raise UsageError("mode", "a search sets arrival rates: it needs mode: open")
    if not request.locustfile.is_file():
        raise UsageError("--locustfile", f"{request.locustfile} does not exist")
    if request.run_name is not None and not is_valid_name(request.run_name):
        raise UsageError("--run-name", f"{request.run_name!r}: {NAME_RULE}")
    request.spec.check("search")
    preflight.check_campaign(probe_campaign(campaign, request.spec, request.spec.start_qps))


class _Target:
    """The reference target for the whole search (``None`` url given: start it)."""

    def __init__(self, request: SearchRequest, log_dir: Path) -> None:
        self.given = request.target_url
        self.url = request.target_url or ""
        self.process: ManagedProcess | None = None
        self.env = preflight.target_env(request.campaign, request.redis_url)
        self.workers = request.campaign.target.workers
        self.timeout_s = request.campaign.stack.health_timeout_s
        self.log_dir = log_dir

    def start(self) -> None:
        if self.given is not None:
            return
        port = free_port()
        self.url = f"http://127.0.0.1:{port}"
        argv = [sys.executable, "-m", "target_service", "--host", "127.0.0.1",
                "--port", str(port), "--workers", str(self.workers)]  # fmt: skip
        self.process = ManagedProcess(ProcessSpec("target", argv, dict(self.env)), self.log_dir)
        self.process.start()
        ready = HttpReady(self.url + "/readyz")
        deadline = time.monotonic() + self.timeout_s
        while not ready.ready():
            code = self.process.poll()
            if code is not None or time.monotonic() > deadline:
                tail = self.process.log_tail()
                what = f"exited with code {code}" if code is not None else "is not ready"
                if code == 2:  # the target refused its settings
                    raise UsageError("target.settings", f"the target {what}:\n{tail}")
                raise RuntimeError(f"the target {what} (log: {self.process.log_path})\n{tail}")
            time.sleep(0.1)

    def alive(self) -> bool:
        return self.process is None or self.process.poll() is None

    def busy(self) -> int | None:
        """Sequences running or waiting on the local target; ``None`` when unknown."""
        if self.process is None:
            return None
        try:
            with urllib.request.urlopen(self.url + "/metrics", timeout=2) as response:  # noqa: S310 - our loopback target
                text = response.read().decode("utf-8", "replace")
        except OSError:
            return None
        found = _IDLE_METRICS.findall(text)
        return round(sum(float(v) for _, v in found)) if found else None

    def settle(self, limit_s: float) -> float | None:
        """Wait until the target is idle; the seconds waited, ``None`` if it never was."""
        start = time.monotonic()
        while True:
            busy = self.busy()
            if busy in (0, None):
                return time.monotonic() - start
            if time.monotonic() - start > limit_s:
                return None
            time.sleep(0.2)

    def stop(self) -> None:
        if self.process is not None:
            self.process.stop(15.0)


def _interval(value: Interval) -> dict[str, Any]:
    return asdict(value)


def probe_record(
    index: int, phase: str, spec: SearchSpec, run: ProbeRun, base: Path
) -> tuple[dict[str, Any], Outcome | None]:
    """One probe for ``search.json`` and, when it finished, its outcome for the search."""
    record: dict[str, Any] = {
        "index": index,
        "phase": phase,
        "rate": run.rate,
        "run_dir": str(run.run_dir.relative_to(base)),
        "duration_s": round(run.finished - run.started, 2),
        "generator_cpu": {k: round(v, 4) for k, v in run.cpu.items()},
        "generator_check": "cpu+lateness" if run.cpu_measured else "lateness only",
        "early_stop": run.early,
    }
    summary = run.summary
    if summary is not None:
        windows = windows_of(summary)
        record["windows"] = [
            {**asdict(w), "attainment": w.attainment} for w in windows
        ]  # fmt: skip
        record["achieved_qps"] = (
            sum(w.achieved_qps for w in windows) / len(windows) if windows else None
        )
        record["offered_qps"] = summary.offered_qps
        record["counts"] = counts(windows)
        record["lateness_ms"] = summary.lateness_ms.model_dump()
        record["ttft_ms"] = summary.ttft_ms.model_dump()
        record["itl_ms"] = summary.itl_ms.model_dump()
        if spec.criterion == "test" and windows:
            n = sum(w.arrivals for w in windows)
            needed = threshold(n, spec.floor, spec.confidence)
            record["test"] = {
                "arrivals": n,
                "needed": needed,
                "power_at_goal": pass_probability(n, needed, spec.goal),
            }
    if run.interrupted:
        record.update(verdict="interrupted", reason="interrupted")
        return record, None
    if run.failure is not None or summary is None:
        record.update(verdict="error", reason=run.failure or "nothing was measured")
        return record, None
    judged = judge(spec, windows, run.cpu, summary.lateness_ms.p99, run.early)
    if summary.generator_bound and judged.verdict != "generator-limited":
        # The workers' own self-check (summary.md) saw what the search's sampling may not.
        reason = "; ".join(st.generator_reason or "" for st in summary.steps if st.generator_bound)
        judged = replace(judged, verdict="generator-limited", reason=f"self-check: {reason}")
    record.update(
        attainment=_interval(judged.attainment),
        wilson=_interval(judged.wilson),
        t=_interval(judged.t),
        verdict=judged.verdict,
        reason=judged.reason,
    )
    return record, Outcome(run.rate, judged.verdict, judged.reason)


def counts(windows: Sequence[Window]) -> dict[str, int | None]:
    """The hold's arrivals by fate (``results/conservation.py``'s law, summed over windows)."""

    def total(values: Sequence[int | None]) -> int | None:
        return None if any(v is None for v in values) else sum(v or 0 for v in values)

    return {
        "scheduled": total([w.scheduled for w in windows]),
        "dispatched": total([w.dispatched for w in windows]),
        "completed": sum(w.completed for w in windows),
        "failed": sum(w.failed for w in windows),
        "unfinished": sum(w.unfinished for w in windows),
        "dropped": sum(w.dropped for w in windows),
        "lost": total([w.lost for w in windows]),
        "unaccounted": total([w.unaccounted for w in windows]),
        "missing": sum(max(0, w.missing) for w in windows),
    }


def _answer_record(ans: Answer, probes: Sequence[dict[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {
        "status": ans.status,
        "rate": ans.rate,
        "bracket": list(ans.bracket),
        "reason": ans.reason,
        "exit_code": int(_EXIT[ans.status]),
    }
    if ans.rate is not None:
        at = [p for p in probes if p.get("rate") == ans.rate and p.get("verdict") == "pass"]
        if at:
            out["attainment"] = at[-1].get("attainment")
    return out


class _Progress:
    """Live view: the probe table so far and a line about the probe running."""

    def __init__(self, console: Console, data: dict[str, Any]) -> None:
        self.console = console
        self.data = data
        self.live: Live | None = None
        self.status = ""
        self._last = 0.0

    def __enter__(self) -> _Progress:
        if self.console.is_terminal:
            self.live = Live(self._render(), console=self.console, refresh_per_second=2)
            self.live.__enter__()
        return self

    def __exit__(self, *exc: object) -> None:
        if self.live is not None:
            self.live.__exit__(None, None, None)

    def _render(self) -> Group:
        return Group(probe_table(self.data["probes"]), Text(self.status))

    def running(self, rate: float, started: float, watch: ProbeWatch) -> None:
        self.status = (f"probe at {rate:g} QPS: {time.time() - started:.0f} s, "
                       f"{watch.measured} measured requests, {watch.misses} missed the SLO, "
                       f"{watch.dropped} dropped")  # fmt: skip
        if self.live is not None:
            self.live.update(self._render())
        elif time.monotonic() - self._last >= 5.0:
            self._last = time.monotonic()
            self.console.print(f"  {self.status}", highlight=False)

    def finished(self, record: dict[str, Any]) -> None:
        self.status = ""
        if self.live is not None:
            self.live.update(self._render())
            return
        att = (record.get("attainment") or {}).get("estimate")
        share = f"{att * 100:.1f} %" if isinstance(att, float) else "–"
        self.console.print(f"  probe {record['index']} at {record['rate']:g} QPS: "
                           f"{record['verdict']} (attainment {share}) — {record['reason']}",
                           highlight=False)  # fmt: skip


def execute_search(request: SearchRequest, console: Console) -> ExitCode:
    """Run the search; the probes' table and the answer on ``console``."""
    check(request)
    spec = request.spec
    base = new_results_dir(request.results_dir, request.run_name, request.campaign.name, "search")
    (base / "logs").mkdir()
    (base / CAMPAIGN_FILE).write_text(request.campaign_text, encoding="utf-8")
    workers = request.workers or request.campaign.stack.workers
    data: dict[str, Any] = {
        "campaign": request.campaign.name,
        "command": " ".join(request.argv) or None,
        "started": datetime.now(UTC).isoformat(),
        "target": request.target_url or "local reference target (kept up across probes)",
        "workers": workers,
        "slo": request.campaign.slo,
        "arrivals": request.campaign.arrivals,
        "spec": spec.model_dump(mode="json"),
        "min_requests_per_probe": spec.min_requests(),
        "plan": asdict(spec.plan()) if spec.criterion == "test" else None,
        "probes": [],
        "answer": None,
    }
    write(base / SEARCH_FILE, data)
    console.print(
        f"[bold]ramplab[/] search [cyan]{base}[/] ({request.campaign.name}: max QPS with "
        f"≥ {spec.goodput_min:g} % meeting {request.campaign.slo}, {workers} workers)"
    )
    target = _Target(request, base / "logs")
    outcomes: list[Outcome] = []
    interrupted = False
    failure: str | None = None
    with interruptible("the search"):
        try:
            target.start()
            console.print(f"  target {target.url} ready")
            with _Progress(console, data) as progress:
                failure = _loop(request, spec, target, base, workers, data, outcomes, progress)
        except Interrupted as exc:
            console.print(f"[yellow]{exc}: search stopped, finished probes kept[/]")
            interrupted = True
        except RuntimeError as exc:
            failure = str(exc)
        finally:
            target.stop()
    ans = answer(spec, outcomes, interrupted=interrupted)
    data["answer"] = _answer_record(ans, data["probes"])
    code = _EXIT[ans.status]
    if failure is not None and not interrupted:
        data["answer"].update(
            status="run-failed", reason=failure, exit_code=int(ExitCode.RUN_FAILED)
        )
        code = ExitCode.RUN_FAILED
    data["finished"] = datetime.now(UTC).isoformat()
    write(base / SEARCH_FILE, data)
    write_search_report(base, data)
    print_search(data, console)
    if code == ExitCode.RUN_FAILED:
        sys.stderr.write(f"ramplab: {data['answer']['reason']}\n")
    console.print(f"results: {base} (exit code {int(code)})")
    return code


def _loop(
    request: SearchRequest,
    spec: SearchSpec,
    target: _Target,
    base: Path,
    workers: int,
    data: dict[str, Any],
    outcomes: list[Outcome],
    progress: _Progress,
) -> str | None:
    """Probe until the search is over; a probe run's failure ends it (returned)."""
    retried = 0
    while (rate := next_rate(spec, outcomes)) is not None:
        index = len(data["probes"]) + 1
        low, high = bracket(outcomes)
        phase = "bisect" if low is not None and high is not None else "probe"
        settled = None
        if outcomes or data["probes"]:
            settled = target.settle(spec.seconds("settle"))
            time.sleep(spec.seconds("cooldown"))
        if not target.alive():
            return "the target died between probes (log: logs/target.log)"
        run_dir = base / f"probe-{index:02d}-{rate:g}qps"
        started = time.time()
        run: ProbeRun | None = None

        def tick(watch: ProbeWatch, rate: float = rate, started: float = started) -> None:
            progress.running(rate, started, watch)

        try:
            run = run_probe(
                request.campaign, spec, rate, run_dir,
                target_url=target.url, workers=workers, locustfile=request.locustfile,
                on_tick=tick,
            )  # fmt: skip
        finally:
            if run is None:  # interrupted: record what the probe left
                run = ProbeRun(rate, run_dir, started=started, finished=time.time(),
                               interrupted=True)  # fmt: skip
                record, _ = probe_record(index, phase, spec, run, base)
                data["probes"].append(record)
                write(base / SEARCH_FILE, data)
        record, outcome = probe_record(index, phase, spec, run, base)
        record["target_settled_s"] = round(settled, 2) if settled is not None else None
        data["probes"].append(record)
        write(base / SEARCH_FILE, data)
        progress.finished(record)
        if outcome is None:
            return f"probe {index} at {rate:g} QPS failed to run: {record['reason']}"
        if outcome.verdict == "generator-limited" and retried < spec.generator_retries:
            retried += 1  # not an outcome yet: next_rate gives the same rate again
            record["retried"] = True
            write(base / SEARCH_FILE, data)
            continue
        retried = 0
        outcomes.append(outcome)
    return None
