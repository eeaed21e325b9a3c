"""One measured HTTP attempt: send a request of one of the APIs, read the stream, stamp every event.

The clock is read the moment the transport hands over bytes and before they are parsed
(``sse.py``). Failures never raise out of here: each becomes an ``AttemptResult`` with a named
``error_kind`` and whatever timings were taken before it happened.

Error kinds: ``record.ERROR_KINDS``, each with its cause and remedy in ``docs/failures.md``. The
request timeout is a deadline from the send that bounds every blocking socket operation
(``deadline.py``); the response's head is checked before its body is read (``headers.py``).
"""

from __future__ import annotations

import ssl
import time
from collections.abc import Callable, Mapping
from typing import Any

import httpcore
import httpx
import orjson

from ramplab.errors import IntegrityError, MalformedResponse
from ramplab.measure.apis import LIMIT_KEYS, STREAM_ENDS, Api
from ramplab.measure.client import MeasuredClient, OpenResponse, PhaseTrace
from ramplab.measure.deadline import Deadline
from ramplab.measure.events import read_data, read_whole
from ramplab.measure.headers import head_failure, header_map, parse_retry_after, parse_server_timing
from ramplab.measure.integrity import ERROR_KIND, SIGNATURE_COMMENT, Signature, Verifier
from ramplab.measure.result import AttemptResult, TokenEvent
from ramplab.measure.sockets import TimedStream
from ramplab.measure.sse import SSEEvent, SSEParser
from ramplab.measure.timebase import Timebase, process_timebase

Clock = Callable[[], float]
TIMING_COMMENT = "ramplab-timing"


# What sending and reading can raise: the measured request runs on httpcore (client.py's
# ``MeasuredClient``); httpx's own errors stay for anything sent through httpx.
HTTP_ERRORS = (
    httpx.HTTPError,
    httpcore.TimeoutException,
    httpcore.NetworkError,
    httpcore.ProtocolError,
    httpcore.UnsupportedProtocol,
    httpcore.ProxyError,
    MalformedResponse,
)


def _error_kind_for(exc: BaseException, started_body: bool) -> str:
    if isinstance(exc, httpx.TimeoutException | httpcore.TimeoutException):
        return "timeout"
    if isinstance(exc, MalformedResponse):
        return "protocol_error"
    if isinstance(exc, httpx.ConnectError | httpcore.ConnectError):
        cause: BaseException | None = exc
        while cause is not None:
            if isinstance(cause, ssl.SSLError):
                return "tls_error"
            cause = cause.__cause__ or cause.__context__
        return "connect_error"
    return "connection_dropped" if started_body else "connect_error"


# A tuple, not ``int | float``: isinstance with a tuple is about twice as fast, and the timing
# comment checks every one of a long stream's ``events_ms``.
_NUMBER = (int, float)


class _StreamFailure(Exception):
    def __init__(self, kind: str, detail: str) -> None:
        super().__init__(detail)
        self.kind = kind
        self.detail = detail


def _handle_event(result: AttemptResult, event: SSEEvent, api: Api = "chat") -> None:
    if event.comment is not None:
        name, _, payload = event.comment.partition(" ")
        if name == SIGNATURE_COMMENT:
            try:
                result.signature = Signature.from_comment(payload)
            except IntegrityError as exc:
                result.signature_problem = str(exc)
        elif name == TIMING_COMMENT:
            try:
                timing = orjson.loads(payload)
            except orjson.JSONDecodeError:
                return  # an extension we cannot read is ignored, never a failure
            if isinstance(timing, dict):
                for key, value in timing.items():
                    if key.endswith("_ms") and isinstance(value, _NUMBER):
                        result.server_timing_ms[key.removesuffix("_ms")] = float(value)
                events = timing.get("events_ms")
                if isinstance(events, list) and all(isinstance(v, _NUMBER) for v in events):
                    result.server_events_ms = [float(v) for v in events]
                seed = timing.get("seed")
                if isinstance(seed, int) and result.seed is None:
                    result.seed = seed
                chunk_size = timing.get("chunk_size")
                if isinstance(chunk_size, int) and chunk_size > 0:
                    result.server_tokens_per_event = chunk_size
        return
    result.events += 1
    failure = read_data(result, event, api)
    if failure is not None:
        raise _StreamFailure(*failure)


