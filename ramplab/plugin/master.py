"""The master's side: the plan, membership epochs, user sizing, the run's end, summary and gates.

The plan starts ``LEAD_S`` in the future so every worker has it (and its first users) before the
first arrival is due. A greenlet watches the live workers; when one joins or goes missing (Locust
marks a worker missing after ~3 s without heartbeats) a new epoch starts ``EPOCH_GRACE_S`` ahead
and the whole plan is broadcast again: the remaining workers re-split the rest of the schedule, so
the rate is kept. Arrivals dealt to a worker that died before the re-split are lost with it; the
summary reports them per step as ``lost`` (scheduled − dispatched − dropped).
"""

from __future__ import annotations

import logging
import math
import time
import uuid
from typing import Any

import gevent
import httpx
from locust.runners import STATE_MISSING, MasterRunner

from ramplab.errors import UsageError
from ramplab.exitcodes import ExitCode
from ramplab.load.outage import schedule_outage
from ramplab.load.plan import PLAN_MESSAGE, Plan
from ramplab.load.shapes import Shape
from ramplab.load.sizing import DEFAULT_MAX_LOSS, STALL_S, UserSizer
from ramplab.measure.record import UNFINISHED, RequestRecord
from ramplab.metrics.live import LiveFigures
from ramplab.options.run import RunOptions
from ramplab.plugin.clock_sync import ClockProbe
from ramplab.plugin.engine_scrape import EngineScraper
from ramplab.records.files import RecordFiles
from ramplab.results.producer import (
    EngineCounts,
    OutageFacts,
    RunFacts,
    scheduled_counts,
    summarize,
)
from ramplab.results.selfcheck import health_from_reports
from ramplab.results.summary import RunSummary
from ramplab.results.writer import ResultsWriter
from ramplab.runs.rebuild import truncated

LEAD_S = 2.0
EPOCH_GRACE_S = 0.5
WATCH_S = 0.5
log = logging.getLogger("ramplab.plugin")


