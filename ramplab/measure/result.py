"""What one attempt observed: its stamps, its token events, the server's usage and extensions.

Plain data, filled in by ``attempt.py`` as the response arrives and by ``events.py`` event by
event; ``chain.py`` turns it into the request's record.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ramplab.measure.integrity import Signature

__all__ = ["AttemptResult", "TokenEvent"]


@dataclass(slots=True)
class TokenEvent:
    """An SSE event that carried output text."""

    at: float  # monotonic seconds (arrival of the event's first byte)
    text: str
    answer: bool = True  # False: it carried reasoning only (``reasoning_content``/``reasoning``)
    # Read together with a later event in one read that could not be cut at the events (no
    # kernel stamps, or no chunked framing): ``at`` is the read's stamp, an upper bound, and
    # ``late_by_at_most`` how far above the arrival it may be.
    coalesced: bool = False
    late_by_at_most: float = 0.0


@dataclass(slots=True)
class AttemptResult:
    """Everything one attempt observed; monotonic seconds unless named ``_ms``."""

    sent_at: float  # monotonic, just before the request was handed to httpx
    sent_epoch: float
    status: int | None = None
    error_kind: str | None = None
    error_detail: str | None = None
    ended_at: float = 0.0
    headers_at: float | None = None
    first_byte_at: float | None = None
    token_events: list[TokenEvent] = field(default_factory=list)
    events: int = 0
    bytes_received: int = 0
    saw_done: bool = False
    prompt_tokens: int | None = None
    completion_tokens: int | None = None  # from the server's usage
    reasoning_tokens: int | None = None  # usage.completion_tokens_details.reasoning_tokens
    cached_tokens: int | None = None  # usage.prompt_tokens_details.cached_tokens
    server_timing_ms: dict[str, float] = field(default_factory=dict)
    server_tokens_per_event: int | None = None  # declared by the server (target extension)
    server_events_ms: list[float] = field(default_factory=list)  # disclosed send times
    phases_ms: dict[str, float] = field(default_factory=dict)
    retry_after_s: float | None = None
    connected: bool = False
    # How far the stamps may be off (``timebase.py``, ``sockets.py``): the send's system-call
    # bracket, whether reads carried the kernel's stamps, and the largest delay between a
    # packet's arrival and the read that took it (how far behind the reader was).
    send_uncertainty_s: float = 0.0
    kernel_stamps: bool = False
    read_delay_s: float = 0.0
    tool_calls: bool = False  # output as tool calls: not text, but not an empty response either
    # For integrity checks (integrity.py): the text exactly as signed, and the signature.
    completion_id: str | None = None
    local_port: int | None = None  # the connection's own port (TCP), to join a capture
    content_parts: list[str] = field(default_factory=list)
    signature: Signature | None = None
    signature_problem: str | None = None  # a signature was sent but could not be read
    integrity: str | None = None  # "verified" once checked; None when not asked for
    seed: int | None = None  # the request's seed, else the one the server reports

    @property
    def ok(self) -> bool:
        return self.error_kind is None
