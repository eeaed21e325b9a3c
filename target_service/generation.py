"""One completion's life: admission, prefill, paced decode, and the events it streams.

The same engine serves the three APIs: the request's model (``wire.GenerationRequest``) names the
encoder of its events, and nothing here depends on which API it is.

Phases before the response headers (and so in ``Server-Timing``): ``auth``, ``ratelimit``,
``queue`` (waiting for a scheduler slot) and ``prefill``. Phases after the first byte travel in an
SSE comment line just before ``data: [DONE]`` (``response.completed`` in the Responses API), which
OpenAI clients discard::

    : ramplab-timing {"queue_ms":..,"prefill_ms":..,"decode_ms":..,"sign_ms":..,
                      "lock_wait_ms":..,"sign_queue_ms":..,"output_tokens":..,"ttft_ms":..}

``ttft_ms`` is this request's TTFT as the target saw it (arrival → first content event handed to
the transport, stamped just before the write); with the ``timing_detail`` extension the comment
also lists ``events_ms``, every content event's send time in ms after arrival, for clients that
measure their own timestamp error against the server's. Every time here — deadlines, stamps,
the TTFT/ITL/queue histograms — comes from the ``Clock`` passed in (``clock.py``), which reads
``perf_counter`` and wakes at a deadline to the microsecond, not from ``loop.time()``: uvloop's
loop clock and its timers are whole milliseconds.

The response signature (``signing.py``) is computed when the last content event is due and
before it is sent: the whole text is known by then, and a signature waiting on the lock delays the
last token, so lock contention shows in TTLT and tokens/s exactly as in the study's §4.2.
``decode_ms`` runs from the first token's deadline to the last token's send, so it includes the
signature's ``sign_queue_ms + lock_wait_ms + sign_ms``.
"""

from __future__ import annotations

import asyncio
import random
import time
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

import anyio

from target_service import tracing
from target_service.clock import Clock
from target_service.errors import (
    InjectedDisconnect,
    InvalidRequest,
    NotFound,
    QueueFull,
    RedisUnavailable,
    Unavailable,
)
from target_service.faults import FaultInjector
from target_service.inference import InferenceModel, OutputPlan
from target_service.metrics import TargetMetrics
from target_service.prefix_cache import PrefixCache
from target_service.reasoning import gap_steps, reasoning_text, reasoning_tokens
from target_service.scheduler import Scheduler, Slot
from target_service.settings import Settings
from target_service.shutdown import SHUTDOWN_CODE, SHUTDOWN_MESSAGE, STREAM_GRACE_S
from target_service.signing import SIGNATURE_COMMENT, Signature, Signer, signed_message
from target_service.textgen import generate_tokens
from target_service.tokenizer import ApproxTokenizer, Tokenizer
from target_service.usage import UsageStore
from target_service.wire import GenerationRequest, TokenCounts, sse_comment

TIMING_COMMENT = "ramplab-timing"


@dataclass(slots=True)
class Completion:
    """A request that holds a slot and has finished prefill; ready to decode."""

    request: GenerationRequest  # of any of the three APIs (wire.py)
    client: str
    slot: Slot
    plan: OutputPlan
    prompt_tokens: int
    seed: int
    chunk_size: int
    arrival: float
    queue_s: float
    prefill_s: float
    first_token_due: float
    # Prompt tokens found in the prefix cache; None when the cache is off (no usage details).
    cached_tokens: int | None = None
    pre_timing: str = ""
    reasoning_tokens: int = 0  # reasoning_content tokens streamed before the answer
    sent_at: list[float] = field(default_factory=list)  # clock time of each content event sent
    completion_id: str = ""
    created: int = field(default_factory=lambda: int(time.time()))

    def __post_init__(self) -> None:
        if not self.completion_id:
            self.completion_id = self.request.ID_PREFIX + uuid.uuid4().hex[:24]

    def server_timing(self) -> str:
        own = f"queue;dur={self.queue_s * 1000:.3f}, prefill;dur={self.prefill_s * 1000:.3f}"
        return f"{self.pre_timing}, {own}" if self.pre_timing else own


