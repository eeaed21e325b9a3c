"""``RamplabPlugin``: everything ramplab adds to one Locust environment, built in one place.

Two global listeners, added by :func:`install` (which the user modules call, idempotently): the
options on Locust's parser (it exists before any environment), and Locust's ``init`` event, which
calls :func:`register` for the environment just created. Everything else is per environment:
the plugin object holds every part and passes references between them (the exporters get the
engines, the users get the context and the engines from the plugin), and adds one listener per
event to ``environment.events``, each doing its steps in the order written below.

``register`` (Locust's ``init``), in this order:
  1. every option is checked, so a bad one stops the process with exit 2 before anything starts;
  2. results: a ``ResultsWriter`` on a master or local run with ``--results-dir`` (the master
     appends the workers' batches to it), a ``Forwarder`` on a worker;
  3. ramp locustfiles only: the ``WorkerEngine`` (worker, local), the ``MasterEngine`` (master,
     local), their messages, the retry set-up and the per-request SLOs;
  4. the exporters, fed by the records and polling the engines;
  5. the progress writer (master or local, ``--ramplab-progress-file``).
The per-process ``UserContext`` is built for the first user (:meth:`RamplabPlugin.context`):
model discovery needs the target, and a worker's options are complete only once the master's
first spawn message has merged its own into them. Its sinks: the writer or forwarder, then the
exporters.

``test_stop`` (each time a node's users have stopped): flush the forwarder; stop the worker engine
(it sends its final progress report); sync the exporters with the engines' final counts; in a
web-UI run only, :meth:`~RamplabPlugin.summarize`.

``quitting`` (once, when the process shuts down): flush the forwarder; write the final progress
snapshot; :meth:`~RamplabPlugin.summarize` unless the summary on disk already holds every record;
close the writer; export the spans still batched (``--otlp-endpoint``).

``quit`` (after Locust printed its statistics): the exporters mark the run over and linger.

The summary is written once per run. A headless run ends at ``quitting``: a headless master's
``test_stop`` fires before the workers' last batches and progress reports arrive (Locust's
``quit()`` stops the master first, then tells the workers; ``final_reports.py`` makes it wait for
their last records), so that is the one point where the records are complete; the gates are
evaluated on that summary. In the web UI a run ends when the user presses stop (the process
stays up, and Locust's master waits for its workers to stop before firing ``test_stop``): the
summary and gates are written then, for everything recorded so far — a restarted test appends
to the same journal, and its stop rewrites the summary; ``quitting`` writes it again only when
records arrived after the last stop.
"""

from __future__ import annotations

import dataclasses
import logging
import os
import random
import socket
import sys
import time
from dataclasses import dataclass
from typing import Any, NoReturn

import gevent
from gevent.monkey import get_original
from locust import events as locust_events
from locust.env import Environment
from locust.runners import MasterRunner, WorkerRunner

from ramplab import options
from ramplab.errors import StorageError, UsageError
from ramplab.exitcodes import ExitCode
from ramplab.load.plan import PLAN_MESSAGE, PROGRESS_MESSAGE, Plan
from ramplab.measure.sockets import PollFactory
from ramplab.options import RunOptions
from ramplab.plugin import progress
from ramplab.plugin.clock_sync import ClockProbe, answer_pings
from ramplab.plugin.connect import ConnectWatch
from ramplab.plugin.context import Sink, UserContext
from ramplab.plugin.default_args import cache_default_args
from ramplab.plugin.engine_scrape import EngineScraper, metrics_url
from ramplab.plugin.exporters import Exporters, scenario_name
from ramplab.plugin.final_reports import FINAL_MESSAGE, quit_after_final_reports
from ramplab.plugin.forwarder import FLUSH_S, Forwarder, receive_into
from ramplab.plugin.master import MasterEngine
from ramplab.plugin.ondemand import keep_users
from ramplab.plugin.progress import ProgressWriter
from ramplab.plugin.role import Role
from ramplab.plugin.webui import install_tab
from ramplab.plugin.worker import WorkerEngine
from ramplab.results.failures import ceiling_verdict, kinds_text
from ramplab.results.outcome import exit_code
from ramplab.results.producer import RunFacts, summarize
from ramplab.results.slo import RequestSlo, print_gates
from ramplab.results.summary import RunSummary
from ramplab.results.trust import run_warnings
from ramplab.results.writer import RESERVE_BYTES, ResultsWriter
from ramplab.retry.config import RetrySetup
from ramplab.runs.rundir import RunDir