class MasterEngine:
    def __init__(
        self, runner: Any, options: RunOptions, local_worker: str | None, model: str | None
    ) -> None:
        assert options.shape is not None
        self.runner = runner
        self.options = options
        self.model = model  # what the users ask for (--model), for the summary
        self.shape: Shape = options.shape
        self.local_worker = local_worker  # set when master and worker share one process
        self.plan: Plan | None = None
        self.progress: dict[str, dict[str, Any]] = {}
        self.live = LiveFigures()  # the workers' latency sketches, merged (``metrics/live.py``)
        self.sizer = UserSizer(
            max_users=options.max_users,
            headroom=options.headroom,
            default_duration_s=options.duration_prior_s,
            max_loss=DEFAULT_MAX_LOSS,
            stall_s=STALL_S,
        )
        self.users = 0
        self.outage_end_epoch: float | None = None
        # The run stops at once when set: an outage that could not be scheduled, a results
        # file that could not be written (``abort``).
        self.stop_error: str | None = None
        self.stopped_at: float | None = None  # epoch seconds of an ``abort``
        # Set when the master starts to quit (``final_reports.py``): workers leaving then are
        # not leaving mid-run.
        self.stopping = False
        self.stop_exit = ExitCode.OK
        self._watcher: gevent.Greenlet | None = None
        self.clocks: ClockProbe | None = None  # set by the plugin on a master with workers
        self.scraper: EngineScraper | None = None  # the server's /metrics, when it has them

    # -- membership -----------------------------------------------------------------------
    def live_workers(self) -> list[str]:
        if not isinstance(self.runner, MasterRunner):
            return [self.local_worker or "local"]
        return sorted(
            str(node.id) for node in self.runner.clients.values() if node.state != STATE_MISSING
        )

    def start(self) -> Plan:
        if self.plan is None:
            opts = self.options
            self.plan = Plan(
                start_epoch=time.time() + LEAD_S,
                shape=opts.shape_text,
                arrivals=opts.arrivals,
                seed=opts.seed,
                mode=opts.mode,
                overflow=opts.overflow,
                epochs=[(0.0, self.live_workers())],
                max_users=opts.max_users,
            )
            log.info(
                "plan: %s, start in %.1f s, workers %s", opts.shape_text, LEAD_S, self.plan.epochs
            )
            self.broadcast()
            self._schedule_outage(self.plan.start_epoch)
            self._watcher = gevent.spawn(self._watch)
            if self.scraper is not None:
                self.scraper.start()
        return self.plan

    def _schedule_outage(self, run_start: float) -> None:
        outage = self.options.outage
        if outage is None:
            return
        host = str(self.runner.environment.host or "")
        try:
            self.outage_end_epoch = schedule_outage(
                host, self.options.admin_token, outage, run_start
            )
        except UsageError as exc:
            self.stop_error, self.stop_exit = str(exc), ExitCode.USAGE
            log.error("%s", self.stop_error)
        except (RuntimeError, httpx.HTTPError) as exc:
            self.stop_error = f"scheduling the outage on {host} failed: {exc}"
            self.stop_exit = ExitCode.RUN_FAILED
            log.error("%s", self.stop_error)

    def abort(self, message: str, code: ExitCode) -> None:
        """Stop the run at the shape's next tick (within a second), exit with ``code``; the
        first cause stands."""
        if self.stop_error is None:
            self.stop_error, self.stop_exit = message, code
            self.stopped_at = time.time()

    def broadcast(self) -> None:
        assert self.plan is not None
        self.runner.send_message(PLAN_MESSAGE, self.plan.to_message())

    def _watch(self) -> None:
        while True:
            gevent.sleep(WATCH_S)
            plan = self.plan
            if plan is None:
                continue
            elapsed = time.time() - plan.start_epoch
            if elapsed >= self.shape.duration_s or self.stopping:
                # The schedule is over, or the run was stopped: workers quitting then leave no
                # arrivals to re-split (recording them made a finished run look as if a worker
                # had left mid-run).
                return
            live = self.live_workers()
            if live and live != plan.epochs[-1][1]:
                change_s = max(0.0, elapsed) + EPOCH_GRACE_S
                plan.epochs.append((change_s, live))
                log.warning("workers now %s: re-split from %.1f s", live, change_s)
                self.broadcast()

    def on_progress(self, data: dict[str, Any]) -> None:
        self.progress[str(data["worker"])] = data
        self.live.merge_wire(data.get("live") or {})
        self.sizer.observe_many(float(d) for d in data.get("durations_s") or ())

    # -- the shape's questions --------------------------------------------------------------
    def elapsed(self) -> float:
        return time.time() - self.start().start_epoch

    def wanted_users(self, elapsed: float) -> int:
        """Users for the current (and next) stage; never fewer than before, so none is killed
        in the middle of a request when the rate steps down."""
        stage = self.shape.stage_at(max(0.0, elapsed))
        if self.options.mode == "closed":
            # Closed loop: the stage's rate *is* the concurrency, which each worker enforces
            # (``WorkerEngine.closed_limit``); users only grow, so none is stopped with a request
            # in flight at a down-step or while the drain waits. No look ahead, or the last
            # second of a stage would run at the next one's concurrency. One spare user per
            # extra worker: Locust's even split may give a worker one fewer than its share.
            spare = len(self.live_workers()) - 1
            wanted = math.ceil(stage.rate) + spare if stage else 0
            self.users = min(self.options.max_users, max(self.users, wanted))
            return self.users
        upcoming = self.shape.stage_at(max(0.0, elapsed) + 1.0)
        rates = [s.rate for s in (stage, upcoming) if s is not None]
        rate = max(rates) if rates else 0.0
        live = self.live_workers()
        workers = max(1, len(live))
        wanted = max(workers, self.sizer.users(rate, workers))
        # The users the workers started on demand (``ondemand.py``): Locust splits the target
        # evenly, so it covers the most any worker runs, on every worker.
        running = [int(self.progress[w].get("users", 0)) for w in live if w in self.progress]
        wanted = max(wanted, workers * max(running, default=0))
        self.users = min(self.options.max_users, max(self.users, wanted))
        return self.users

    def finished(self, elapsed: float) -> bool:
        if self.stop_error is not None:
            return True
        if elapsed < self.shape.duration_s:
            return False
        live = set(self.live_workers())
        reports = [p for w, p in self.progress.items() if w in live]
        idle = all(p.get("busy", 0) == 0 and p.get("pending", 0) == 0 for p in reports)
        return idle or elapsed > self.shape.duration_s + self.options.drain_s

    # -- results ----------------------------------------------------------------------------
    def summary(self, writer: ResultsWriter) -> RunSummary | None:
        """The run's summary from the records written and the engine's facts (``None`` before
        the plan exists); the run's gates are evaluated in it. The requests a dead worker had
        in flight get their records first (``unfinished_records``)."""
        plan = self.plan
        if plan is None:
            return None
        for record in self.unfinished_records(writer.files):
            writer.write(record)
        writer.flush()
        if self.scraper is not None:
            self.scraper.stop()
        return summarize(writer.files, self.facts(plan))

    def unfinished_records(self, files: RecordFiles) -> list[RequestRecord]:
        """Records for the requests a worker had in flight when it stopped reporting (killed,
        or cut off from the master), from its last report's in-flight list: every one that has
        no record of its own. A worker that ended normally reports none in flight.

        Once the run is stopping, every worker's last report counts, not only a gone one's: a
        worker starved of CPU may still be connected, and even marked live again, when the
        master quits without its cut records (it missed the last-report wait, or its users
        outlasted ``KILL_USERS_S``); a CI run lost six records that way."""
        live = set(self.live_workers())
        gone = set(self.progress) if self.stopping else set(self.progress) - live
        if not any(self.progress[worker].get("in_flight") for worker in gone):
            return []
        arrivals: set[int] = set()
        starts: set[tuple[str, float]] = set()
        for batch in files.batches(["arrival", "worker", "intended_start"]):
            arrivals.update(a for a in batch.column("arrival").to_pylist() if a is not None)
            columns = (
                batch.column("worker").to_pylist(),
                batch.column("intended_start").to_pylist(),
            )
            starts.update(zip(*columns, strict=True))
        cut: list[RequestRecord] = []
        for worker in sorted(gone):
            report = self.progress[worker]
            reported_at = float(report.get("reported_at") or time.time())
            for flight in report.get("in_flight") or ():
                arrival, intended = flight["arrival"], float(flight["intended_start"])
                if arrival in arrivals or (arrival is None and (worker, intended) in starts):
                    continue
                cut.append(
                    RequestRecord(
                        request_id=uuid.uuid4().hex,
                        worker=worker,
                        intended_start=intended,
                        actual_start=float(flight["taken_at"]),
                        ok=False,
                        status=None,
                        error_kind=UNFINISHED,
                        step=flight["step"],
                        target_qps=flight["target_qps"],
                        arrival=arrival,
                        total_ms=max(0.0, reported_at - intended) * 1000.0,
                        lateness_ms=max(0.0, float(flight["taken_at"]) - intended) * 1000.0,
                        error_detail=_lost_detail(worker, worker in live),
                    )
                )
        return cut

    def facts(self, plan: Plan) -> RunFacts:
        """What the records cannot tell: the plan, the workers' counts, the outage, the gates.

        A run stopped before its schedule ended (Ctrl-C, SIGTERM, an outage that could not be
        scheduled) is summarised over what ran: the stages before the stop, the cut one ending
        there, so rates divide by the time that ran and no step that never ran shows 0 QPS."""
        # Where the workers stopped dispatching (the last of them), not when the summary is
        # made: arrivals due in between were never the workers' to send. An aborted run (a
        # results file that could not be written) stopped when it failed.
        stops = [float(p["stopped_at"]) for p in self.progress.values() if p.get("stopped_at")]
        stop_epoch = self.stopped_at or (max(stops) if stops else time.time())
        stopped_at_s: float | None = stop_epoch - plan.start_epoch
        shape: Shape | None = self.shape
        if stopped_at_s is not None and stopped_at_s < self.shape.duration_s:
            shape = truncated(self.shape, stopped_at_s)
        else:
            stopped_at_s = None
        if shape is None:  # stopped in the first warm-up: no measured window ran
            return RunFacts(run_start=plan.start_epoch, mode=plan.mode, stopped_at_s=stopped_at_s)
        stages = len(shape.stages)
        scheduled = None
        if plan.mode == "open":
            scheduled = scheduled_counts(self.shape, plan.arrivals, plan.seed, shape)
        outage = None
        if self.options.outage is not None and self.outage_end_epoch is not None:
            outage = OutageFacts(self.options.outage, self.outage_end_epoch)
        return RunFacts(
            shape=shape,
            run_start=plan.start_epoch,
            mode=plan.mode,
            shape_text=plan.shape,
            arrivals=plan.arrivals,
            seed=plan.seed,
            model=self.model,
            workers=plan.epochs,
            retry=self.options.retry_spec,
            slo=self.options.slo,
            scheduled=scheduled,
            counts=EngineCounts.from_reports(self._reports(stages), stages),
            outage=outage,
            gates=self.options.gates,
            clocks=self.clocks.offsets() if self.clocks is not None else None,
            health=health_from_reports(self.progress, stages),
            stopped_at_s=stopped_at_s,
            engine_metrics=self.scraper.samples_path if self.scraper is not None else None,
            max_users=self.options.max_users,
        )

    def _reports(self, stages: int) -> dict[str, dict[str, Any]]:
        """The workers' last reports with their per-stage counts cut to ``stages``."""
        return {
            worker: {
                **report,
                "dispatched": list(report["dispatched"])[:stages],
                "dropped": list(report["dropped"])[:stages],
                "peak_users": list(report.get("peak_users") or ())[:stages],
            }
            for worker, report in self.progress.items()
        }


def _lost_detail(worker: str, connected: bool) -> str:
    """Why the master, not the worker, wrote a request's record."""
    why = (
        "sent no record of it before the run ended (starved of CPU, or hung)"
        if connected
        else "stopped reporting (killed, or cut off from the master)"
    )
    return (
        f"its worker {worker} {why} with this request still in flight; total_ms is how long it "
        "had run by the worker's last report, and what it had received was lost with the worker"
    )