def _sign_event(signature: Signature | None) -> None:
    if signature is not None:
        tracing.event(
            "sign",
            sign_ms=signature.sign_s * 1000,
            lock_wait_ms=signature.lock_wait_s * 1000,
            sign_queue_ms=signature.queue_s * 1000,
        )


class Generator:
    """Turns validated requests into paced completions; one per process."""

    def __init__(
        self,
        settings: Settings,
        model: InferenceModel,
        scheduler: Scheduler,
        tokenizer: Tokenizer,
        metrics: TargetMetrics,
        usage: UsageStore,
        rng: random.Random,
        signer: Signer,
        faults: FaultInjector,
        clock: Clock,
        prefix_cache: PrefixCache | None = None,
    ) -> None:
        self.settings = settings
        self.model = model
        self.scheduler = scheduler
        self.tokenizer = tokenizer
        self.metrics = metrics
        self.usage = usage
        self.rng = rng
        self.signer = signer
        self.faults = faults
        self.clock = clock
        self.prefix_cache = prefix_cache

    async def prepare(self, request: GenerationRequest, client: str) -> Completion:
        """Validate against the model, wait for a slot, then run prefill."""
        arrival = self.clock.now()
        if request.model not in self.settings.models:
            raise NotFound(
                f"The model '{request.model}' does not exist",
                code="model_not_found",
                param="model",
            )
        prompt_text = request.prompt_text()
        cache = self.prefix_cache if self.prefix_cache and self.prefix_cache.enabled else None
        blocks = cache.scan(prompt_text) if cache else None
        prompt_tokens = (
            blocks.tokens  # the same count, from the pass that cut the blocks
            if blocks is not None and isinstance(self.tokenizer, ApproxTokenizer)
            else self.tokenizer.count(prompt_text)
        )
        limits = self.settings.output
        max_tokens = request.requested_max_tokens() or limits.default_max_tokens
        if prompt_tokens + max_tokens > limits.max_model_len:
            raise InvalidRequest(
                f"This model's maximum context length is {limits.max_model_len} tokens; the "
                f"request has {prompt_tokens} prompt tokens and asks for {max_tokens} more",
                code="context_length_exceeded",
                param=request.PROMPT_PARAM,
            )
        seed = request.seed if request.seed is not None else self.rng.getrandbits(32)
        thinking = (
            reasoning_tokens(self.settings.reasoning, max_tokens, seed) if request.REASONS else 0
        )
        plan = self.model.plan_output(max_tokens - thinking, request.ignore_eos, seed)
        try:
            slot = await self.scheduler.admit()
        except QueueFull as exc:
            self.metrics.rejected_total.labels(exc.reason).inc()
            raise Unavailable(
                "The engine is overloaded; retry later",
                code="overloaded" if exc.reason == "queue_full" else "queue_timeout",
                retry_after_s=self.settings.scheduler.retry_after_s,
            ) from None
        admitted = self.clock.now()
        self.metrics.queue_wait.observe(admitted - arrival)
        tracing.event("queue", wait_ms=(admitted - arrival) * 1000)
        cached_tokens = cache.lookup(blocks.hashes, prompt_tokens) if cache and blocks else None
        prefill_s = self.model.prefill_s(prompt_tokens, cached_tokens or 0)
        try:
            await self.clock.sleep_until(admitted + prefill_s)
        except BaseException:
            slot.release()
            raise
        if cache and blocks:
            cache.insert(blocks.hashes)
        self.metrics.prefill.observe(prefill_s)
        self.metrics.prompt_tokens_total.inc(prompt_tokens)
        cached = {} if cached_tokens is None else {"cached_tokens": cached_tokens}
        tracing.event("prefill", prefill_ms=prefill_s * 1000, prompt_tokens=prompt_tokens, **cached)
        return Completion(
            request=request,
            client=client,
            slot=slot,
            plan=plan,
            prompt_tokens=prompt_tokens,
            seed=seed,
            chunk_size=request.chunk_size or self.settings.stream.chunk_size,
            arrival=arrival,
            queue_s=admitted - arrival,
            prefill_s=prefill_s,
            first_token_due=admitted + prefill_s,
            cached_tokens=cached_tokens,
            reasoning_tokens=thinking,
        )

    async def stream(
        self, done: Completion, shutdown: anyio.Event | None = None
    ) -> AsyncIterator[bytes]:
        """The SSE byte stream; cancelling it (client gone) frees the slot at once. Once
        ``shutdown`` is set it ends within ``STREAM_GRACE_S`` (``shutdown.py``)."""
        encoder = done.request.encoder(done.completion_id, done.created)
        clock = self.clock
        thinking = done.reasoning_tokens
        answer = generate_tokens(done.seed, done.plan.tokens)
        tokens = reasoning_text(done.seed, thinking) + answer
        total = thinking + done.plan.tokens
        reasoning_itl_s = self.settings.reasoning.itl_ms / 1000.0
        pause_s = self.settings.stream.event_sleep_ms / 1000.0
        sent = 0
        finished = False
        signature: Signature | None = None
        failure = self.faults.midstream()
        fail_at = min(self.settings.faults.midstream_after_tokens, total)
        stop_at: float | None = None  # set once the shutdown is seen
        self.metrics.active_streams.inc()
        try:
            opening = encoder.open()
            if opening:
                yield opening
            deadline = done.first_token_due
            last_sent = 0.0
            while sent < total:
                # An event never mixes thoughts and answer (reasoning.py).
                count = min(done.chunk_size, (thinking if sent < thinking else total) - sent)
                # The event's tokens are due one interval apart; nothing can change the running
                # count between them (no await), so one read of it serves the whole event.
                steps, answer_steps = gap_steps(sent, count, thinking)
                if steps:
                    running = self.scheduler.running
                    deadline += steps * reasoning_itl_s * self.model.slowdown(running)
                if answer_steps:
                    deadline += answer_steps * self.model.token_interval_s(self.scheduler.running)
                if failure is not None and sent >= fail_at:
                    break
                due = deadline + self.model.jitter_s(self.rng)
                if shutdown is not None and shutdown.is_set():
                    if stop_at is None:
                        stop_at = clock.now() + STREAM_GRACE_S
                    if due > stop_at:
                        await clock.sleep_until(stop_at)
                        failure = "shutdown"
                        break
                if due > clock.now():  # unpaced or late: no coroutine to build for this event
                    await clock.sleep_until(due)
                if sent + count == total:
                    try:
                        signature = await self.signer.sign(
                            signed_message(done.completion_id, "".join(answer))
                        )
                        _sign_event(signature)
                    except RedisUnavailable:
                        # The key ring could not be read at a period change: the headers are
                        # long gone, so the stream ends with an error event instead of a 503.
                        self.metrics.completions_total.labels("sign_failed").inc()
                        failure = "error_event"
                text = "".join(tokens[sent : sent + count])
                event = encoder.reasoning(text) if sent < thinking else encoder.content(text)
                # Read before the write: the write wakes the client, which on a busy machine
                # may run first and delay a stamp taken after it by a whole time slice.
                now = clock.now()
                if sent == 0:
                    done.sent_at.append(now)
                    self.metrics.ttft.observe(now - done.arrival)
                    tracing.event("first_token")
                else:
                    if done.request.timing_detail:
                        done.sent_at.append(now)
                    self.metrics.inter_token.observe((now - last_sent) / count)
                last_sent = now
                yield event
                sent += count
                if pause_s:
                    await clock.sleep_until(clock.now() + pause_s)
                    deadline += pause_s
            decode_s = clock.now() - done.first_token_due
            done.slot.release()
            finished = True
            tracing.event("decode_end", decode_ms=decode_s * 1000, output_tokens=sent)
            if failure == "shutdown":
                yield encoder.failure(SHUTDOWN_MESSAGE, "server_error", SHUTDOWN_CODE)
                self.metrics.completions_total.labels("shutdown").inc()
                return
            if failure == "drop":
                self.metrics.completions_total.labels("injected_drop").inc()
                raise InjectedDisconnect
            if failure is not None:
                yield encoder.failure(
                    "The server had an error while processing your request (injected)",
                    "server_error",
                    "internal_error",
                )
                self.metrics.completions_total.labels("injected_error").inc()
                return
            comments = b""
            if signature is not None:
                comments += sse_comment(SIGNATURE_COMMENT, signature.comment())
            comments += sse_comment(TIMING_COMMENT, self._timing(done, decode_s, total, signature))
            usage = TokenCounts(done.prompt_tokens, total, done.cached_tokens, thinking)
            yield encoder.closing(done.plan.finish_reason, usage, comments)
            self.metrics.completions_total.labels("completed").inc()
        except asyncio.CancelledError:
            self.metrics.disconnects_total.labels("disconnect").inc()
            self.metrics.completions_total.labels("client_gone").inc()
            raise
        except GeneratorExit:
            # sse-starlette closes the generator when a send fails or times out.
            if not finished:
                self.metrics.disconnects_total.labels("send_failed").inc()
                self.metrics.completions_total.labels("client_gone").inc()
            raise
        finally:
            done.slot.release()
            self.metrics.active_streams.dec()
            self.metrics.output_tokens_total.inc(sent)
            self.metrics.output_tokens.observe(sent)
            self.usage.add(done.client, done.prompt_tokens, sent)

    async def complete(self, done: Completion) -> tuple[dict[str, Any], str, dict[str, str]]:
        """A non-streaming completion: decode paced the same way, answered at the end."""
        thinking = done.reasoning_tokens
        total = thinking + done.plan.tokens
        reasoning_itl_s = self.settings.reasoning.itl_ms / 1000.0
        try:
            deadline = done.first_token_due
            for index in range(1, total):
                running = self.scheduler.running
                if index <= thinking:
                    deadline += reasoning_itl_s * self.model.slowdown(running)
                else:
                    deadline += self.model.token_interval_s(running)
                if index % 64 == 0 or index == total - 1:
                    await self.clock.sleep_until(deadline)
            decode_s = self.clock.now() - done.first_token_due
        finally:
            done.slot.release()
        tracing.event("decode_end", decode_ms=decode_s * 1000, output_tokens=total)
        text = "".join(generate_tokens(done.seed, done.plan.tokens))
        signature = await self.signer.sign(signed_message(done.completion_id, text))
        _sign_event(signature)
        self.metrics.output_tokens_total.inc(total)
        self.metrics.output_tokens.observe(total)
        self.metrics.completions_total.labels("completed").inc()
        self.usage.add(done.client, done.prompt_tokens, total)
        body = done.request.whole_body(
            done.completion_id,
            done.created,
            text,
            "".join(reasoning_text(done.seed, thinking)) if thinking else None,
            done.plan.finish_reason,
            TokenCounts(done.prompt_tokens, total, done.cached_tokens, thinking),
        )
        timing = f"{done.server_timing()}, decode;dur={decode_s * 1000:.3f}"
        headers: dict[str, str] = {}
        if signature is not None:
            # Headers go out after the whole body is known here, so sign can be in Server-Timing.
            timing += (
                f", sign_queue;dur={signature.queue_s * 1000:.3f}"
                f", lock_wait;dur={signature.lock_wait_s * 1000:.3f}"
                f", sign;dur={signature.sign_s * 1000:.3f}"
            )
            headers = signature.headers()
        return body, timing, headers

    @staticmethod
    def _timing(
        done: Completion, decode_s: float, tokens: int, signature: Signature | None
    ) -> dict[str, Any]:
        timing: dict[str, Any] = {
            "queue_ms": round(done.queue_s * 1000, 3),
            "prefill_ms": round(done.prefill_s * 1000, 3),
            "decode_ms": round(decode_s * 1000, 3),
            "sign_ms": round(signature.sign_s * 1000, 3) if signature else 0.0,
            "lock_wait_ms": round(signature.lock_wait_s * 1000, 3) if signature else 0.0,
            "sign_queue_ms": round(signature.queue_s * 1000, 3) if signature else 0.0,
            "output_tokens": tokens,
            "chunk_size": done.chunk_size,
            "seed": done.seed,
        }
        if done.cached_tokens is not None:
            timing["cached_tokens"] = done.cached_tokens
        if done.sent_at:
            timing["ttft_ms"] = round((done.sent_at[0] - done.arrival) * 1000, 3)
        if done.request.timing_detail:
            timing["events_ms"] = [round((t - done.arrival) * 1000, 3) for t in done.sent_at]
        return timing

    async def drain(self) -> None:
        """At shutdown: write the usage counted since the last flush."""
        await self.usage.flush()