def run_attempt(
    client: MeasuredClient,
    url: str,
    body: Mapping[str, Any],
    headers: Mapping[str, str],
    total_timeout_s: float | None,
    clock: Clock = time.perf_counter,
    wall: Clock = time.time,
    started: Callable[[AttemptResult], None] | None = None,
    api: Api = "chat",
) -> AttemptResult:
    """Send one request of ``api`` (``apis.py``) and measure it; never raises for network or
    protocol failures.

    ``started`` is handed the result as soon as it exists and is filled in as the response
    arrives: the chain keeps it, so a request cut by the end of the run still says what it had
    received (``chain.py``)."""
    trace = PhaseTrace(clock)
    # orjson hands back its whole 4 KiB write buffer as the bytes object; the request holds the
    # payload until the stream ends, so an exact-size copy keeps 4 KiB per stream in flight free.
    payload = memoryview(orjson.dumps(body)).tobytes()
    stream = bool(body.get("stream", False))
    sent = clock()
    timebase = process_timebase() if clock is time.perf_counter else Timebase(clock, wall)
    result = AttemptResult(sent_at=sent, sent_epoch=timebase.epoch(sent))
    if started is not None:
        started(result)
    if isinstance(body.get("seed"), int):
        result.seed = body["seed"]
    deadline = Deadline.after(total_timeout_s, result.sent_at, clock)
    started_body = False
    try:
        response = client.open(
            url, {"content-type": "application/json", **headers}, payload, trace, deadline
        )
        try:
            result.headers_at = trace.headers_at or clock()
            stream_of = response.network_stream
            arrivals = stream_of if isinstance(stream_of, TimedStream) else None
            if arrivals is not None:
                result.local_port = arrivals.local_port
            arrived = None if arrivals is None else arrivals.arrived_at
            if arrived is not None and arrived < result.headers_at:
                # Over HTTP/2 the trace stamps the head when httpcore got to it: the arrival
                # is earlier, and ``wait`` ends there too.
                result.headers_at = arrived
                for protocol in ("http11", "http2"):
                    mark = f"{protocol}.receive_response_headers.complete"
                    if mark in trace.marks:
                        trace.marks[mark] = arrived
            result.status = response.status
            response_headers = header_map(response.headers)
            timing = response_headers.get("server-timing")
            if timing:
                result.server_timing_ms.update(parse_server_timing(timing))
            result.retry_after_s = parse_retry_after(response_headers, wall)
            started_body = True
            failure = (
                None
                if response.status >= 400
                else head_failure(response.status, response_headers, stream)
            )
            if failure is not None:
                detail = failure.detail
                if failure.snippet:
                    detail += f"; the body begins {_snippet(response, result, clock, arrivals)!r}"
                raise _StreamFailure(failure.kind, detail)
            if response.status >= 400:
                body_bytes = response.read()
                result.bytes_received = len(body_bytes)
                auth = response.status in (401, 403)
                result.error_kind = "auth_error" if auth else "http_status"
                result.error_detail = body_bytes[:500].decode("utf-8", errors="replace")
            elif stream:
                _read_stream(response, result, clock, deadline, _wants_output(body), arrivals, api)
            else:
                _read_whole(
                    response,
                    response_headers,
                    result,
                    clock,
                    deadline,
                    _wants_output(body),
                    arrivals,
                    api,
                )
        finally:
            response.close()
    except _StreamFailure as exc:
        result.error_kind, result.error_detail = exc.kind, exc.detail
    except HTTP_ERRORS as exc:
        result.error_kind = _error_kind_for(exc, started_body)
        result.error_detail = f"{type(exc).__name__}: {exc}"
    result.ended_at = clock()
    result.phases_ms = trace.phases_ms()
    went_out = trace.went_out
    if went_out is not None and went_out > result.sent_at:
        # "Sent" is when the request reached the network (a new connection's connect, or the
        # first header byte on a kept-alive one); the client's own time before it — building
        # the request, waiting for the pool or for its greenlet's turn — is the "client" phase.
        result.phases_ms["client"] = (went_out - result.sent_at) * 1000.0
        result.sent_epoch += went_out - result.sent_at
        result.sent_at = went_out
    result.connected = trace.connected
    result.send_uncertainty_s = trace.send_uncertainty_s
    return result


SNIPPET_BYTES = 200  # of an unexpected body, quoted in the failure's detail


def _snippet(
    response: OpenResponse, result: AttemptResult, clock: Clock, arrivals: TimedStream | None
) -> str:
    """The body's first bytes: what came with the head, or the first read after it. One read
    only, and none of its failures: the body may be an endless or a stalled stream, and the
    failure to report is the head's."""
    try:
        for raw in response:
            result.first_byte_at = _arrival(clock(), arrivals)
            result.bytes_received += len(raw)
            return raw[:SNIPPET_BYTES].decode("utf-8", errors="replace")
    except HTTP_ERRORS:
        pass
    return ""


def _wants_output(body: Mapping[str, Any]) -> bool:
    """Whether the request asked for output: unless its token limit is 0, it did (without one,
    the server's default limit is above 0)."""
    for key in ("max_tokens", "max_completion_tokens", LIMIT_KEYS["responses"]):
        limit = body.get(key)
        if isinstance(limit, int) and limit <= 0:
            return False
    return True


