"""``LLMStreamUser``: the Locust user that measures streaming completions exactly (chat, legacy
completions or the Responses API: ``--api``)."""

from __future__ import annotations

from collections.abc import Mapping
from functools import cached_property
from typing import Any, ClassVar

from gevent import GreenletExit
from locust import User, constant, task
from locust.env import Environment

from ramplab.measure.apis import LIMIT_KEYS
from ramplab.measure.chain import Endpoint, RequestChain
from ramplab.measure.client import MeasuredClient
from ramplab.measure.record import RequestRecord
from ramplab.options.workload import prompt_source, request_body
from ramplab.plugin.context import UserContext
from ramplab.plugin.plugin import RamplabPlugin, install, plugin_of
from ramplab.retry.base import NoRetry, RetryPolicy
from ramplab.workload.prompts import Messages, PromptSource

REQUEST_TYPE = "SSE"
TTFT_ROW, TTLT_ROW = "ttft", "ttlt"  # Locust stats rows beside the request's, not requests
CUT_REASON = "still in flight when the run stopped it"

# A locustfile that imports this user gets ramplab's options and a plugin per environment.
install(ramp=False)


class LLMStreamUser(User):
    """Sends OpenAI requests of ``--api`` to ``--host`` and records each one.

    The one entry point is :meth:`run_request`: one request (its whole attempt chain through
    ``retry_policy``), recorded in the run's records and the exact histograms, and fired as a
    Locust request event (request type ``"SSE"``, under the endpoint path); its TTFT and TTLT go
    to Locust rows of their own (``ttft``, ``ttlt``) that Locust's totals leave out. The default
    task calls it with ``intended_start=None`` (now: a closed loop); an open-loop pacer calls it
    on a free user with the time the schedule wanted the request sent, on
    ``time.perf_counter()``'s clock, so lateness and TTFT from the intended start are measured.

    Subclasses may set ``retry_policy_factory`` to give each user its own ``RetryPolicy``.
    """

    abstract = False
    wait_time = constant(0)
    retry_policy_factory: ClassVar[type[RetryPolicy] | None] = None

    def __init__(self, environment: Environment) -> None:
        super().__init__(environment)
        self.plugin: RamplabPlugin = plugin_of(environment)
        self.shared: UserContext = self.plugin.context()
        self.retry: RetryPolicy = self.make_retry_policy()
        settings = self.shared.settings
        self.prompts: PromptSource = prompt_source(settings, self.shared.rng, self.shared.prompts)

    # The client and the chain are made when the user first sends: an open-loop worker keeps
    # more users than streams in flight (the sizing's headroom), and the spare ones the
    # dispatcher leaves parked (dispatch.py) then never hold a client at all.
    @cached_property
    def client(self) -> MeasuredClient:
        return self.shared.new_client()

    @cached_property
    def chain(self) -> RequestChain:
        return RequestChain(
            self.client,
            Endpoint(
                self.shared.url, self.shared.settings.request_timeout_s, self.shared.settings.api
            ),
            auth=self.shared.auth,
            retry=self.retry,
            counter=self.shared.counter,
            worker=self.shared.worker,
            verifier=self.shared.verifier,
            tracer=self.shared.tracer,
        )

    def make_retry_policy(self) -> RetryPolicy:
        """This user's retry policy (one per user: policies keep per-chain state)."""
        factory = type(self).retry_policy_factory
        return factory() if factory is not None else NoRetry()

    def finish_record(self, record: RequestRecord) -> None:
        """Last look at a record before it is fired and written (SLO verdicts, sizing)."""

    def arrival_index(self) -> int | None:
        """The index of the request about to be sent in the run's schedule, when there is one."""
        return None

    def on_stop(self) -> None:
        if "client" in self.__dict__:  # made on first use (above)
            self.client.close()

    @task
    def chat(self) -> None:
        self.run_request()

    def run_request(
        self,
        intended_start: float | None = None,
        step: int | None = None,
        target_qps: float | None = None,
        messages: Messages | None = None,
        headers: Mapping[str, str] | None = None,
        body_changes: Mapping[str, Any] | None = None,
        prompt_tokens: int | None = None,
    ) -> RequestRecord:
        """Make one request now; ``intended_start`` on ``time.perf_counter()`` (None: now).

        ``messages`` (default: the next prompt), ``headers`` (added to ``--extra-headers``) and
        ``body_changes`` (over the body's fields) let a session send its history and affinity
        header, and a trace replay its row's lengths; they name the token limit ``max_tokens``
        whatever the API, and it is sent under the API's own name (``max_output_tokens``).
        ``prompt_tokens``: the size ``messages`` were written to (the record's
        ``requested_prompt_tokens``; the prompt sources say their own)."""
        settings = self.shared.settings
        requested = prompt_tokens
        if messages is not None:  # a session's history, a trace row's prompt
            body = request_body(settings, self.shared.model(), messages)
        elif self.shared.workload is not None:  # datasets, shared prefixes (ramplab/datasets)
            prompt = self.shared.workload.next(self.arrival_index(), self.prompts)
            body = request_body(settings, self.shared.model(), prompt.messages, prompt.max_tokens)
            requested = prompt.tokens
        else:
            body = request_body(settings, self.shared.model(), self.prompts.next())
            requested = self.prompts.prompt_tokens
        if body_changes:
            changes = dict(body_changes)
            if "max_tokens" in changes:
                changes[LIMIT_KEYS[settings.api]] = changes.pop("max_tokens")
            body.update(changes)
        sent = {**settings.extra_headers, **headers} if headers else settings.extra_headers
        try:
            record = self.chain.run(body, sent, intended_start, step, target_qps)
        except GreenletExit:
            # Locust kills a user's greenlet at the run's end (the drain is over), at an
            # interruption and when it stops users: the request in flight still gets its
            # record, or the slowest requests — the tail — would vanish from the results.
            cut = self.chain.cut(CUT_REASON)
            if cut is not None:
                cut.requested_prompt_tokens = requested
                # Not fired as a Locust failure: Locust's own stats count the requests that
                # ended, and ``-t`` cutting a plain run's users is by design (it would make
                # every timed run exit 1). The record tells the truth.
                self._record(cut, fire=False)
            raise
        record.requested_prompt_tokens = requested
        self._record(record)
        return record

    def _record(self, record: RequestRecord, *, fire: bool = True) -> None:
        self.finish_record(record)
        record.prompt_labels = dict(getattr(self.prompts, "prompt_labels", None) or {})
        if fire:
            self._fire(record)
        self.shared.emit(record)

    def _fire(self, record: RequestRecord) -> None:
        fire = self.environment.events.request.fire
        started = record.intended_start
        exception = (
            None
            if record.ok
            else RuntimeError(f"{record.error_kind}: {record.error_detail or ''}"[:300])
        )
        fire(
            request_type=REQUEST_TYPE,
            name=self.shared.settings.path,
            response_time=record.total_ms or 0.0,
            response_length=record.bytes_received,
            exception=exception,
            context={"error_kind": record.error_kind},
            start_time=started,
            url=self.shared.url,
        )
        if record.ok and record.ttft_ms is not None and record.ttlt_ms is not None:
            # Rows of their own in Locust's table, logged into their entries directly rather
            # than fired as requests: a fired request also counts in Locust's total, which then
            # counted each request three times (RPS 23.1 for 7.7). A worker reports its total
            # apart from its entries, so the master's total stays the requests'.
            stats = self.environment.stats
            stats.get(TTFT_ROW, REQUEST_TYPE).log(record.ttft_ms, 0)
            stats.get(TTLT_ROW, REQUEST_TYPE).log(record.ttlt_ms, 0)


__all__ = ["LLMStreamUser"]
