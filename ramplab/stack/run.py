"""One campaign run end to end: results directory, stack, live progress, summary, gates, report.

The exit code follows ``ramplab.exitcodes``: 0 done and every gate passed, 2 bad input (the
campaign, a gate, a setting the target or Locust refused), 3 a gate missed, 4 the run failed
(a process did not come up or died, the master timed out or wrote no records), 130 interrupted
— in every case after the processes are stopped and whatever was measured is kept: the
``summary.json`` is rebuilt from the records when the master could not write it.
"""

from __future__ import annotations

import secrets
import shlex
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.live import Live
from rich.markup import escape

from ramplab import data
from ramplab.campaign import preflight
from ramplab.campaign.schema import Campaign, Preflight
from ramplab.errors import StackError, StorageError, UsageError
from ramplab.exitcodes import ExitCode
from ramplab.report.run import print_results, write_report
from ramplab.results.failures import ceiling_verdict, top_kinds
from ramplab.results.outcome import exit_code
from ramplab.results.slo import Gate, evaluate_gates
from ramplab.results.summary import RunSummary
from ramplab.runs.naming import keep_trace, new_results_dir
from ramplab.runs.progress import LiveProgress
from ramplab.runs.rebuild import CAMPAIGN_FILE, interrupted_summary, load_summary
from ramplab.runs.rundir import RunDir, write_atomically
from ramplab.runs.signals import Interrupted, SignalGuard, interruptible
from ramplab.stack import probe
from ramplab.stack.dns import DEFAULT_NAME
from ramplab.stack.local import LocalStack, StackConfig
from ramplab.stack.monitoring import Monitoring, find_prometheus, loopback_address
from ramplab.stack.process import free_port

__all__ = ["RunRequest", "execute"]

DEFAULT_LOCUSTFILE = data.locustfile()
# Beyond the shape and its drain, how long the master may take to start and to stop — not to
# summarise: while it summarises, its heartbeat keeps ``ramplab run`` waiting, however many
# records there are (``LiveProgress.summarizing``).
MASTER_SLACK_S = 120.0
LINE_EVERY_S = 5.0


@dataclass(slots=True)
class RunRequest:
    """The CLI's ``run`` arguments after parsing."""

    campaign: Campaign
    campaign_path: Path
    campaign_text: str
    results_dir: Path = Path("results")
    run_name: str | None = None
    target_url: str | None = None
    workers: int | None = None
    web_ui: bool = False
    gates: list[Gate] = field(default_factory=list)  # --gate, parsed once by the CLI
    redis_url: str | None = None
    locustfile: Path = DEFAULT_LOCUSTFILE
    argv: Sequence[str] = ()
    metrics: bool = False
    prometheus: bool = False
    linger_s: float = 0.0
    master_bind: tuple[str, int] | None = None  # remote workers (``StackConfig.master_bind``)
    web_port: int | None = None  # with web_ui: this port (None: a free one)
    preflight: bool = True  # False: --no-preflight (the target is still reached first)
    max_error_ratio: float | None = None  # --max-error-ratio; None: the campaign's


def _stack_config(request: RunRequest, run_dir: Path, gates: list[Gate]) -> StackConfig:
    campaign = request.campaign
    target_env = preflight.target_env(campaign, request.redis_url)
    locust_env = campaign.locust_env()
    if campaign.outage is not None and request.target_url is None:
        # The master sets the outage through the admin API of the target we start: a token
        # for this run only. Against --target, RAMPLAB_ADMIN_TOKEN comes from the environment.
        token = secrets.token_urlsafe(24)
        target_env["APP_ADMIN_TOKEN"] = token
        locust_env["RAMPLAB_ADMIN_TOKEN"] = token
    args = campaign.locust_args()
    if gates:
        args += ["--ramplab-gate", ";".join(g.text for g in gates)]
    args += ["--ramplab-max-error-ratio", f"{_ceiling(request):g}"]
    return StackConfig(
        locustfile=request.locustfile,
        run_dir=run_dir,
        locust_args=args,
        workers=request.workers or campaign.stack.workers,
        locust_env=locust_env,
        target_url=request.target_url,
        target_env=target_env,
        target_workers=campaign.target.workers,
        target_tls=campaign.target.serves_tls,
        target_ca=campaign.target.generates_tls,
        dns_delay_ms=None if campaign.stack.dns is None else campaign.stack.dns.delay_ms,
        dns_name=DEFAULT_NAME if campaign.stack.dns is None else campaign.stack.dns.name,
        web_ui=request.web_ui,
        health_timeout_s=campaign.stack.health_timeout_s,
        master_bind=request.master_bind,
        web_port=request.web_port,
    )


