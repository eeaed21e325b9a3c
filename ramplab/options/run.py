"""The ramp engine's ``--ramplab-*`` options as one checked object per process.

The values come from Locust's parsed options (command line, ``RAMPLAB_*`` variables, config
files) through the schema, which checks each; what is built here is what needs more than one
option (the duration prior needs ``--max-tokens``, an outage the admin token) and the objects the
engine uses (a ``Shape``, a ``RetryConfig``, parsed gates). Errors are ``UsageError``s naming the
option; the plugin turns them into exit 2.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ramplab.errors import UsageError
from ramplab.load.arrivals.trace import shape_text as trace_shape_text
from ramplab.load.outage import Outage, parse_outage
from ramplab.load.plan import Mode
from ramplab.load.shapes import Shape, parse_shape
from ramplab.load.sizing import prior_duration_s
from ramplab.load.think import parse_think_time
from ramplab.load.trace import parse_trace_spec, trace_spec
from ramplab.options import kinds, schema
from ramplab.results.slo import Gate, RequestSlo, parse_gates, parse_request_slo
from ramplab.retry.config import RetryConfig, parse_retry

__all__ = ["RunOptions", "from_options", "register"]


@dataclass(frozen=True, slots=True)
class RunOptions:
    shape_text: str
    shape: Shape | None
    mode: Mode
    arrivals: str
    seed: int
    overflow: str
    max_users: int
    headroom: float
    duration_prior_s: float
    retry: RetryConfig | None
    retry_spec: Any
    slo: RequestSlo
    gates: list[Gate]
    drain_s: float
    max_error_ratio: float = 0.5  # the error ceiling (results/failures.py)
    outage: Outage | None = None
    admin_token: str = ""
    trace: Path | None = None  # with it, ``arrivals`` is its replay's spec and ``shape`` its own
    trace_speed: float = 1.0
    trace_loop: int = 1
    trace_limit: int = 0
    engine_metrics: str = "auto"  # auto, off or the URL of the server's Prometheus endpoint


def register(parser: Any) -> None:
    """The ramp engine's options, on Locust's parser."""
    schema.register(parser, "ramp")


def from_options(parsed: Any) -> RunOptions:
    """Validate the options; raises ``UsageError`` naming the option."""

    def get(flag: str) -> Any:
        return schema.value(parsed, schema.option(flag))

    shape_text = str(get("--ramplab-shape") or "")
    prior = float(get("--ramplab-duration-prior"))
    if prior == 0:
        prior = prior_duration_s(int(get("--max-tokens")))
        turns = int(get("--session-turns"))
        if turns > 1:  # an arrival holds its user for a whole session
            think = parse_think_time(get("--session-think-time"), "--session-think-time")
            prior = turns * prior + (turns - 1) * think.mean_s
    retry_spec = kinds.retry_spec(str(get("--ramplab-retry") or ""), "--ramplab-retry")
    retry = parse_retry(retry_spec, field="--ramplab-retry") if retry_spec is not None else None
    gate_texts = kinds.gate_texts(str(get("--ramplab-gate") or ""))
    outage_text = str(get("--ramplab-outage") or "")
    outage = parse_outage(outage_text) if outage_text else None
    admin_token = str(get("--ramplab-admin-token") or "")
    if outage is not None and not admin_token:
        raise UsageError("--ramplab-admin-token", "--ramplab-outage needs the target's admin token")
    arrivals = get("--ramplab-arrivals")
    trace = schema.option("--ramplab-trace").to_setting(get("--ramplab-trace"))
    speed, loop, limit = (
        get("--ramplab-trace-speed"),
        get("--ramplab-trace-loop"),
        get("--ramplab-trace-limit"),
    )
    if trace is not None:
        arrivals, shape_text = _replay(trace, speed, loop, limit, shape_text)
        if int(get("--session-turns")) > 1:
            raise UsageError("--session-turns", "a trace replay sends single requests: use 1")
        if get("--ramplab-mode") == "closed":
            raise UsageError("--ramplab-mode", "a trace replay is an open-loop schedule: use open")
    if int(get("--session-turns")) > 1 and get("--ramplab-mode") == "closed":
        raise UsageError("--session-turns", "sessions arrive open-loop: use --ramplab-mode open")
    return RunOptions(
        shape_text=shape_text,
        shape=parse_shape(shape_text) if shape_text else None,
        mode=get("--ramplab-mode"),
        arrivals=arrivals,
        seed=get("--ramplab-seed"),
        overflow=get("--ramplab-overflow"),
        max_users=get("--ramplab-max-users"),
        headroom=get("--ramplab-headroom"),
        duration_prior_s=prior,
        retry=retry,
        retry_spec=retry_spec,
        slo=parse_request_slo(get("--ramplab-slo") or None, field="--ramplab-slo"),
        gates=parse_gates(gate_texts, field="--ramplab-gate"),
        drain_s=get("--ramplab-drain"),
        max_error_ratio=get("--ramplab-max-error-ratio"),
        outage=outage,
        admin_token=admin_token,
        trace=trace,
        trace_speed=speed,
        trace_loop=loop,
        trace_limit=limit,
        engine_metrics=get("--ramplab-engine-metrics"),
    )


def _replay(trace: Path, speed: float, loop: int, limit: int, given: str) -> tuple[str, str]:
    """The arrivals spec and the shape of a trace replay; a given shape must be the trace's."""
    spec = trace_spec(trace, speed, loop, limit)
    derived = trace_shape_text(parse_trace_spec(spec))
    if given and parse_shape(given).stages != parse_shape(derived).stages:
        raise UsageError(
            "--ramplab-shape", "a trace replay takes its shape from the trace: leave it out"
        )
    return spec, derived
