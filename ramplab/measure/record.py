"""The per-request record: one row of the run's records per attempt chain (docs/records.md).

Times are in milliseconds unless the name says otherwise; ``*_start`` fields are Unix epoch
seconds (wall clock, so workers' records can be merged), every duration is measured on the
monotonic clock. ``ttft_ms``/``ttlt_ms`` count from the *intended* start (what the schedule asked
for); ``*_send_ms`` from the actual send, so a late client (coordinated omission) is visible.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any, Literal

TokenSource = Literal["usage", "tokenizer"]
# The error kind of a request cut by the run's end, an interruption or a crash: it was sent and
# never finished, and still has its record (docs/failures.md).
UNFINISHED = "unfinished"
# Every error kind a record can carry, each documented in docs/failures.md (a test keeps the two
# equal): what failed, in the order a request meets them.
ERROR_KINDS = (
    "client_throttled",
    "auth_error",
    "connect_error",
    "tls_error",
    "timeout",
    "http_status",
    "unexpected_content_type",
    "unsupported_encoding",
    "protocol_error",
    "connection_dropped",
    "stream_error",
    "malformed_json",
    "invalid_utf8",
    "no_done",
    "empty_response",
    "integrity",
    UNFINISHED,
)


@dataclass(slots=True)
class AttemptRecord:
    """One HTTP attempt inside a request's retry chain."""

    attempt: int  # 1-based
    start: float  # epoch seconds of the send
    status: int | None  # HTTP status, None when no response arrived
    error_kind: str | None  # None on success; one of ERROR_KINDS (docs/failures.md)
    duration_ms: float
    retry_after_s: float | None = None  # what the server asked for, if anything
    wait_before_ms: float = 0.0  # back-off slept before this attempt


@dataclass(slots=True)
class RequestRecord:
    request_id: str
    worker: str
    intended_start: float  # epoch seconds
    actual_start: float  # epoch seconds of the first attempt's send
    ok: bool
    status: int | None  # final attempt's status
    error_kind: str | None  # final attempt's error kind; None when ok
    step: int | None = None  # load step index, set by the arrival engine
    target_qps: float | None = None
    arrival: int | None = None  # index in the run's global arrival schedule (open-loop engine)
    # Multi-turn sessions (measure/session.py): the session's id and this request's 1-based turn.
    session_id: str | None = None
    turn: int | None = None
    attempts: int = 1
    attempt_log: list[AttemptRecord] = field(default_factory=list)
    total_ms: float | None = None  # intended start → final outcome, waits included
    lateness_ms: float = 0.0  # actual_start − intended_start
    ttfb_ms: float | None = None
    ttft_ms: float | None = None
    ttft_send_ms: float | None = None
    ttlt_ms: float | None = None
    ttlt_send_ms: float | None = None
    tpot_ms: float | None = None
    itl_ms: list[float] = field(default_factory=list)
    phases_ms: dict[str, float] = field(default_factory=dict)
    server_timing_ms: dict[str, float] = field(default_factory=dict)
    output_tokens: int | None = None
    output_tokens_source: TokenSource | None = None
    prompt_tokens: int | None = None
    bytes_received: int = 0
    events: int = 0
    slo_ok: bool | None = None  # met every campaign SLO (goodput), None when no SLOs are set
    error_detail: str | None = None  # what went wrong, for a person reading the record
    # What the prompt source said about this request's prompt (the needle cell: needle.py).
    prompt_labels: dict[str, Any] = field(default_factory=dict)
    tokens_per_event: list[int] = field(default_factory=list)  # per token-bearing event
    # The server's own send time of each content event, ms after its arrival, when it discloses
    # them (the reference target's ``timing_detail`` extension): for checking our own accuracy.
    server_events_ms: list[float] = field(default_factory=list)
    integrity: str | None = None  # "verified" / "failed" with --verify-signature, else None
    # Reasoning models and prefix caches (``phases.py``, docs/workloads.md). ``ttft_ms`` is the
    # first output of any kind (reasoning included, its meaning since the first release);
    # ``answer_ttft_ms`` the first answer token, equal to it without reasoning.
    answer_ttft_ms: float | None = None
    reasoning_events: int = 0  # leading token-bearing events with reasoning only
    reasoning_tokens: int | None = None  # the server's usage, else counted; None: no reasoning
    cached_tokens: int | None = None  # usage.prompt_tokens_details.cached_tokens, if reported
    # What joins the record with the server's log, a trace or a packet capture: the response's
    # ``id`` (the first one the stream carried) and the TCP port the request left from.
    completion_id: str | None = None
    local_port: int | None = None
    # How far this record's stamps may be off (docs/metrics.md, "How exact the stamps are"):
    # token events whose stamp is only an upper bound (read in one piece with a later event),
    # the bound on the error of ``ttft_send_ms``/``ttlt_send_ms`` (None: user-space stamps,
    # no bound known), and how far behind the packets the reader was at worst.
    coalesced_events: list[int] = field(default_factory=list)
    stamp_error_ms: float | None = None
    read_delay_ms: float | None = None
    # The size in tokens the client wrote the prompt to (``--tokenizer``'s tokens; a dataset
    # entry's count); None when it was read, not written (a prompts file, a session's history).
    # ``prompt_tokens`` is what the server counted, its chat template included.
    requested_prompt_tokens: int | None = None

    def to_dict(self) -> dict[str, Any]:
        # Field by field, not ``dataclasses.asdict``: that deep-copies every value and cost
        # ~0.5 ms a record, a measurable share of a busy generator's CPU.
        data = {name: getattr(self, name) for name in _FIELDS}
        data["attempt_log"] = [asdict(attempt) for attempt in self.attempt_log]
        data["itl_ms"] = list(self.itl_ms)
        data["phases_ms"] = dict(self.phases_ms)
        data["server_timing_ms"] = dict(self.server_timing_ms)
        data["tokens_per_event"] = list(self.tokens_per_event)
        data["server_events_ms"] = list(self.server_events_ms)
        data["prompt_labels"] = dict(self.prompt_labels)
        data["coalesced_events"] = list(self.coalesced_events)
        return data

    def measured_itl(self) -> list[float]:
        """``itl_ms`` without the gaps that touch a coalesced event: what the ITL figures pool
        (the rest, ``len(itl_ms) − len(measured_itl())``, are counted, not pooled)."""
        if not self.coalesced_events:
            return self.itl_ms
        coalesced = set(self.coalesced_events)
        per_event = self.tokens_per_event[1:]
        if sum(per_event) != len(self.itl_ms):  # not written with them: one gap per event
            per_event = [1] * len(self.itl_ms)
        out: list[float] = []
        at = 0
        for index, tokens in enumerate(per_event, start=1):
            if index - 1 not in coalesced and index not in coalesced:
                out.extend(self.itl_ms[at : at + tokens])
            at += tokens
        return out


_FIELDS = tuple(RequestRecord.__dataclass_fields__)