def _monitoring(
    request: RunRequest, run_dir: Path, config: StackConfig, prometheus_bin: str | None
) -> Monitoring | None:
    """Exporter ports for every process and, with ``--prometheus``, the Prometheus extra."""
    if not (request.metrics or request.prometheus):
        return None
    monitoring = Monitoring(
        run_id=run_dir.name,
        scenario=request.campaign.name,
        workers=config.workers,
        linger_s=request.linger_s,
        prometheus_bin=prometheus_bin,
    )
    config.locust_args += monitoring.locust_args()
    config.worker_extensions.append(monitoring)
    if config.target_url is None:
        config.target_port = free_port()
        address: str | None = f"127.0.0.1:{config.target_port}"
    else:
        address = loopback_address(config.target_url)
    if prometheus_bin is not None:
        config.extras.append(monitoring.prometheus_extra(run_dir, address))
    return monitoring


def _write_meta(run_dir: Path, meta: dict[str, Any]) -> None:
    RunDir(run_dir).write_run_json(meta)


@dataclass(slots=True)
class _Outcome:
    """How the stack's part of the run ended, before the summary is looked at."""

    usage_error: bool = False
    run_failed: bool = False
    interrupted: bool = False
    stopped_at: float | None = None  # epoch seconds of the interrupt

    @property
    def failed(self) -> bool:
        return self.usage_error or self.run_failed

    def fail(self, code: ExitCode) -> None:
        self.usage_error = code == ExitCode.USAGE
        self.run_failed = code != ExitCode.USAGE


def execute(request: RunRequest, console: Console) -> ExitCode:
    """Run the campaign; prints progress and the tables on ``console``, errors on stderr."""
    gates = _check(request)
    if request.target_url is not None and request.master_bind is None:
        try:
            _preflight(request, console)
        except StackError as exc:
            sys.stderr.write(f"ramplab: {exc}\n")
            return ExitCode.RUN_FAILED
    _salt_prefixes(request)
    prometheus_bin = find_prometheus() if request.prometheus else None
    run_dir = new_results_dir(request.results_dir, request.run_name, request.campaign.name)
    (run_dir / "logs").mkdir()
    write_atomically(run_dir / CAMPAIGN_FILE, request.campaign_text)
    keep_trace(run_dir, request.campaign, request.campaign_text)
    config = _stack_config(request, run_dir, gates)
    monitoring = _monitoring(request, run_dir, config, prometheus_bin)
    meta = _start_meta(request, config, monitoring, run_dir, console)
    _announce(request, run_dir, config, console)
    outcome = _run_stack(request, LocalStack(config), monitoring, run_dir, meta, console)
    try:
        return _finish(request, run_dir, gates, meta, outcome, console)
    except StorageError as exc:
        # The master's own words when it stopped on a failed write (its records file), else
        # the write that failed here; the records written are kept for ``ramplab report``.
        raise _storage_fault(run_dir) or exc from None