__all__ = ["RamplabPlugin", "install", "plugin_of", "register"]

ATTRIBUTE = "_ramplab_plugin"  # the one attribute ramplab sets on a Locust environment
log = logging.getLogger("ramplab")


def fail(message: str) -> NoReturn:
    """Stop the process with exit code 2 and ``message``: Locust catches ``SystemExit`` in
    greenlets and exceptions in event listeners, and a usage error must stop the process."""
    sys.stderr.write(f"ramplab: {message}\n")
    sys.stderr.flush()
    os._exit(int(ExitCode.USAGE))


def os_poll() -> PollFactory:
    """The OS's own ``select.poll``, which gevent's monkey-patching replaced (``client.py``)."""
    poll: PollFactory = get_original("select", "poll")
    return poll


class RamplabPlugin:
    """ramplab's parts for one Locust environment; make one with :func:`register`."""

    def __init__(self, environment: Environment, *, ramp: bool, poll: PollFactory) -> None:
        self.environment = environment
        self.ramp = ramp
        self.role = Role.of(environment.runner)
        self.poll = poll
        self.writer: ResultsWriter | None = None
        self.forwarder: Forwarder | None = None
        self.worker_engine: WorkerEngine | None = None
        self.master_engine: MasterEngine | None = None
        self.retry: RetrySetup | None = None
        self.slo: RequestSlo | None = None
        self.exporters: Exporters | None = None
        self.progress: ProgressWriter | None = None
        self._context: UserContext | None = None
        self._summarized: int | None = None  # records in the writer when the summary was written
        self._quit = False

    # -- start-up -------------------------------------------------------------------------
    def _start(self) -> None:
        parsed = self.environment.parsed_options
        if parsed is None:  # Locust used as a library: only the context, from defaults
            return
        settings = options.user_settings(parsed)
        metrics = options.metrics_settings(parsed)
        run = options.run_options(parsed) if self.ramp else None
        if run is not None and run.shape is None:
            raise UsageError("--ramplab-shape", "a ramp run needs a shape, e.g. '1,2,5@20s/5s'")
        if run is None and settings.session_turns > 1:
            # Sessions arrive on the ramp engine's schedule; a plain user would ignore the option.
            raise UsageError("--session-turns", "sessions need the ramp engine (llm_ramp.py)")
        runner = self.environment.runner
        if isinstance(runner, WorkerRunner):
            # A ramp worker's engine sends the records with its reports (``WorkerEngine.report``).
            self.forwarder = Forwarder(runner, autoflush=run is None)
        elif settings.results_dir is not None:
            try:
                self.writer = RunDir(settings.results_dir).open_writer(RESERVE_BYTES)
                # Reading the records yields to the event loop between batches: the heartbeat
                # and the workers' messages go on while millions of records are summarised.
                self.writer.files = dataclasses.replace(
                    self.writer.files, between_batches=lambda: gevent.sleep(0)
                )
            except OSError as exc:
                where = str(settings.results_dir)
                raise UsageError("", f"--results-dir {where!r}: {exc.strerror}") from None
            if isinstance(runner, MasterRunner):
                receive_into(runner, self.writer)
            else:  # users in this process: their records are written the way a worker sends them
                gevent.spawn(_flush_every, self.writer, FLUSH_S)
            self.writer.on_failure = self._on_storage_failure
        if run is not None:
            self._start_engines(run, settings.model)
            url = metrics_url(run.engine_metrics, str(self.environment.host or ""))
            if self.master_engine is not None and url is not None and settings.results_dir:
                self.master_engine.scraper = EngineScraper(
                    url,
                    RunDir(settings.results_dir).engine_metrics,
                    explicit=run.engine_metrics != "auto",
                )
        web_ui = getattr(self.environment, "web_ui", None)
        if web_ui is not None and self.master_engine is not None:
            install_tab(web_ui, self.master_engine)
        if Exporters.wanted(metrics, self.role):
            assert runner is not None
            self.exporters = Exporters(metrics, runner, self.worker_engine, self.master_engine)
            self.exporters.start(self.role, scenario_name(parsed, metrics.scenario))
        path = progress.progress_path(parsed)
        if path is not None and self.master_engine is not None:
            try:
                self.progress = ProgressWriter(self.master_engine, path)
            except OSError as exc:
                raise UsageError("", f"{progress.OPTION} {str(path)!r}: {exc.strerror}") from None

    def _start_engines(self, run: RunOptions, model: str | None) -> None:
        # httpx logs every request at INFO, which Locust's root logger shows and a worker forwards
        # to its master: at 300 QPS that is a large share of the generator's CPU, for nothing.
        logging.getLogger("httpx").setLevel(logging.WARNING)
        runner = self.environment.runner
        assert runner is not None
        self.slo = run.slo
        if self.role.sends:
            worker_id = str(runner.client_id) if isinstance(runner, WorkerRunner) else "local"
            engine = self.worker_engine = WorkerEngine(runner, worker_id)
            engine.records = self.forwarder
            keep_users(runner)  # users run until the test stops (``ondemand.py``)
            if run.retry is not None:
                rng = random.Random(f"{run.seed}/{worker_id}")
                self.retry = RetrySetup(run.retry, time.monotonic, rng)
            runner.register_message(
                PLAN_MESSAGE,
                lambda environment, msg, **_: engine.on_plan(Plan.from_message(msg.data)),
            )
            if isinstance(runner, WorkerRunner):
                answer_pings(runner)
                # Concurrent: stopping the users must not hold up the heartbeats.
                runner.register_message(
                    FINAL_MESSAGE, lambda environment, msg, **_: engine.finish(), concurrent=True
                )
        if self.role.coordinates:
            master = self.master_engine = MasterEngine(
                runner, run, "local" if self.role is Role.LOCAL else None, model
            )
            runner.register_message(
                PROGRESS_MESSAGE, lambda environment, msg, **_: master.on_progress(msg.data)
            )
            if isinstance(runner, MasterRunner):
                master.clocks = ClockProbe(runner)
                quit_after_final_reports(runner, master)

    def _listen(self) -> None:
        hooks: Any = self.environment.events  # Locust's event hooks take untyped listeners
        hooks.test_stop.add_listener(self._on_test_stop)
        hooks.quitting.add_listener(self._on_quitting)
        hooks.quit.add_listener(self._on_quit)

    # -- what the users ask for -----------------------------------------------------------
    def context(self) -> UserContext:
        """The process's shared context, built for the first user from the options as they are
        then (a usage error stops the process with exit 2)."""
        if self._context is None:
            environment = self.environment
            try:
                settings = options.user_settings(environment.parsed_options)
                host = environment.host or getattr(environment.parsed_options, "host", "") or ""
                context = UserContext.create(settings, host, self._worker_name(), self.poll)
                context.model()  # asks GET /v1/models now when --model is not given
            except UsageError as exc:
                fail(str(exc))
            context.sinks.extend(self._sinks())
            self._context = context
        return self._context

    def _sinks(self) -> list[Sink]:
        sinks: list[Sink] = []
        if self.writer is not None:
            sinks.append(self.writer.write)
        if self.forwarder is not None:
            sinks.append(self.forwarder.add)
        if self.exporters is not None and self.exporters.load is not None:
            sinks.append(self.exporters.observe)
        return sinks

    def _worker_name(self) -> str:
        runner = self.environment.runner
        if isinstance(runner, WorkerRunner):
            return str(runner.client_id)
        return f"{socket.gethostname()}_{os.getpid()}"

    def _on_storage_failure(self, error: StorageError) -> None:
        """The results cannot be written (a full disk): say so now, on stderr flushed at once
        (the log may be on that disk too, and its last page is the likeliest to have room),
        and stop the load at the shape's next tick; the records written are kept."""
        sys.stderr.write(f"ramplab: {error}\n")
        sys.stderr.flush()
        if self.master_engine is not None:
            self.master_engine.abort(str(error), ExitCode.RUN_FAILED)
        else:  # a plain (non-ramp) run: no shape to stop it
            self.environment.process_exit_code = int(ExitCode.RUN_FAILED)
            runner = self.environment.runner
            if runner is not None:
                gevent.spawn(runner.quit)

    # -- the end of a run -----------------------------------------------------------------
    def summarize(self) -> None:
        """Write ``summary.json`` for everything recorded so far, then set the process's exit
        code from it (ramp runs). The one place that writes the summary: the master engine's
        facts when there is a plan, else one step covering every record (a plain run)."""
        master = self.master_engine
        summary: RunSummary | None = None
        if self.writer is not None:
            self.writer.flush()
            if master is not None:
                try:
                    summary = master.summary(self.writer)
                except Exception:  # the records are safe on disk; a summary bug must not lose them
                    log.exception("computing the ramp summary failed")
            if summary is None:
                summary = summarize(self.writer.files, RunFacts())
            failure = self.writer.failure
            if failure is not None:
                reason = f"{failure}: {self.writer.refused} records could not be written"
                summary = summary.model_copy(update={"incomplete": (*summary.incomplete, reason)})
            try:
                self.writer.write_summary(summary)
            except StorageError as exc:  # the records are kept; a rebuild makes the summary
                sys.stderr.write(f"ramplab: {exc}\n")
                sys.stderr.flush()
                if master is not None:
                    master.abort(str(exc), ExitCode.RUN_FAILED)
                else:
                    self.environment.process_exit_code = int(ExitCode.RUN_FAILED)
        self._summarized = self.writer.written if self.writer is not None else 0
        if master is not None:
            code = _exit_code(master, summary)
            if code is not None:
                self.environment.process_exit_code = int(code)

    def _summary_is_current(self) -> bool:
        written = self.writer.written if self.writer is not None else 0
        return self._summarized == written

    def _on_test_stop(self, environment: Any, **_: Any) -> None:
        if environment is not self.environment:
            return
        if self.forwarder is not None:
            self.forwarder.flush()
        if self.worker_engine is not None:
            self.worker_engine.stop()
        if self.exporters is not None:
            self.exporters.sync()
        web_ui = not getattr(self.environment.parsed_options, "headless", True)
        if self.role.coordinates and web_ui and not self._quit:
            self.summarize()

    def _on_quitting(self, environment: Any, **_: Any) -> None:
        if environment is not self.environment or self._quit:
            return
        self._quit = True
        if self.forwarder is not None:
            self.forwarder.flush()
        if self.writer is not None:
            self.writer.flush()
        if self.progress is not None:
            # However long the summary takes, the progress file's heartbeat says it is working.
            self.progress.summarizing(self.writer.written if self.writer is not None else 0)
        if self.role.coordinates and not self._summary_is_current():
            self.summarize()
        if self.writer is not None:
            try:
                self.writer.finalize()
            except StorageError as exc:  # the journal stays: every reader reads it as well
                kept = self.writer.journal_path
                sys.stderr.write(f"ramplab: {exc}; the records stay in {kept}\n")
        if self.progress is not None:
            self.progress.finish()
        if self._context is not None and self._context.tracer is not None:
            self._context.tracer.close()  # the spans still batched

    def _on_quit(self, **_: Any) -> None:
        if self.exporters is not None:
            self.exporters.close()


