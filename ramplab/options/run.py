"""The ``--ramplab-*`` options of a ramp run, checked once per process.

Each also reads a ``RAMPLAB_*`` environment variable and Locust config files, like the streaming
user's options. Errors are ``UsageError``s naming the option; the hooks turn them into exit 2.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from ramplab.errors import UsageError
from ramplab.load.arrivals.schedule import make_process
from ramplab.load.outage import Outage, parse_outage
from ramplab.load.plan import Mode
from ramplab.load.shapes import Shape, parse_shape
from ramplab.load.sizing import prior_duration_s
from ramplab.results.slo import Gate, RequestSlo, parse_gates, parse_request_slo
from ramplab.retry.config import RetryConfig, parse_retry

OPTIONS: tuple[tuple[str, str, Any, Any, str], ...] = (
    ("--ramplab-shape", "ramplab_shape", str, "", "load shape, e.g. '1,2,5,10@30s/5s'"),
    ("--ramplab-mode", "ramplab_mode", str, "open", "open: shape rates are QPS; closed: users"),
    ("--ramplab-arrivals", "ramplab_arrivals", str, "poisson", "constant|poisson|gamma:B"),
    ("--ramplab-seed", "ramplab_seed", int, 1, "seed of the arrival schedule"),
    ("--ramplab-overflow", "ramplab_overflow", str, "drop", "no free user: drop|queue"),
    ("--ramplab-max-users", "ramplab_max_users", int, 1000, "cap on users (all workers)"),
    ("--ramplab-headroom", "ramplab_headroom", float, 1.5, "users = rate x duration x this"),
    (
        "--ramplab-duration-prior",
        "ramplab_duration_prior",
        float,
        0.0,
        "seconds per request assumed before any is measured (0: 1 s + max-tokens x 50 ms)",
    ),
    ("--ramplab-retry", "ramplab_retry", str, "", "retry policy: name or JSON mapping"),
    ("--ramplab-slo", "ramplab_slo", str, "", "per-request SLOs, e.g. 'ttft_ms<=800'"),
    ("--ramplab-gate", "ramplab_gate", str, "", "';'-separated gates: 'ttft_ms.p99 < 800'"),
    (
        "--ramplab-outage",
        "ramplab_outage",
        str,
        "",
        "START+DURATION: outage on the reference target at run time (needs the admin token)",
    ),
    ("--ramplab-admin-token", "ramplab_admin_token", str, "", "the reference target's admin token"),
    ("--ramplab-drain", "ramplab_drain", float, 30.0, "max seconds to wait for in-flight"),
)


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
    outage: Outage | None = None
    admin_token: str = ""


def register(parser: Any) -> None:
    group = parser.add_argument_group("ramplab load shape, retries and SLOs")
    for flag, dest, kind, default, help_text in OPTIONS:
        group.add_argument(
            flag,
            dest=dest,
            type=kind,
            default=default,
            env_var="RAMPLAB_" + dest.removeprefix("ramplab_").upper(),
            help=help_text,
        )


def _retry_spec(text: str) -> Any:
    text = text.strip()
    if not text:
        return None
    if text.startswith("{"):
        try:
            return json.loads(text)
        except json.JSONDecodeError as exc:
            raise UsageError("--ramplab-retry", f"invalid JSON: {exc.msg}") from None
    return text


def from_options(parsed: Any) -> RunOptions:
    """Validate the options; raises ``UsageError`` naming the option."""

    def get(dest: str, default: Any = None) -> Any:
        # Not `value or default`: 0 is a real seed, drain or (refused) user cap.
        value = getattr(parsed, dest, None)
        return default if value is None else value

    shape_text = str(get("ramplab_shape") or "").strip()
    try:
        shape = parse_shape(shape_text) if shape_text else None
    except UsageError as exc:
        raise UsageError("--ramplab-shape", str(exc)) from None
    mode = str(get("ramplab_mode") or "open")
    if mode not in ("open", "closed"):
        raise UsageError("--ramplab-mode", f"expected open or closed, got {mode!r}")
    arrivals = str(get("ramplab_arrivals") or "poisson")
    make_process(arrivals, field="--ramplab-arrivals")
    overflow = str(get("ramplab_overflow") or "drop")
    if overflow not in ("drop", "queue"):
        raise UsageError("--ramplab-overflow", f"expected drop or queue, got {overflow!r}")
    max_users = int(get("ramplab_max_users", 1000))
    if max_users < 1:
        raise UsageError("--ramplab-max-users", f"must be >= 1, got {max_users}")
    headroom = float(get("ramplab_headroom", 1.5))
    if headroom < 1.0:
        raise UsageError("--ramplab-headroom", f"must be >= 1, got {headroom}")
    prior = float(get("ramplab_duration_prior", 0.0))
    if prior < 0:
        raise UsageError("--ramplab-duration-prior", f"must be >= 0, got {prior}")
    if prior == 0:
        prior = prior_duration_s(int(get("max_tokens") or 128))
    retry_spec = _retry_spec(str(get("ramplab_retry") or ""))
    retry = parse_retry(retry_spec, field="--ramplab-retry") if retry_spec is not None else None
    slo_text = str(get("ramplab_slo") or "").strip()
    slo = parse_request_slo(slo_text or None, field="--ramplab-slo")
    gate_text = str(get("ramplab_gate") or "")
    gates = parse_gates(
        [g.strip() for g in gate_text.split(";") if g.strip()], field="--ramplab-gate"
    )
    drain = float(get("ramplab_drain", 30.0))
    if drain < 0:
        raise UsageError("--ramplab-drain", f"must be >= 0, got {drain}")
    outage_text = str(get("ramplab_outage") or "").strip()
    outage = parse_outage(outage_text) if outage_text else None
    admin_token = str(get("ramplab_admin_token") or "")
    if outage is not None and not admin_token:
        raise UsageError("--ramplab-admin-token", "--ramplab-outage needs the target's admin token")
    return RunOptions(
        shape_text=shape_text,
        shape=shape,
        mode=mode,  # type: ignore[arg-type]
        arrivals=arrivals,
        seed=int(get("ramplab_seed", 1)),
        overflow=overflow,
        max_users=max_users,
        headroom=headroom,
        duration_prior_s=prior,
        retry=retry,
        retry_spec=retry_spec,
        slo=slo,
        gates=gates,
        drain_s=drain,
        outage=outage,
        admin_token=admin_token,
    )