def _finish(
    request: RunRequest,
    run_dir: Path,
    gates: list[Gate],
    meta: dict[str, Any],
    outcome: _Outcome,
    console: Console,
) -> ExitCode:
    """The summary (rebuilt when the master wrote none), the report, ``run.json``'s end; the
    run's exit code."""
    RunDir(run_dir).drop_reserve()
    summary = None
    if not outcome.failed or RunDir(run_dir).records.exist():  # nothing ran: no table
        summary = _summary(run_dir, gates, console, outcome)
    ceiling = _ceiling(request)
    code = exit_code(
        summary,
        interrupted=outcome.interrupted,
        usage_error=outcome.usage_error,
        run_failed=outcome.run_failed,
        max_error_ratio=ceiling,
    )
    ceiling_lines = []
    if code == ExitCode.SLO_MISSED and summary is not None:
        ceiling_lines = _ceiling_lines(summary, ceiling, run_dir, meta)
    meta.update({"exit_code": int(code), "finished": datetime.now(UTC).isoformat()})
    _write_meta(run_dir, meta)
    if summary is not None:
        written = write_report(run_dir, summary, summary.gates)
        print_results(summary, written, console, _title(summary, outcome))
    for line in ceiling_lines:
        console.print(line, highlight=False)
    if (
        code == ExitCode.RUN_FAILED
        and not outcome.failed
        and (summary is None or not summary.requests)
    ):
        console.print("[red]the run produced no request records[/]")
    console.print(f"results: {run_dir} (exit code {int(code)})")
    return code


def _ceiling(request: RunRequest) -> float:
    """The error ceiling: ``--max-error-ratio``, else the campaign's ``max_error_ratio``."""
    if request.max_error_ratio is not None:
        return request.max_error_ratio
    return request.campaign.max_error_ratio


def _ceiling_lines(
    summary: RunSummary, ceiling: float, run_dir: Path, meta: dict[str, Any]
) -> list[str]:
    """The error ceiling's verdict with the top error kinds, one server message each (console
    markup), recorded in ``meta``."""
    verdict = ceiling_verdict(summary, ceiling)
    if verdict is None:
        return []
    try:
        kinds = top_kinds([r for r in RunDir(run_dir).records.records() if not r.ok])
    except (OSError, ValueError):
        kinds = []
    meta["error_ceiling"] = {"verdict": verdict, "top_kinds": kinds}
    return [f"[red]{escape(verdict)}[/]", *(f"  {escape(line)}" for line in kinds)]


def _storage_fault(run_dir: Path) -> StorageError | None:
    """The write failure the master reported in its log (``ramplab: results disk full: ...``),
    when its log has it."""
    log = run_dir / "logs" / "master.log"
    try:
        lines = log.read_text(encoding="utf-8", errors="replace").splitlines()
    except OSError:
        return None
    for line in reversed(lines):
        for what in ("results disk full: ", "cannot write results: "):
            head = f"ramplab: {what}"
            if line.startswith(head) and line.endswith(")") and " (" in line:
                path, _, reason = line[len(head) : -1].rpartition(" (")
                return StorageError(path, reason, full=what.startswith("results disk"))
    return None


def _check(request: RunRequest) -> list[Gate]:
    """Everything that can be refused before a run directory exists; the run's gates."""
    gates = [*preflight.check_campaign(request.campaign), *request.gates]
    preflight.check_gates(request.campaign, request.gates, "--gate")
    if not request.locustfile.is_file():
        raise UsageError("--locustfile", f"{request.locustfile} does not exist")
    if request.linger_s and not (request.metrics or request.prometheus):
        raise UsageError("--linger", "keeps the exporters up: give --metrics or --prometheus")
    return gates


