"""One worker's side of an open-loop run: its share of the schedule, paced, and its reports.

The worker streams the global schedule from the plan (same shape, process and seed as every other
worker), keeps the arrivals ``share_chunks`` deals it and paces them against ``time.perf_counter()``
(the clock the streaming user measures on), reading the schedule chunk by chunk as the run reaches
it. When the master announces a new membership epoch the pacer is re-split from the epoch's start:
the schedule is read again from the start (its arrivals before the change are only counted, not
kept), a CPU cost paid once per membership change, where keeping the schedule to re-split it would
cost its whole size in memory for the whole run. Every half second it reports per-stage counts of
dispatched and dropped arrivals, of finished and good requests and its peak users (measured windows
only), its users (busy, running, its cap), and the durations of the
requests finished since the last report (for the master's user sizing), its self-check per stage
(``ramplab.results.selfcheck``: its CPU and its event loop's lag), and the requests it has in
flight. The records finished since the last report go just before it, taken at the same instant:
every request the report counts as dispatched is either in a batch sent or in its in-flight list, so
when the worker dies the master can give each one a record (``MasterEngine.unfinished_records``).
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Iterator
from typing import Any

import gevent

from ramplab.load.arrivals.base import ArrivalProcess
from ramplab.load.arrivals.schedule import StageBounds, make_process, schedule_chunks
from ramplab.load.arrivals.split import ShareChunk, share_chunks
from ramplab.load.pacer import Arrival, Pacer
from ramplab.load.plan import PROGRESS_MESSAGE, Plan
from ramplab.load.shapes import Shape, Stage, parse_shape
from ramplab.load.sizing import worker_cap
from ramplab.measure.record import RequestRecord
from ramplab.measure.timebase import process_timebase
from ramplab.metrics.live import LiveFigures
from ramplab.plugin.dispatch import Dispatcher
from ramplab.plugin.forwarder import Forwarder
from ramplab.plugin.ondemand import UsersOnDemand
from ramplab.results.selfcheck import CPU_WINDOW_S, TICK_S, HealthAccumulator, loop_thread_ns
from ramplab.results.steps import MeasuredCounter, MeasuredPeak

REPORT_S = 0.5
# Killing a user runs its request's cut and record; only a wedged greenlet takes longer.
KILL_USERS_S = 5.0
log = logging.getLogger("ramplab.plugin")


class WorkerEngine:
    def __init__(self, runner: Any, worker_id: str) -> None:
        self.runner = runner
        self.worker_id = worker_id
        self.dispatcher = Dispatcher()
        # An arrival no parked user can take gets a user of its own, up to this worker's cap.
        self.on_demand = UsersOnDemand(runner, self.dispatcher, self.max_users)
        self.plan: Plan | None = None
        self.shape: Shape | None = None
        self.stage_bounds = StageBounds()
        self.process: ArrivalProcess | None = None  # a TraceArrivals also gives the lengths
        self.pacer: Pacer | None = None
        self.start_clock = 0.0  # perf_counter() value at the schedule's offset 0
        # Arrivals per stage's measured window (``steps.count_measured``'s rule), counted as
        # they are dispatched or dropped: the worker's part of the conservation law.
        self._dispatched: MeasuredCounter | None = None
        self._dropped: MeasuredCounter | None = None
        # Per stage's measured window, the most users this worker ran: beside its cap, it tells
        # what dropped arrivals (``recommend.dropped_arrivals``).
        self._peak_users: MeasuredPeak | None = None
        # Per stage's measured window, the records finished and those that were good (met the
        # SLO, or succeeded without one): the live SLO attainment of the web UI's tab.
        self._finished: MeasuredCounter | None = None
        self._good: MeasuredCounter | None = None
        self._durations: list[float] = []
        # Per step, sketches of the successful records' latencies since the last report: the
        # live figures the master merges (``live.py``); the summary is exact, from the records.
        self.live = LiveFigures()
        self._greenlets: list[gevent.Greenlet] = []
        self.health: HealthAccumulator | None = None
        # Set on a worker with a master: its records go with its reports (``report``).
        self.records: Forwarder | None = None
        self.final = False  # the last report is sent (``finish``)
        self._flights: dict[int, dict[str, Any]] = {}
        self._flight_ids = 0
        self.stopped_at: float | None = None  # epoch seconds the pacer stopped dispatching

    def on_plan(self, plan: Plan) -> None:
        if self.plan is not None and self.plan.start_epoch == plan.start_epoch:
            self._resplit(plan)
            return
        self.plan = plan
        self.final = False  # a new run (the web UI's restart)
        self.shape = parse_shape(plan.shape)
        # One offset between the clocks (``timebase.py``), not two reads a pause could split.
        self.start_clock = process_timebase().monotonic(plan.start_epoch)
        self.health = HealthAccumulator(self.shape)
        self._dispatched = MeasuredCounter(self.shape)
        self._dropped = MeasuredCounter(self.shape)
        self._peak_users = MeasuredPeak(self.shape)
        self._finished = MeasuredCounter(self.shape)
        self._good = MeasuredCounter(self.shape)
        self._greenlets.append(gevent.spawn(self._report_loop))
        self._greenlets.append(gevent.spawn(self._health_loop, self.health))
        if plan.mode != "open":
            return
        self.process = make_process(plan.arrivals)
        self.pacer = Pacer(
            self._share(plan),
            start=self.start_clock,
            clock=time.perf_counter,
            sleep=gevent.sleep,
            try_dispatch=self._dispatch,
            overflow="queue" if plan.overflow == "queue" else "drop",
            detail=False,
            on_drop=self._count_drop,
        )
        self._greenlets.append(gevent.spawn(self.pacer.run))
        log.info(
            "worker %s paces its share of ~%.0f arrivals",
            self.worker_id,
            self.shape.expected_arrivals,
        )

    def _share(self, plan: Plan) -> Iterator[ShareChunk]:
        assert self.shape is not None
        assert self.process is not None
        chunks = schedule_chunks(self.shape, self.process, plan.seed)
        seen = (self.stage_bounds.see(chunk) for chunk in chunks)
        return share_chunks(seen, plan.epoch_objects(), self.worker_id)

    def _resplit(self, plan: Plan) -> None:
        self.plan = plan
        if self.pacer is None or not plan.epochs:
            return
        change_s = plan.epochs[-1][0]
        self.pacer.resplit(self._share(plan), change_s)
        log.info("worker %s re-split at %.1f s", self.worker_id, change_s)

    def stage_of(self, arrival: Arrival) -> Stage:
        """The stage ``arrival`` was drawn in."""
        assert self.shape is not None
        return self.shape.stages[self.stage_bounds.stage_of(arrival.index)]

    def max_users(self) -> int:
        """This worker's share of ``--ramplab-max-users`` over the live workers."""
        plan = self.plan
        if plan is None or plan.max_users is None:
            return 0
        return worker_cap(plan.max_users, len(plan.epochs[-1][1]) if plan.epochs else 1)

    def _dispatch(self, arrival: Arrival) -> bool:
        if self.dispatcher.try_dispatch(arrival):
            assert self._dispatched is not None
            self._dispatched.add(arrival.offset_s)
            return True
        if self.on_demand.start_for(arrival):
            self._note_users()
            return True  # counted as dispatched when its user takes it (``take``)
        return False

    def take(self, user: object) -> Arrival | None:
        """The next arrival for ``user`` (an open-loop ramp user): the one it was started for,
        else the next one the pacer hands it; ``None`` when the run is over."""
        arrival = self.on_demand.take(user)
        if arrival is None:
            return self.dispatcher.wait()
        assert self._dispatched is not None
        self._dispatched.add(arrival.offset_s)
        return arrival

    def _note_users(self) -> None:
        if self._peak_users is not None:
            self._peak_users.add(time.perf_counter() - self.start_clock, self.users())

    def users(self) -> int:
        """The users this process runs, as Locust counts them."""
        return int(self.runner.user_count)

    def _count_drop(self, arrival: Arrival) -> None:
        assert self._dropped is not None
        self._dropped.add(arrival.offset_s)

    def closed_limit(self, stage: Stage) -> int:
        """This worker's share of a closed-loop stage's concurrency: the stage's users split
        over the live workers in id order, the first ones taking the remainder.

        Users are never stopped while the run lasts (``MasterEngine.wanted_users``): a stopped
        user's request would be killed in flight. Past its share a user idles instead, so at a
        down-step the requests in flight finish and only new ones wait."""
        total = math.ceil(stage.rate)
        live = sorted(self.plan.epochs[-1][1]) if self.plan and self.plan.epochs else []
        if self.worker_id not in live:
            return total
        n, k = len(live), live.index(self.worker_id)
        return total // n + (1 if k < total % n else 0)

    def closed_started(self, clock: float) -> float:
        """A closed-loop user starts a request now: counted as dispatched; its run offset."""
        offset = clock - self.start_clock
        self.dispatcher.begin()
        assert self._dispatched is not None
        self._dispatched.add(offset)
        return offset

    def begin_flight(
        self, offset_s: float, step: int | None, target_qps: float | None, arrival: int | None
    ) -> int:
        """A user took a request (an arrival, or a closed-loop start at ``offset_s``): it is in
        flight until ``end_flight``, after its record was handed on. What the master needs to
        record it if this process dies first: the times, the step and the arrival."""
        assert self.plan is not None
        self._flight_ids += 1
        self._flights[self._flight_ids] = {
            "intended_start": self.plan.start_epoch + offset_s,
            "step": step,
            "target_qps": target_qps,
            "arrival": arrival,
            "taken_at": time.time(),
        }
        return self._flight_ids

    def end_flight(self, flight: int) -> None:
        self._flights.pop(flight, None)

    def stage_at(self, clock: float) -> Stage | None:
        return self.shape.stage_at(clock - self.start_clock) if self.shape else None

    def observe(self, record: RequestRecord) -> None:
        if record.total_ms is not None:
            self.observe_s(record.total_ms / 1000.0)
        if record.ok and record.step is not None:
            self.live.add(record)
        if self._finished is not None and self._good is not None and self.plan is not None:
            offset = record.intended_start - self.plan.start_epoch
            self._finished.add(offset)
            if record.slo_ok if record.slo_ok is not None else record.ok:
                self._good.add(offset)

    def observe_s(self, seconds: float) -> None:
        """How long one arrival held its user (a request, or a whole session)."""
        self._durations.append(seconds)

    def progress(self) -> dict[str, Any]:
        dispatched = list(self._dispatched.counts) if self._dispatched is not None else []
        dropped = list(self._dropped.counts) if self._dropped is not None else []
        self._note_users()  # the users Locust spawned since (the master's pre-warming)
        durations, self._durations = self._durations, []
        live, self.live = self.live, LiveFigures()
        return {
            "worker": self.worker_id,
            "dispatched": dispatched,
            "dropped": dropped,
            "live": live.to_wire(),
            "dispatched_total": self.pacer.stats.dispatched if self.pacer else 0,
            "dropped_total": self.pacer.stats.dropped if self.pacer else 0,
            "pending": (self.pacer.pending + self.pacer.queued) if self.pacer else 0,
            "busy": self.dispatcher.busy,
            "users": self.users(),
            "peak_users": list(self._peak_users.peaks) if self._peak_users is not None else [],
            "max_users": self.max_users(),
            "users_on_demand": self.on_demand.started,
            "finished": list(self._finished.counts) if self._finished is not None else [],
            "good": list(self._good.counts) if self._good is not None else [],
            "idle": self.dispatcher.idle,
            "durations_s": durations,
            "health": self.health.report() if self.health is not None else [],
            "in_flight": list(self._flights.values()),
            "reported_at": time.time(),
            "stopped_at": self.stopped_at,
            "final": self.final,
        }

    def report(self) -> None:
        # Both taken before either is sent (no greenlet switch in between): a request is in
        # the batch, or in the report's in-flight list, or in both (recorded, not yet ended).
        batch = self.records.take() if self.records is not None else []
        progress = self.progress()
        if self.records is not None:
            self.records.send(batch)
        self.runner.send_message(PROGRESS_MESSAGE, progress)

    def _report_loop(self) -> None:
        while True:
            gevent.sleep(REPORT_S)
            try:
                self.report()
            except Exception:  # a lost master connection must not kill the loop
                log.exception("progress report failed")

    def _health_loop(self, health: HealthAccumulator) -> None:
        """The self-check: a timer every ``TICK_S`` whose lateness is the hub's lag (every
        greenlet that runs without yielding delays it), and over each ``CPU_WINDOW_S`` the
        process's CPU share and the loop thread's busy share (CPU + run-queue wait).
        Cheap: ten wake-ups a second, a clock read each, three more every half second."""
        clock = time.perf_counter
        due = clock() + TICK_S
        window_start, cpu_start, busy_start = clock(), time.process_time(), loop_thread_ns()
        while True:
            gevent.sleep(max(0.0, due - clock()))
            now = clock()
            health.add_lag(now - self.start_clock, max(0.0, now - due) * 1000.0)
            if now - window_start >= CPU_WINDOW_S:
                cpu, busy = time.process_time(), loop_thread_ns()
                middle = (window_start + now) / 2.0 - self.start_clock
                health.add_cpu(middle, (cpu - cpu_start) / (now - window_start))
                if busy is not None and busy_start is not None:
                    health.add_busy(middle, (busy - busy_start) / 1e9 / (now - window_start))
                window_start, cpu_start, busy_start = now, cpu, busy
            due += TICK_S
            if due < now:  # ticks missed while the loop was blocked are not owed
                due = now + TICK_S

    def finish(self) -> None:
        """The master's last call before it quits (``final_reports.py``): stop dispatching, stop
        the users — each request in flight gets its cut record — and send every record with a
        last progress report marked ``final``."""
        self.stop()
        self.runner.user_greenlets.kill(block=True, timeout=KILL_USERS_S)
        self.final = True
        self.report()

    def stop(self) -> None:
        if self.final:  # ``finish`` stopped it; Locust's own stop at the quit comes after
            return
        if self.pacer is not None:
            self.pacer.stop()
        self.stopped_at = time.time()
        self.dispatcher.close()
        for arrival in self.on_demand.leftovers():
            # Its user was killed before it ran (the run stopped): never sent, so dropped.
            self._count_drop(arrival)
            if self.pacer is not None:
                self.pacer.stats.dispatched -= 1
                self.pacer.stats.dropped += 1
        try:
            self.report()
        except Exception:
            log.exception("final progress report failed")
        for greenlet in self._greenlets:
            greenlet.kill(block=False)
