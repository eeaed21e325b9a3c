"""What a campaign needs before any process starts, checked by ``validate`` and ``run``.

Parsing a campaign (``ramplab.stack.campaign``) checks each field's form; the checks here look at
what the fields point to: the prompts file, the credentials the chosen auth mode needs (from the
file or the ``RAMPLAB_*`` variables the Locust processes read), and the summary metric each gate
names.
The target's own settings are its business: ``target_check`` asks ``python -m target_service
--check`` in a subprocess, because ramplab never imports the target.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ramplab.errors import UsageError
from ramplab.results.slo import evaluate_gates, parse_gates
from ramplab.results.steps import summarize
from ramplab.stack.campaign import Campaign, CampaignError

__all__ = ["check_campaign", "check_gates", "summary_template", "target_check", "target_env"]

REPO = Path(__file__).resolve().parents[2]
# Keys the master adds to summarize()'s output (ramplab.plugin.master); a gate may name them.
_RUN_KEYS = ("mode", "shape", "arrivals", "seed", "run_start", "workers", "retry")
_STEP_KEYS = ("dispatched", "by_worker", "lost", "target_users")
_TARGET_CHECK_TIMEOUT_S = 60.0


def summary_template(campaign: Campaign) -> dict[str, Any]:
    """A ``summary.json`` of this campaign with no data: every key a gate can name."""
    stages = len(campaign.load_shape.stages)
    summary = summarize([], campaign.load_shape, 0.0, [0] * stages, [0] * stages)
    summary.update(dict.fromkeys(_RUN_KEYS))
    for step in summary["steps"]:
        step.update(dict.fromkeys(_STEP_KEYS))
    return summary


def check_gates(campaign: Campaign, gates: list[str], field: str) -> None:
    """A gate naming no metric of the summary (a typo, a step past the last) is refused now
    rather than reported ``invalid`` after the whole run."""
    template = summary_template(campaign)
    report = evaluate_gates(parse_gates(gates, field=field), template)
    for index, result in enumerate(report.results):
        if result.status == "invalid":
            raise UsageError(f"{field}[{index}]", f"{result.gate.text!r}: {result.detail}")


def check_campaign(campaign: Campaign, environ: Mapping[str, str] | None = None) -> None:
    """The prompts file, the auth credentials and the gates; ``CampaignError`` names the field."""
    env = os.environ if environ is None else environ
    prompts = campaign.workload.prompts_file
    if prompts is not None:
        try:
            with prompts.open("rb"):
                pass
        except OSError as exc:
            raise CampaignError(
                "workload.prompts_file", f"{str(prompts)!r}: {exc.strerror}"
            ) from None
    auth = campaign.workload.auth
    needs = {
        "api-key": (("api_key", auth.api_key, "RAMPLAB_API_KEY"),),
        "jwt": (
            ("client_id", auth.client_id, "RAMPLAB_CLIENT_ID"),
            ("client_secret", auth.client_secret, "RAMPLAB_CLIENT_SECRET"),
        ),
    }.get(auth.mode, ())
    for key, value, variable in needs:
        if not (value or env.get(variable)):
            raise CampaignError(
                f"workload.auth.{key}", f"auth mode {auth.mode} needs it (or {variable})"
            )
    try:
        check_gates(campaign, campaign.gates, "gates")
    except UsageError as exc:
        raise CampaignError(exc.field, str(exc).removeprefix(f"{exc.field}: ")) from None


def target_env(campaign: Campaign, redis_url: str | None = None) -> dict[str, str]:
    """The ``APP_*`` environment the local stack gives the reference target."""
    env = campaign.target.environment()
    if redis_url:
        env["APP_REDIS_URL"] = redis_url
    config_file = REPO / "configs" / "app.toml"
    if config_file.is_file():
        env.setdefault("APP_CONFIG_FILE", str(config_file))
    return env


def target_check(campaign: Campaign) -> None:
    """``python -m target_service --check`` with the campaign's settings; refused settings are a
    ``CampaignError`` on ``target.settings`` carrying the target's own message."""
    env = {**os.environ, **target_env(campaign)}  # the stack's target inherits APP_* too
    try:
        done = subprocess.run(
            [sys.executable, "-m", "target_service", "--check"],
            env=env,
            capture_output=True,
            text=True,
            timeout=_TARGET_CHECK_TIMEOUT_S,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise CampaignError("target.settings", f"the target's --check did not run: {exc}") from None
    if done.returncode != 0:
        lines = [line for line in done.stderr.splitlines() if line.strip()]
        reason = lines[-1].removeprefix("target: ") if lines else f"exit {done.returncode}"
        raise CampaignError("target.settings", reason)