def _preflight(request: RunRequest, console: Console) -> None:
    """The target reached, its models and one real request (``ramplab.stack.probe``) before a
    run directory exists; a ``CampaignError`` (exit 2) or ``StackError`` (exit 4) otherwise."""
    assert request.target_url is not None
    campaign = request.campaign
    if not request.preflight:
        campaign = campaign.model_copy(update={"preflight": Preflight(models=False, request=False)})
    started = time.monotonic()
    probe.preflight(
        request.target_url,
        campaign,
        campaign.stack.health_timeout_s,
        lambda text: console.print(f"[yellow]note:[/] {escape(text)}"),
    )
    checks = campaign.preflight
    if checks.models or checks.request:
        done = [n for n, on in (("model listed", checks.models), ("one request", checks.request))
                if on]  # fmt: skip
        console.print(f"  preflight: {', '.join(done)} ok ({time.monotonic() - started:.1f} s)",
                      highlight=False)  # fmt: skip


def _salt_prefixes(request: RunRequest) -> None:
    """A fresh salt for this run's shared prefixes unless the campaign fixes one, so a rerun
    (a sweep's next cell, an experiment's repeat) does not hit a warm prefix cache by accident
    (docs/workloads.md)."""
    workload = request.campaign.workload
    if workload.shared_prefix and workload.prefix_salt is None:
        salted = workload.model_copy(update={"prefix_salt": secrets.token_hex(4)})
        request.campaign = request.campaign.model_copy(update={"workload": salted})


def _start_meta(
    request: RunRequest,
    config: StackConfig,
    monitoring: Monitoring | None,
    run_dir: Path,
    console: Console,
) -> dict[str, Any]:
    """``run.json`` as written before anything starts."""
    meta: dict[str, Any] = {
        "command": shlex.join(request.argv) if request.argv else None,
        "campaign": str(request.campaign_path),
        "target": request.target_url or "local reference target",
        "workers": config.workers,
        "locustfile": str(config.locustfile),
        "started": datetime.now(UTC).isoformat(),
        # Which counting produced the token figures the server did not report, and whether the
        # prompts were sent normalised (§3.3): a figure says how it was made.
        "tokenizer": request.campaign.workload.tokenizer,
        "normalise": request.campaign.workload.normalise,
    }
    if request.campaign.workload.prefix_salt is not None:
        meta["prefix_salt"] = request.campaign.workload.prefix_salt
    if monitoring is not None:
        target = request.target_url or f"http://127.0.0.1:{config.target_port}"
        if loopback_address(target) is None:
            console.print(f"[yellow]note:[/] {target} is not plain HTTP on loopback: "
                          "its /metrics is not scraped")  # fmt: skip
        meta["monitoring"] = monitoring.meta(run_dir, target if loopback_address(target) else None)
    _write_meta(run_dir, meta)
    return meta


def _announce(request: RunRequest, run_dir: Path, config: StackConfig, console: Console) -> None:
    campaign = request.campaign
    console.print(f"[bold]ramplab[/] run [cyan]{run_dir}[/] ({campaign.name}, {config.workers} "
                  f"workers, {campaign.load_shape.duration_s:g} s)")  # fmt: skip
    if request.target_url and campaign.target.settings:
        console.print("[yellow]note:[/] --target given: the campaign's target settings are unused")


def _run_stack(
    request: RunRequest,
    stack: LocalStack,
    monitoring: Monitoring | None,
    run_dir: Path,
    meta: dict[str, Any],
    console: Console,
) -> _Outcome:
    """Start the stack, watch the ramp, stop every process; what went wrong, first cause only."""
    outcome = _Outcome()
    master_code: int | None = None
    with interruptible() as guard:
        try:
            master_code = _ramp(request, stack, monitoring, guard, run_dir, meta, console, outcome)
        except StackError as exc:
            sys.stderr.write(f"ramplab: {exc}\n")
            if exc.log_tail:
                sys.stderr.write(f"--- last lines of {exc.process}'s log ---\n{exc.log_tail}\n")
            outcome.fail(ExitCode.USAGE if exc.exit_code == 2 else ExitCode.RUN_FAILED)
        except Interrupted as exc:
            outcome.stopped_at = time.time()
            console.print(f"[yellow]{exc}: stopping the stack, keeping the results[/]")
            outcome.interrupted = True
        finally:
            guard.stopping = True
            meta["processes"] = {p.name: p.pid for p in stack.processes}
            dead = [(w.name, _last_words(w.log_tail(200))) for w in stack.dead_workers()]
            meta["exit_codes"] = stack.stop()
        outcome.interrupted = outcome.interrupted or guard.received is not None
    _process_failures(outcome, dead, master_code, run_dir, console)
    return outcome


