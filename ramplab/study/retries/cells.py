"""One cell of the retries study (a fault scenario × a retry policy): measured, and predicted.

The measurement is the run's ``summary.json`` (goodput, success ratio, retry amplification,
``outage.recovery_s``) and a pass over its records for what the model needs as input
or as explanation: the first-token time of an untroubled request, the duration of a refused
attempt, the slot time the target reports (``server_timing_ms`` prefill + decode), and the
fault ratio met by first attempts and by retries separately.

The prediction comes from ``retries_model`` (closed forms) where one exists and from
``retries_replay`` (the policy's own code on a virtual clock) otherwise; ``method`` says which.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from statistics import median
from typing import Any

import numpy as np

from ramplab.results.digest import iter_records
from ramplab.retry.config import RetryConfig, parse_retry
from ramplab.runs.rundir import RunDir
from ramplab.study.retries import model
from ramplab.study.retries.replay import Faults, Replay, even_arrivals, recovery_s, replay

__all__ = ["Cell", "Inputs", "measure_run", "policy_label", "predict", "scenario_of"]

Z = 3.0  # the model's stated error: 3 standard errors of the mean over the cell's requests
DEFAULT_SLOTS = 64  # configs/app.toml scheduler.max_num_seqs
# Replays per cell: the model is their mean (a cold throttle can lock itself out in some).
REPLAYS = 8


def policy_label(retry: Mapping[str, Any] | str | None) -> str:
    """``full_jitter+budget``: the back-off's name, then what is shared by the worker."""
    config = parse_retry(retry)
    if config.policy == "none":
        name = "none"
    elif config.policy == "retry_after":
        name = "retry_after"
    else:
        assert config.backoff is not None
        name = config.backoff.name
    extras = [e for e, on in (("budget", config.budget), ("throttle", config.throttle)) if on]
    return "+".join([name, *extras])


def scenario_of(campaign: Mapping[str, Any]) -> str:
    """``outage`` (a window in run time), ``shed`` (overload shedding), ``random_429`` /
    ``random_503`` / ``random_faults`` (seeded ratios), or ``no_faults``."""
    if campaign.get("outage"):
        return "outage"
    faults = _faults(campaign)
    if faults.get("shed_waiting_above"):
        return "shed"
    r429, r503 = float(faults.get("ratio_429", 0)), float(faults.get("ratio_503", 0))
    if r429 and r503:
        return "random_faults"
    return "random_429" if r429 else "random_503" if r503 else "no_faults"


def _faults(campaign: Mapping[str, Any]) -> dict[str, Any]:
    settings = (campaign.get("target") or {}).get("settings") or {}
    return dict(settings.get("faults") or {})


def _slots(campaign: Mapping[str, Any]) -> int:
    settings = (campaign.get("target") or {}).get("settings") or {}
    return int((settings.get("scheduler") or {}).get("max_num_seqs", DEFAULT_SLOTS))


@dataclass(slots=True)
class Inputs:
    """What one run measured that the model takes as input or that explains a difference."""

    ok_ttft_s: float  # median TTFT of successful single-attempt requests, less server queueing
    fail_s: float  # median duration of a refused attempt
    service_s: float  # mean prefill + decode the target reports for a successful request
    p_first: float | None  # share of first attempts refused
    p_retry: float | None  # share of retries refused
    drain_s: float | None  # outage: last send of a chain caught by the window − its end
    arrivals: np.ndarray  # every request's intended start, run seconds, sorted


