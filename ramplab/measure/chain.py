"""A request's attempt chain: auth, retries through a ``RetryPolicy``, and the record it leaves.

Independent of Locust on purpose, so the measurement can be driven (and tested) from plain
threads; ``users.py`` adapts it to Locust's events.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

from ramplab.errors import AuthError
from ramplab.measure.apis import LIMIT_KEYS, Api
from ramplab.measure.attempt import run_attempt, verify_attempt
from ramplab.measure.client import MeasuredClient
from ramplab.measure.integrity import Verifier
from ramplab.measure.reasoning import note_phases
from ramplab.measure.record import UNFINISHED, AttemptRecord, RequestRecord
from ramplab.measure.result import AttemptResult
from ramplab.measure.timebase import Timebase, process_timebase
from ramplab.retry.base import AttemptOutcome, NoRetry, RetryPolicy
from ramplab.workload.tokenizers import ApproxTokenizer, Tokenizer

if TYPE_CHECKING:  # OpenTelemetry is loaded only when tracing is on (tracing.py)
    from ramplab.measure.otel import AttemptTracer

Clock = Callable[[], float]


class Auth(Protocol):
    """Credentials for each attempt (``auth.py`` has the implementations)."""

    def headers(self) -> dict[str, str]:
        """Headers to add to the next attempt (may fetch or refresh a token)."""
        ...

    def refresh(self) -> bool:
        """After a 401: get new credentials; True when one more attempt with them makes sense."""
        ...


class NoAuth:
    def headers(self) -> dict[str, str]:
        return {}

    def refresh(self) -> bool:
        return False


@dataclass(frozen=True, slots=True)
class Endpoint:
    url: str  # full URL of the endpoint
    total_timeout_s: float | None = None
    api: Api = "chat"  # which of the APIs it serves (apis.py): how its stream is read


def allocate_tokens(
    texts: list[str], total: int | None, per_event: int | None, counter: Tokenizer
) -> list[int]:
    """Tokens carried by each token-bearing event, summing to ``total`` when it is known.

    In order of preference: the server's declared tokens per event (last event takes the
    remainder); one per event when the server's total equals the event count; the tokenizer's
    counts scaled to the server's total (largest remainder); the tokenizer's counts alone.
    """
    n = len(texts)
    if n == 0:
        return []
    if per_event is not None and total is not None and per_event * (n - 1) < total <= per_event * n:
        return [per_event] * (n - 1) + [total - per_event * (n - 1)]
    if total is not None and total == n:
        return [1] * n
    counts = [max(counter.count(text), 1) for text in texts]
    if total is None or total < n:
        return counts
    scale = total / sum(counts)
    raw = [c * scale for c in counts]
    out = [max(int(r), 1) for r in raw]
    order = sorted(range(n), key=lambda i: raw[i] - int(raw[i]), reverse=True)
    i = 0
    while sum(out) < total and i < 10 * n:
        out[order[i % n]] += 1
        i += 1
    return out


def _event_tokens(
    result: AttemptResult, total: int | None, counter: Tokenizer, limit: int | None = None
) -> list[int]:
    """``allocate_tokens`` over the stream, or over each phase when the server says how many
    tokens were reasoning: a declared chunk size leaves the *last thought's* event short too.

    Without the server's total, a tokenizer's count can exceed the request's ``limit``
    (``max_tokens``), which no server's output does: the approximation counted 1,308 and 1,578
    tokens in two cut 1,200-token vLLM streams of a random model's text. The counts are then
    scaled to the limit, the most the stream can hold (still ``output_tokens_source`` =
    ``tokenizer``: an estimate)."""
    events, per_event = result.token_events, result.server_tokens_per_event
    texts = [e.text for e in events]
    if total is None and limit is not None and len(texts) <= limit:
        counts = allocate_tokens(texts, None, per_event, counter)
        if sum(counts) > limit:
            return allocate_tokens(texts, limit, per_event, counter)
        return counts
    split = next((i for i, e in enumerate(events) if e.answer), len(events))
    thoughts = result.reasoning_tokens
    phased = total is not None and thoughts is not None and 0 < split < len(events) < total
    if phased and total is not None and thoughts is not None and 0 < thoughts < total:
        head = allocate_tokens(texts[:split], thoughts, per_event, counter)
        return head + allocate_tokens(texts[split:], total - thoughts, per_event, counter)
    return allocate_tokens(texts, total, per_event, counter)


@dataclass(slots=True)
class _InFlight:
    """The request ``run`` is working on, kept so that a cut can still record it."""

    intended: float
    intended_epoch: float
    step: int | None
    target_qps: float | None
    log: list[AttemptRecord] = field(default_factory=list)
    attempt: AttemptResult | None = None  # the attempt in progress, or the last one
    first_sent: float | None = None  # the first attempt's send
    waited: float = 0.0  # the back-off slept before the attempt in progress

    def started(self, result: AttemptResult) -> None:
        self.attempt = result


def _attempt_record(number: int, result: AttemptResult, waited_s: float) -> AttemptRecord:
    return AttemptRecord(
        attempt=number,
        start=result.sent_epoch,
        status=result.status,
        error_kind=result.error_kind,
        duration_ms=(result.ended_at - result.sent_at) * 1000.0,
        retry_after_s=result.retry_after_s,
        wait_before_ms=waited_s * 1000.0,
    )


class RequestChain:
    """Runs one request (all its attempts) and turns what it saw into a ``RequestRecord``."""

    def __init__(
        self,
        client: MeasuredClient,
        endpoint: Endpoint,
        auth: Auth | None = None,
        retry: RetryPolicy | None = None,
        counter: Tokenizer | None = None,
        worker: str = "local",
        clock: Clock = time.perf_counter,
        wall: Clock = time.time,
        sleep: Callable[[float], None] = time.sleep,
        verifier: Verifier | None = None,
        tracer: AttemptTracer | None = None,
    ) -> None:
        self.client = client
        self.endpoint = endpoint
        self.auth: Auth = auth or NoAuth()
        self.retry: RetryPolicy = retry or NoRetry()
        self.counter: Tokenizer = counter or ApproxTokenizer()
        self.worker = worker
        self.clock = clock
        self.wall = wall
        # Epochs from the monotonic reading they belong to: one clock read per stamp.
        self.timebase = process_timebase() if clock is time.perf_counter else Timebase(clock, wall)
        self.sleep = sleep
        self.verifier = verifier  # content integrity, only when asked for (integrity.py)
        self.last_text = ""  # the last request's answer text (run() sets it)
        self.tracer = tracer  # a CLIENT span per attempt, only with --otlp-endpoint
        self._flight: _InFlight | None = None  # the request ``run`` has not finished
        self._limit: int | None = None  # the request's output limit (its ``max_tokens``)

    def run(
        self,
        body: Mapping[str, Any],
        headers: Mapping[str, str] | None = None,
        intended_start: float | None = None,
        step: int | None = None,
        target_qps: float | None = None,
    ) -> RequestRecord:
        """One request; ``intended_start`` is on this chain's monotonic ``clock`` (None: now)."""
        self.last_text = ""
        limit = body.get(LIMIT_KEYS[self.endpoint.api])
        self._limit = limit if isinstance(limit, int) and limit > 0 else None
        now = self.clock()
        intended = now if intended_start is None else intended_start
        intended_epoch = self.timebase.epoch(intended)
        flight = self._flight = _InFlight(intended, intended_epoch, step, target_qps)
        log = flight.log
        last: AttemptResult | None = None
        refreshed = False
        number = 0
        while number < 1000:  # bounded; policies stop far earlier
            number += 1
            flight.attempt = None
            if not self.retry.admit():
                return self._rejected(
                    intended, intended_epoch, log, last, flight.first_sent, step, target_qps
                )
            try:
                extra = {**(headers or {}), **self.auth.headers()}
            except AuthError as exc:
                sent = self.clock()
                result = AttemptResult(sent_at=sent, sent_epoch=self.timebase.epoch(sent))
                result.error_kind, result.error_detail = "auth_error", str(exc)
                result.ended_at = result.sent_at
            else:
                span = None
                if self.tracer is not None:
                    span, carrier = self.tracer.start(self.endpoint.url, number)
                    extra.update(carrier)
                result = run_attempt(
                    self.client,
                    self.endpoint.url,
                    body,
                    extra,
                    self.endpoint.total_timeout_s,
                    self.clock,
                    self.wall,
                    started=flight.started,
                    api=self.endpoint.api,
                )
                if span is not None and self.tracer is not None:
                    self.tracer.end(span, result.status, result.error_kind)
                if self.verifier is not None:
                    verify_attempt(result, self.verifier)
            if flight.first_sent is None:
                flight.first_sent = result.sent_at
            flight.attempt = result
            log.append(_attempt_record(number, result, flight.waited))
            flight.waited = 0.0
            last = result
            if result.status == 401 and not refreshed and self.auth.refresh():
                refreshed = True  # new credentials, one more try; not a server failure
                continue
            outcome = AttemptOutcome(
                number, result.ok, result.status, result.error_kind, result.retry_after_s
            )
            self.retry.record(outcome)
            if result.ok:
                break
            delay = self.retry.next_delay(outcome)
            if delay is None:
                break
            flight.waited = max(delay, 0.0)
            self.sleep(flight.waited)
        assert last is not None
        assert flight.first_sent is not None
        self._flight = None
        # The answer as streamed (first choice's content), for a session's history.
        self.last_text = "".join(last.content_parts)
        return self._record(
            intended, intended_epoch, flight.first_sent, log, last, step, target_qps
        )

    def cut(self, reason: str) -> RequestRecord | None:
        """The record of the request ``run`` was working on when it was stopped from outside
        (the run's end, an interruption: Locust kills the user's greenlet): kind
        ``unfinished``, how long it had run and what it had received. ``None`` when no request
        was in flight. Every request sent has a record, whatever happened to it."""
        flight, self._flight = self._flight, None
        if flight is None:
            return None
        now = self.clock()
        detail = f"{reason} after {now - flight.intended:.3f} s"
        attempt = flight.attempt
        if attempt is None:  # not sent yet (auth, a retry's back-off), or nothing at all
            return RequestRecord(
                request_id=uuid.uuid4().hex,
                worker=self.worker,
                intended_start=flight.intended_epoch,
                actual_start=flight.intended_epoch + ((flight.first_sent or now) - flight.intended),
                ok=False,
                status=None,
                error_kind=UNFINISHED,
                step=flight.step,
                target_qps=flight.target_qps,
                attempts=len(flight.log),
                attempt_log=flight.log,
                total_ms=(now - flight.intended) * 1000.0,
                lateness_ms=((flight.first_sent or now) - flight.intended) * 1000.0,
                error_detail=detail,
            )
        if not attempt.ended_at:  # cut in the middle of this attempt
            attempt.ended_at = now
            attempt.error_kind, attempt.error_detail = UNFINISHED, detail
            flight.log.append(_attempt_record(len(flight.log) + 1, attempt, flight.waited))
        first_sent = flight.first_sent if flight.first_sent is not None else attempt.sent_at
        record = self._record(
            flight.intended,
            flight.intended_epoch,
            first_sent,
            flight.log,
            attempt,
            flight.step,
            flight.target_qps,
        )
        record.ok, record.error_kind, record.error_detail = False, UNFINISHED, detail
        record.total_ms = (now - flight.intended) * 1000.0
        record.tpot_ms = None  # the stream did not end: no time per output token
        return record

    def _rejected(
        self,
        intended: float,
        intended_epoch: float,
        log: list[AttemptRecord],
        last: AttemptResult | None,
        first_sent: float | None,
        step: int | None,
        target_qps: float | None,
    ) -> RequestRecord:
        if last is not None and first_sent is not None:
            record = self._record(intended, intended_epoch, first_sent, log, last, step, target_qps)
        else:
            now = self.clock()
            record = RequestRecord(
                request_id=uuid.uuid4().hex,
                worker=self.worker,
                intended_start=intended_epoch,
                actual_start=intended_epoch + (now - intended),
                ok=False,
                status=None,
                error_kind=None,
                step=step,
                target_qps=target_qps,
                attempts=0,
                total_ms=(now - intended) * 1000.0,
                lateness_ms=(now - intended) * 1000.0,
            )
        record.ok = False
        record.error_kind = "client_throttled"
        return record

    def _record(
        self,
        intended: float,
        intended_epoch: float,
        first_sent: float,
        log: list[AttemptRecord],
        last: AttemptResult,
        step: int | None,
        target_qps: float | None,
    ) -> RequestRecord:
        ms = 1000.0
        record = RequestRecord(
            request_id=uuid.uuid4().hex,
            worker=self.worker,
            intended_start=intended_epoch,
            actual_start=intended_epoch + (first_sent - intended),
            ok=last.ok,
            status=last.status,
            error_kind=last.error_kind,
            step=step,
            target_qps=target_qps,
            attempts=len(log),
            attempt_log=log,
            total_ms=(last.ended_at - intended) * ms,
            lateness_ms=(first_sent - intended) * ms,
            server_timing_ms=dict(last.server_timing_ms),
            prompt_tokens=last.prompt_tokens,
            bytes_received=last.bytes_received,
            events=last.events,
            error_detail=last.error_detail,
            integrity=last.integrity,
            server_events_ms=list(last.server_events_ms),
        )
        phases = dict(last.phases_ms)
        if last.headers_at is not None:
            # The response's first byte is its status line; httpcore reads the head in one go.
            record.ttfb_ms = (last.headers_at - last.sent_at) * ms
        events = last.token_events
        if events:
            first, final = events[0].at, events[-1].at
            record.ttft_ms = (first - intended) * ms
            record.ttft_send_ms = (first - last.sent_at) * ms
            record.ttlt_ms = (final - intended) * ms
            record.ttlt_send_ms = (final - last.sent_at) * ms
            if last.headers_at is not None:
                phases["first_token"] = (first - last.headers_at) * ms
            phases["stream"] = (final - first) * ms
            usage_total = last.completion_tokens if last.ok or last.saw_done else None
            counts = _event_tokens(last, usage_total, self.counter, self._limit)
            itl: list[float] = []
            for prev, event, tokens in zip(events, events[1:], counts[1:], strict=False):
                gap = (event.at - prev.at) * ms / tokens
                itl.extend([gap] * tokens)
            record.itl_ms = itl
            if usage_total is not None:
                record.output_tokens, record.output_tokens_source = usage_total, "usage"
            else:
                record.output_tokens, record.output_tokens_source = sum(counts), "tokenizer"
            record.tokens_per_event = counts
            record.coalesced_events = [i for i, event in enumerate(events) if event.coalesced]
            if last.kernel_stamps:
                late = max(events[0].late_by_at_most, events[-1].late_by_at_most)
                record.stamp_error_ms = (last.send_uncertainty_s + late) * ms
            note_phases(record, last, intended)
            if record.output_tokens and record.output_tokens > 1:
                record.tpot_ms = (record.ttlt_ms - record.ttft_ms) / (record.output_tokens - 1)
        elif last.completion_tokens is not None:
            record.output_tokens, record.output_tokens_source = last.completion_tokens, "usage"
        record.cached_tokens = last.cached_tokens
        record.completion_id, record.local_port = last.completion_id, last.local_port
        if last.kernel_stamps:
            record.read_delay_ms = last.read_delay_s * ms
        record.phases_ms = phases
        return record