def _ramp(
    request: RunRequest,
    stack: LocalStack,
    monitoring: Monitoring | None,
    guard: SignalGuard,
    run_dir: Path,
    meta: dict[str, Any],
    console: Console,
    outcome: _Outcome,
) -> int | None:
    """The processes up, the ramp watched to its end; the master's exit code (``None``: it did
    not finish in time)."""
    campaign = request.campaign
    stack.start(on_step=lambda text: console.print(f"  {text}"))
    meta["target"] = stack.target_url
    meta["processes"] = {p.name: p.pid for p in stack.processes}
    _write_meta(run_dir, meta)
    if monitoring is not None:
        _print_monitoring(meta["monitoring"], console)
    timeout = campaign.load_shape.duration_s + campaign.drain_s + MASTER_SLACK_S
    progress = LiveProgress(run_dir, campaign.load_shape, stack.config.workers)
    master_code = _watch(stack, progress, timeout, console)
    if master_code is None:
        console.print(f"[red]the master did not finish within {timeout:g} s[/]")
        outcome.fail(ExitCode.RUN_FAILED)
    elif monitoring is not None:
        _after_ramp(monitoring, stack, guard, console, run_dir, meta)
    return master_code


def _generator_bound(run_dir: Path) -> bool:
    """The master's exit 4 is its summary's verdict (``generator_bound``), not a failure to run:
    the summary's warning says why and ``exit_code`` gives the 4."""
    try:
        return RunSummary.read(RunDir(run_dir).summary).generator_bound is True
    except UsageError:
        return False


def _last_words(log: str) -> str | None:
    """What a Locust process said as it died: its last ``ramplab: …`` line (the plugin's fatal
    message, ``plugin.fail``), else the last line of a traceback."""
    lines = [line.strip() for line in log.splitlines() if line.strip()]
    ours = [line for line in lines if line.startswith("ramplab: ")]
    if ours:
        return ours[-1].removeprefix("ramplab: ")
    if any(line.startswith("Traceback") for line in lines):
        return lines[-1]
    return None


def _process_failures(
    outcome: _Outcome,
    dead: list[tuple[str, str | None]],
    master_code: int | None,
    run_dir: Path,
    console: Console,
) -> None:
    """Workers that died and a master that exited with an error fail the run, unless an
    earlier cause (or an interrupt) already explains the end. A dead worker's own message is
    printed with its name: it is the cause, and otherwise only in its log."""
    if outcome.failed or outcome.interrupted:
        return
    if dead:
        names = ", ".join(name for name, _ in dead)
        console.print(f"[red]workers died during the run: {names}[/] (logs: {run_dir}/logs)")
        for name, words in dead:
            if words is not None:
                console.print(f"  {name}: {escape(words)}", highlight=False)
        outcome.fail(ExitCode.RUN_FAILED)
    elif master_code == 4 and (fault := _storage_fault(run_dir)) is not None:
        console.print(f"[red]the master stopped the run: {escape(str(fault))}[/]")
        outcome.fail(ExitCode.RUN_FAILED)
    elif master_code not in (None, 0, 3) and not (master_code == 4 and _generator_bound(run_dir)):
        console.print(f"[red]the master exited with code {master_code}[/] (log: {run_dir}/logs)")
        outcome.fail(ExitCode.USAGE if master_code == 2 else ExitCode.RUN_FAILED)


