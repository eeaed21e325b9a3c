"""``RampUser``: a streaming user whose requests come from the pacer (open) or the stage clock."""

from __future__ import annotations

import random
import time
from functools import cached_property

import gevent
from locust import task
from locust.env import Environment

from ramplab.load.arrivals.trace import TraceArrivals
from ramplab.load.pacer import Arrival
from ramplab.load.shapes import Stage
from ramplab.load.trace import Trace
from ramplab.measure.record import RequestRecord
from ramplab.options.workload import prompt_words, session_settings
from ramplab.plugin.plugin import install, plugin_of
from ramplab.plugin.users import LLMStreamUser
from ramplab.plugin.worker import WorkerEngine
from ramplab.retry.base import RetryPolicy
from ramplab.workload.filler import filler_prompt
from ramplab.workload.session import (
    Conversation,
    ConversationSource,
    PromptTurns,
    SessionSettings,
    session_id,
)

IDLE_S = 0.05

# A ramp locustfile: the --ramplab-* options, and the engines in every environment's plugin.
install(ramp=True)


class RampUser(LLMStreamUser):
    """Open mode: parks until the pacer hands it an arrival, then measures from its due time.
    Closed mode: loops back to back, each request tagged with the stage it started in."""

    def __init__(self, environment: Environment) -> None:
        self.engine: WorkerEngine | None = plugin_of(environment).worker_engine
        if self.engine is not None:
            # Users started on demand (``ondemand.py``) are of this class.
            self.engine.on_demand.user_class = type(self).__name__
        self._arrival: Arrival | None = None
        self._closed_offset: float | None = None  # run offset of a closed-loop request's start
        # The session id, turn and arrival index of the request being sent (sessions only).
        self._session: tuple[str, int, int] | None = None
        super().__init__(environment)
        self.sessions: SessionSettings | None = session_settings(self.shared.settings)
        # Its own generator (seeded from the process's, in the order users are made): think times,
        # ids and trace prompts are reproducible. Made on first use, like the client.
        self._user_seed = self.shared.rng.getrandbits(64)
        self.conversations: ConversationSource = PromptTurns(self.prompts)

    @cached_property
    def user_rng(self) -> random.Random:
        return random.Random(self._user_seed)

    def make_retry_policy(self) -> RetryPolicy:
        setup = self.plugin.retry
        return setup.policy() if setup is not None else super().make_retry_policy()

    def finish_record(self, record: RequestRecord) -> None:
        arrival, engine = self._arrival, self.engine
        if arrival is not None and engine is not None and engine.plan is not None:
            # The schedule's own epoch time, not one converted back from perf_counter(): the
            # summary places records in steps by it and counts scheduled arrivals by the exact
            # offset, so both must use the same number or boundary arrivals flip steps.
            exact = engine.plan.start_epoch + arrival.offset_s
            record.arrival = arrival.index
            self._shift(record, exact)
        elif self._closed_offset is not None and engine is not None and engine.plan is not None:
            # Likewise the offset the engine counted as dispatched, so both see one step.
            self._shift(record, engine.plan.start_epoch + self._closed_offset)
        if self._session is not None:
            record.session_id, record.turn, record.arrival = self._session
        slo = self.plugin.slo
        if slo is not None and not slo.empty:
            record.slo_ok = slo.meets(record)
        if self.engine is not None and self.sessions is None:
            self.engine.observe(record)  # a session is observed once, as a whole

    @staticmethod
    def _shift(record: RequestRecord, exact: float) -> None:
        shift = exact - record.intended_start
        record.intended_start = exact
        record.actual_start += shift
        for attempt in record.attempt_log:
            attempt.start += shift

    def arrival_index(self) -> int | None:
        return self._arrival.index if self._arrival is not None else None

    @task
    def chat(self) -> None:
        engine = self.engine
        if engine is None or engine.plan is None or engine.shape is None:
            gevent.sleep(IDLE_S)  # the plan has not arrived yet
            return
        if engine.plan.mode == "closed":
            self._closed_loop(engine)
            return
        arrival = engine.take(self)
        if arrival is None:
            gevent.sleep(IDLE_S * 10)  # the run is over; Locust stops us soon
            return
        stage = engine.stage_of(arrival)
        self._arrival = arrival
        flight = engine.begin_flight(arrival.offset_s, stage.index, stage.rate, arrival.index)
        try:
            if self.sessions is not None:
                self._run_session(engine, self.sessions, arrival)
            elif isinstance(engine.process, TraceArrivals):
                self._replay(engine.process.trace, arrival, stage)
            else:
                self.run_request(
                    intended_start=arrival.intended, step=stage.index, target_qps=stage.rate
                )
        finally:
            self._arrival = None
            self._session = None
            engine.end_flight(flight)
            engine.dispatcher.done()

    def _replay(self, trace: Trace, arrival: Arrival, stage: Stage) -> None:
        """The trace's row of this arrival: a prompt of its input length (filler words, one
        token each: of ``--tokenizer``'s tokens), ``max_tokens`` = its output length, generated to
        the end (``ignore_eos``)."""
        tokens = int(trace.input_tokens[arrival.index])
        words = prompt_words(self.shared.settings)
        self.run_request(
            intended_start=arrival.intended,
            step=stage.index,
            target_qps=stage.rate,
            messages=filler_prompt(tokens, self.user_rng, words),
            prompt_tokens=tokens,
            body_changes={
                "max_tokens": int(trace.output_tokens[arrival.index]),
                "ignore_eos": True,
            },
        )

    def _run_session(
        self, engine: WorkerEngine, sessions: SessionSettings, arrival: Arrival
    ) -> None:
        """One session on this user: its turns back to back, a think time apart.

        Only the first turn is paced by the schedule (the arrival is the session's start); each
        later turn is due when the think time after the previous answer ends, and is measured
        from that due time. A failed turn ends the session: there is no answer to carry on from.
        """
        conversation = Conversation(
            session_id(self.user_rng),
            self.conversations.next_conversation(sessions.turns),
        )
        header = sessions.affinity_header
        headers = {header: conversation.id} if header else None
        due = arrival.intended
        while not conversation.done:
            messages = conversation.request()
            self._session = (conversation.id, conversation.turn, arrival.index)
            stage = engine.stage_at(due)
            record = self.run_request(
                intended_start=due,
                step=stage.index if stage is not None else None,
                target_qps=stage.rate if stage is not None else None,
                messages=messages,
                headers=headers,
            )
            self._arrival = None  # later turns are not the schedule's arrivals
            if not record.ok or conversation.done:
                break
            conversation.answered(self.chain.last_text)
            think = sessions.think_time.draw(self.user_rng)
            due = time.perf_counter() + think
            gevent.sleep(think)
        engine.observe_s(time.perf_counter() - arrival.intended)

    def _closed_loop(self, engine: WorkerEngine) -> None:
        now = time.perf_counter()
        if now < engine.start_clock:
            gevent.sleep(min(engine.start_clock - now, 1.0))
            return
        stage = engine.stage_at(now)
        if stage is None or engine.dispatcher.busy >= engine.closed_limit(stage):
            # Past the last stage, or beyond this stage's concurrency (a down-step): start
            # nothing; the requests in flight finish on their users.
            gevent.sleep(IDLE_S)
            return
        self._closed_offset = engine.closed_started(now)
        flight = engine.begin_flight(self._closed_offset, stage.index, None, None)
        try:
            self.run_request(intended_start=now, step=stage.index)
        finally:
            self._closed_offset = None
            engine.end_flight(flight)
            engine.dispatcher.done()


# Locust's metaclass appends every base class's tasks to a subclass's own, so without this the
# inherited closed-loop ``LLMStreamUser.chat`` would run on every other pick: unpaced requests
# outside the schedule (step ``None``, zero lateness) that doubled a step's ``achieved_qps`` and
# kept users busy so the pacer dropped arrivals.
RampUser.tasks = [RampUser.chat]