def measure_run(run_dir: Path, summary: Mapping[str, Any]) -> Inputs:
    start = float(summary["run_start"])
    outage = summary.get("outage") or None
    ttft, fail, service = [], [], []
    first = [0, 0]  # refused, total
    retries = [0, 0]
    caught_last: list[float] = []
    arrivals: list[float] = []
    for r in iter_records(RunDir(run_dir).records):
        arrivals.append(r.intended_start - start)
        for a in r.attempt_log:
            bucket = first if a.attempt == 1 else retries
            bucket[1] += 1
            if a.status is not None and a.status != 200:
                bucket[0] += 1
                fail.append(a.duration_ms / 1000)
        st = r.server_timing_ms
        if r.ok and r.attempts == 1 and r.ttft_ms is not None:
            # Without the wait the target reports in its queue: the model adds its own.
            ttft.append((r.ttft_ms - st.get("queue", 0.0)) / 1000)
        if r.ok and "decode" in st:
            service.append((st.get("prefill", 0.0) + st["decode"]) / 1000)
        at = r.intended_start - start
        if outage and r.attempt_log and outage["start_s"] <= at < outage["end_s"]:
            caught_last.append(r.attempt_log[-1].start - start - outage["end_s"])
    return Inputs(
        ok_ttft_s=median(ttft) if ttft else 0.05,
        fail_s=median(fail) if fail else 0.005,
        service_s=float(np.mean(service)) if service else 0.1,
        p_first=first[0] / first[1] if first[1] else None,
        p_retry=retries[0] / retries[1] if retries[1] else None,
        drain_s=max(0.0, *caught_last) if caught_last else None,
        arrivals=np.sort(np.asarray(arrivals, dtype=np.float64)),
    )


@dataclass(slots=True)
class Cell:
    """A scenario × policy: the measured figures (means over repeats) and the model's."""

    scenario: str
    policy: str
    variant: str
    runs: int
    requests: float
    measured: dict[str, float | None] = field(default_factory=dict)
    model: dict[str, float | None] = field(default_factory=dict)
    method: str = ""
    explanation: str = ""

    def to_json(self) -> dict[str, Any]:
        return {
            "scenario": self.scenario,
            "policy": self.policy,
            "variant": self.variant,
            "runs": self.runs,
            "requests": self.requests,
            "measured": self.measured,
            "model": self.model,
            "method": self.method,
            "explanation": self.explanation,
        }


def _stages(summary: Mapping[str, Any]) -> list[tuple[float, float, float]]:
    return [
        (float(s["start_s"]), float(s["start_s"]) + float(s["duration_s"]), float(s["target_qps"]))
        for s in summary["steps"]
        if s.get("target_qps")
    ]


def _measured_mask(summary: Mapping[str, Any], t: np.ndarray) -> np.ndarray:
    mask = np.zeros(t.shape, dtype=bool)
    for s in summary["steps"]:
        lo = float(s["start_s"]) + float(s["warmup_s"])
        mask |= (t >= lo) & (t < float(s["start_s"]) + float(s["duration_s"]))
    return mask


def _avg(values: Iterable[float | None]) -> float:
    present = [v for v in values if v is not None and not math.isnan(v)]
    return sum(present) / len(present) if present else math.nan


def _replayed(
    retry: Any,
    server: Replay,
    arrivals: np.ndarray,
    mask: np.ndarray,
    window: tuple[float, float] | None,
    seed: int,
) -> dict[str, float | None]:
    """One seeded replay's figures over the measured window."""
    result = replay(retry, replace(server, seed=seed), arrivals)
    att = result.attempts[mask].astype(np.float64)
    if not att.size:
        return {"amplification": None, "success": None, "attempts_sd": None, "good": None}
    out: dict[str, float | None] = {
        "amplification": float(att.mean()),
        "success": float(result.ok[mask].mean()),
        "attempts_sd": float(att.std()),
        "good": float(result.good[mask].mean()),
    }
    if window is not None:
        until = float(result.intended.max())
        out["recovery_s"] = recovery_s(result.intended, result.good, window[1], until)
        caught = (result.intended >= window[0]) & (result.intended < window[1])
        last = result.last_attempt_s[caught] - window[1]
        out["drain_s"] = float(np.nanmax(np.maximum(last, 0))) if caught.any() else None
    return out


def _attempts_of(config: RetryConfig) -> int:
    return 1 if config.policy == "none" else config.max_attempts


def _closed_form(
    config: RetryConfig, p: float, requests: float, measured_s: float
) -> tuple[model.ChainPrediction, str] | None:
    """The closed form for independent faults at ratio ``p``; None when the throttle bites."""
    n = _attempts_of(config)
    method = f"independent faults p={p:.3g}: A=Σ_(k<{n}) p^k, S=1−p^{n}"
    if config.throttle is not None:
        if model.throttle_rejection(p, config.throttle.k) > 0:
            return None
        method += f"; throttle idle (p < 1−1/K = {1 - 1 / config.throttle.k:.2g})"
    if config.budget is not None:
        b = config.budget
        cap = model.budget_cap(b.ratio, b.min_per_s, int(requests), measured_s, b.ttl_s)
        method += f"; budget caps A at {cap:.3g}, S=(1−p)·A"
        return model.with_cap(p, n, cap), method
    return model.independent(p, n), method