def _check_output(result: AttemptResult, wants_output: bool) -> None:
    """A completed answer with nothing in it is a failure, never goodput: a server that ends
    streams early (llama.cpp's, when a new request arrives) answers ``[DONE]`` and nothing else."""
    if not wants_output or result.token_events or result.completion_tokens or result.tool_calls:
        return
    usage = "no usage" if result.completion_tokens is None else "usage of 0 completion tokens"
    raise _StreamFailure(
        "empty_response",
        f"the response completed with no output: no content, no tool call, {usage}",
    )


def _arrival(now: float, arrivals: TimedStream | None) -> float:
    """When the bytes just handed over reached this host: the kernel's stamp when there is one."""
    if arrivals is not None and arrivals.arrived_at is not None:
        return min(now, arrivals.arrived_at)
    return now


def _read_stream(
    response: OpenResponse,
    result: AttemptResult,
    clock: Clock,
    deadline: Deadline,
    wants_output: bool,
    arrivals: TimedStream | None = None,
    api: Api = "chat",
) -> None:
    parser = SSEParser()
    tokens = result.token_events
    stamped = arrivals is not None and arrivals.kernel_stamps
    result.kernel_stamps = stamped
    previous_read = clock() if arrivals is None else arrivals.read_at
    for raw in response:
        now = _arrival(clock(), arrivals)  # before anything else touches the bytes
        if result.first_byte_at is None:
            result.first_byte_at = now
        result.bytes_received += len(raw)
        had = len(tokens)
        for event in parser.feed(raw, now):
            _handle_event(result, event, api)
        if len(tokens) - had > 1:
            # Several token events in one read carry one stamp, its newest packet's: the
            # kernel merged the packets while they waited (``sockets.py``). Every one but the
            # last may have arrived earlier — back to the previous read: an upper bound, and
            # it says so. (The stream's tail — usage, [DONE] — after the last token is not a
            # token: the last token keeps the read's stamp, off by the server's delay in
            # writing the tail, docs/metrics.md.)
            for token in tokens[had:-1]:
                token.coalesced = True
                token.late_by_at_most = max(now - previous_read, 0.0)
        if arrivals is not None and stamped:
            result.read_delay_s = max(result.read_delay_s, arrivals.read_at - now)
        previous_read = now if arrivals is None else arrivals.read_at
        deadline.check("reading the body")
    if not result.saw_done:
        detail = f"stream ended without {STREAM_ENDS[api]}"
        if parser.has_partial:
            detail += " (cut inside an event)"
        raise _StreamFailure("no_done", detail)
    if parser.invalid_utf8:
        raise _StreamFailure(
            "invalid_utf8",
            f"{parser.invalid_utf8} line(s) of the stream were not valid UTF-8 (read with U+FFFD "
            f"in place of the bad bytes); the first: {parser.first_invalid[:200]!r}",
        )
    _check_output(result, wants_output)


def _read_whole(
    response: OpenResponse,
    headers: Mapping[str, str],
    result: AttemptResult,
    clock: Clock,
    deadline: Deadline,
    wants_output: bool,
    arrivals: TimedStream | None = None,
    api: Api = "chat",
) -> None:
    parts: list[bytes] = []
    result.kernel_stamps = arrivals is not None and arrivals.kernel_stamps
    for raw in response:
        now = _arrival(clock(), arrivals)
        if result.first_byte_at is None:
            result.first_byte_at = now
        result.bytes_received += len(raw)
        parts.append(raw)
        deadline.check("reading the body")
    done_at = _arrival(clock(), arrivals)
    try:
        data = orjson.loads(b"".join(parts))
    except orjson.JSONDecodeError as exc:
        raise _StreamFailure("malformed_json", str(exc)) from None
    if not isinstance(data, dict):
        raise _StreamFailure("malformed_json", "response body is not a JSON object")
    text = read_whole(result, data, api)
    try:
        result.signature = Signature.from_headers(headers)
    except IntegrityError as exc:
        result.signature_problem = str(exc)
    result.events = 1
    result.saw_done = True
    result.content_parts.append(text)
    if text:
        result.token_events.append(TokenEvent(done_at, text))
    _check_output(result, wants_output)


def verify_attempt(result: AttemptResult, verifier: Verifier) -> None:
    """Check a successful attempt's signature; a failure turns it into an ``integrity`` error."""
    if not result.ok:
        return
    try:
        if result.signature_problem is not None:
            raise IntegrityError(result.signature_problem)
        verifier.check(
            result.completion_id,
            "".join(result.content_parts),
            result.signature,
            result.seed,
            # The signed and generated text is the answer's: thoughts are not part of it.
            None
            if result.completion_tokens is None
            else result.completion_tokens - (result.reasoning_tokens or 0),
        )
    except IntegrityError as exc:
        result.error_kind, result.error_detail = ERROR_KIND, str(exc)
        result.integrity = "failed"
        return
    result.integrity = "verified"