def _flush_every(writer: ResultsWriter, period_s: float) -> None:
    while True:
        gevent.sleep(period_s)
        writer.flush()


def _exit_code(master: MasterEngine, summary: RunSummary | None) -> ExitCode | None:
    """A ramp run's exit code (``results.outcome.exit_code``), with what the user should read first:
    the outage that could not be scheduled, an empty run, the gate verdicts, the error ceiling.
    ``None``: no ``--results-dir``, nothing was summarised, Locust's own exit code stands."""
    if master.stop_error is not None:
        sys.stderr.write(f"ramplab: {master.stop_error}\n")
    elif summary is None:
        return None
    elif summary.requests == 0:
        sys.stderr.write("ramplab: the run produced no request records\n")
    else:
        if summary.gates:
            print_gates(summary.gates)
        for warning in run_warnings(summary):
            sys.stderr.write(f"ramplab: {warning}\n")
        verdict = ceiling_verdict(summary, master.options.max_error_ratio)
        if verdict is not None:
            kinds = kinds_text(summary.error_kinds, summary.errors)
            sys.stderr.write(f"ramplab: {verdict}: {kinds}\n")
    return exit_code(
        summary,
        usage_error=master.stop_exit == ExitCode.USAGE,
        run_failed=master.stop_exit == ExitCode.RUN_FAILED,
        max_error_ratio=master.options.max_error_ratio,
    )