def predict(
    cell: Cell,
    campaign: Mapping[str, Any],
    summary: Mapping[str, Any],
    inputs: Inputs,
    seed: int,
) -> None:
    """Fill ``cell.model`` for one run's scenario and policy."""
    retry = campaign.get("retry")
    config = parse_retry(retry)
    faults = _faults(campaign)
    slots = _slots(campaign)
    slo = (campaign.get("slo") or {}).get("ttft_ms")
    requests = max(1.0, cell.requests)
    measured_s = float(summary["measured_s"])
    stages = _stages(summary)
    # The schedule that ran (its Poisson bunching included: 42 arrivals instead of 30 can fall
    # in a 2.5 s window at 12/s); evenly spaced at the steps' rates when there are no records.
    arrivals = inputs.arrivals if inputs.arrivals.size else even_arrivals(stages)
    mask = _measured_mask(summary, arrivals)
    # The load the target really got (the Poisson draw's count), so the model's goodput differs
    # from the measured one by the policy and the server, not by how many arrivals were drawn.
    rate = requests / measured_s if measured_s > 0 else 0.0
    p = float(faults.get("ratio_429", 0)) + float(faults.get("ratio_503", 0))
    status = 429 if float(faults.get("ratio_429", 0)) >= float(faults.get("ratio_503", 0)) else 503
    window = None
    outage = summary.get("outage") or None
    if cell.scenario == "outage" and outage:
        window = (float(outage["start_s"]), float(outage["end_s"]))
    if cell.scenario == "shed":
        k_wait = int(faults["shed_waiting_above"])

        def amplification(q: float) -> float:
            found = _closed_form(config, q, requests, measured_s)
            return found[0].amplification if found else 1.0

        p = model.shed_fixed_point(rate, inputs.service_s, slots, k_wait, amplification)
        status = 503
        shed = (
            f"M/M/{slots}/{slots + k_wait} fixed point p=B(λ·A(p)·s)={p:.3g} "
            f"(s={inputs.service_s * 1000:.0f} ms)"
        )
    server = Replay(
        faults=Faults(p, status, float(faults.get("retry_after_s", 1.0)), window),
        ok_ttft_s=inputs.ok_ttft_s,
        fail_s=inputs.fail_s,
        service_s=inputs.service_s,
        slots=slots,
        slo_ttft_s=float(slo) / 1000 if slo is not None else None,
        seed=seed,
    )
    runs = [_replayed(retry, server, arrivals, mask, window, seed + k) for k in range(REPLAYS)]
    amp = _avg(r["amplification"] for r in runs)
    success = _avg(r["success"] for r in runs)
    sd = _avg(r["attempts_sd"] for r in runs)
    good = _avg(r["good"] for r in runs)
    method = f"replay of the policy on a virtual clock ({REPLAYS} seeds)"
    closed = None if window is not None else _closed_form(config, p, requests, measured_s)
    if closed is not None:
        pred, method = closed
        amp, success, sd = pred.amplification, pred.success, pred.attempts_sd
    if cell.scenario == "shed":
        method = shed + "; " + method
    elif window is not None:
        method = (
            f"outage {window[1] - window[0]:.3g} s replayed through the policy "
            f"(Retry-After = time left; {REPLAYS} seeds), fluid queue of {slots} slots"
        )
    goods = [g for r in runs if (g := r["good"]) is not None]
    cell.model = {
        "amplification": amp,
        "amplification_error": Z * sd / math.sqrt(requests),
        "success": success,
        "success_error": Z * math.sqrt(max(success * (1 - success), 0.0) / requests),
        "goodput_qps": good * rate,
        "goodput_ratio": good,
        "goodput_ratio_spread": max(goods) - min(goods) if goods else None,
        "fault_ratio": p if window is None else None,
    }
    if window is not None:
        recoveries = [r["recovery_s"] for r in runs]
        found = [r for r in recoveries if r is not None]
        # Recovered in most replays: their mean; otherwise the model says it does not recover.
        cell.model["recovery_s"] = _avg(found) if len(found) * 2 > len(runs) else None
        cell.model["drain_s"] = _avg(r["drain_s"] for r in runs)
    cell.method = method