def _print_monitoring(info: dict[str, Any], console: Console) -> None:
    for name, url in info["endpoints"].items():
        console.print(f"  metrics: {name} {url}", highlight=False)
    prometheus = info.get("prometheus")
    if prometheus is not None:
        console.print(f"  Prometheus: {prometheus['url']}/graph (data in {prometheus['storage']})",
                      highlight=False)  # fmt: skip


def _after_ramp(
    monitoring: Monitoring,
    stack: LocalStack,
    guard: SignalGuard,
    console: Console,
    run_dir: Path,
    meta: dict[str, Any],
) -> None:
    """One last scrape of every process, then ``--linger``: the stack stays up to be looked at
    until the time is over or Ctrl-C (which ends the wait, not the run: its exit code stands)."""
    if not monitoring.settle(since=time.time()):
        console.print("[yellow]Prometheus did not scrape every process after the ramp: "
                      "its last counts may be short[/]")  # fmt: skip
    if monitoring.linger_s <= 0:
        return
    what = (
        f"Prometheus on {monitoring.prometheus_url}"
        if monitoring.prometheus_url
        else ("the target and the workers' /metrics")
    )
    console.print(f"ramp over: {what} stays up {monitoring.linger_s:g} s (Ctrl-C ends it now)",
                  highlight=False)  # fmt: skip
    until = datetime.now(UTC).timestamp() + monitoring.linger_s
    meta["lingering_until"] = datetime.fromtimestamp(until, UTC).isoformat()
    _write_meta(run_dir, meta)
    deadline = time.monotonic() + monitoring.linger_s
    try:
        while time.monotonic() < deadline and all(p.running for p in stack.extras):
            time.sleep(0.25)
    except Interrupted:
        guard.received = None


def _watch(
    stack: LocalStack, progress: LiveProgress, timeout: float, console: Console
) -> int | None:
    if console.is_terminal:
        with Live(progress.table(), console=console, refresh_per_second=2) as live:

            def redraw() -> None:
                progress.poll()
                live.update(progress.table())

            return stack.wait(timeout, redraw, progress.summarizing)
    last = 0.0

    def report() -> None:
        nonlocal last
        progress.poll()
        now = time.monotonic()
        if now - last >= LINE_EVERY_S:
            last = now
            console.print(f"  {progress.line()}", highlight=False)

    code = stack.wait(timeout, report, progress.summarizing)
    progress.poll()
    console.print(progress.table())
    return code


def _title(summary: RunSummary, outcome: _Outcome) -> str:
    title = "per-step summary"
    if summary.stopped_at_s is not None:
        how = "interrupted" if outcome.interrupted else "stopped"
        title += f" ({how} after {summary.stopped_at_s:.1f} s)"
    return title


def _summary(
    run_dir: Path, gates: list[Gate], console: Console, outcome: _Outcome
) -> RunSummary | None:
    """The master's summary (rebuilt and saved when it is missing or the run was interrupted)
    with its gate verdicts. Gates are evaluated here only on a rebuilt summary — by the same
    producer as the master's."""
    try:
        if outcome.interrupted:
            summary = interrupted_summary(run_dir, outcome.stopped_at, gates)
        else:
            summary = load_summary(run_dir, gates=gates)
    except UsageError as exc:
        console.print(f"[red]no summary: {exc}[/]")
        return None
    if outcome.interrupted:  # interrupted_summary wrote it
        console.print("[yellow]summary.json rebuilt from the records over what ran[/]")
    elif summary.rebuilt:  # the master wrote none (killed mid-run: cut at its last record)
        summary.write(RunDir(run_dir).summary)
        console.print("[yellow]summary.json rebuilt from the records[/]")
    if gates and not summary.gates:
        # A locustfile without the ramp engine does not know the gates: they are judged here.
        summary = summary.model_copy(update={"gates": evaluate_gates(gates, summary.to_json())})
        summary.write(RunDir(run_dir).summary)
    return summary