# -- installation on Locust ---------------------------------------------------------------
@dataclass(slots=True)
class _Installation:
    """What :func:`install` has put on Locust's global events (once per process)."""

    listening: bool = False
    ramp: bool = False


_installed = _Installation()
_connect_watch = ConnectWatch()


def install(*, ramp: bool) -> None:
    """Make Locust load ramplab: its options on the parser, a plugin for every environment.

    Idempotent; ``ramp=True`` (a ramp locustfile's classes were imported) adds the ``--ramplab-*``
    options and the engines, and is kept by later ``ramp=False`` calls.
    """
    if ramp and not _installed.ramp:
        _installed.ramp = True
        cache_default_args()
    if _installed.listening:
        return
    _installed.listening = True
    hooks: Any = locust_events  # Locust's event hooks take untyped listeners
    hooks.init_command_line_parser.add_listener(_add_options)
    hooks.init.add_listener(_on_init)


def _add_options(parser: Any, **_: Any) -> None:
    options.register_stream_options(parser)
    _connect_watch.wrap(parser)
    if _installed.ramp:
        options.register_ramp_options(parser)
        if progress.OPTION not in parser._option_string_actions:  # the schema may define it
            progress.register_option(parser)


def _on_init(environment: Environment, **_: Any) -> None:
    if isinstance(environment.runner, WorkerRunner):
        _connect_watch.connected()
    register(environment, ramp=_installed.ramp)
    # Locust arms ``--run-time`` with ``gevent.spawn_later`` right after ``init``, and gevent
    # counts from the loop's cached "now", last refreshed when the hub was made, before the
    # imports and this set-up: a ``-t 3s`` run ended 0.5-2.9 s early on a busy machine (no
    # request sent at all, in the worst case). Refreshed here, ``-t`` counts from now.
    gevent.get_hub().loop.update_now()


def register(
    environment: Environment, *, ramp: bool = False, poll: PollFactory | None = None
) -> RamplabPlugin:
    """The environment's plugin, built and started now (once: a second call returns it).

    ``poll`` checks idle connections (default: the OS's poll, not gevent's). A usage error stops
    the process with exit code 2 and a message naming the option.
    """
    existing = getattr(environment, ATTRIBUTE, None)
    if isinstance(existing, RamplabPlugin):
        return existing
    plugin = RamplabPlugin(environment, ramp=ramp, poll=poll or os_poll())
    setattr(environment, ATTRIBUTE, plugin)
    try:
        plugin._start()
    except UsageError as exc:
        fail(str(exc))
    plugin._listen()
    return plugin


def plugin_of(environment: Environment) -> RamplabPlugin:
    """The plugin of ``environment``; registered now if Locust's ``init`` did not (Locust used as
    a library, where firing ``init`` is up to the caller)."""
    existing = getattr(environment, ATTRIBUTE, None)
    if isinstance(existing, RamplabPlugin):
        return existing
    return register(environment, ramp=_installed.ramp)
