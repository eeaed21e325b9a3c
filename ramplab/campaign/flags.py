"""A campaign from ``ramplab run``'s flags (``--rates 1,2,5 --step 30s --model M``), no file.

The flags are turned into the mapping a campaign file would hold, and that mapping goes through
``parse_campaign`` like any file: there is no second set of checks, and the YAML of the mapping
(``--print-campaign``) is a campaign file that describes the same run. A field the schema
refuses is reported under the flag that set it (``shape.hold`` is ``--step``).

The API key is the one value that never enters the mapping's text: it is read from the
environment variable ``--api-key-env`` names and set on the validated campaign only, which
hands it to the Locust processes as ``RAMPLAB_API_KEY`` (never a command line, never a file).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, fields
from typing import Any

import yaml

from ramplab.campaign.schema import Campaign, parse_campaign
from ramplab.errors import CampaignError, UsageError
from ramplab.load.shapes import parse_duration

__all__ = ["WARMUP_SHARE", "FlagCampaign", "RampFlags", "campaign_from_flags", "campaign_mapping"]

# A step's first fifth is its warm-up: long enough for a stepped rate's queue to settle at the
# new level, short enough that most of the step is measured (demo.yaml: 5 s of 20 s).
WARMUP_SHARE = 0.2
_FLAG_NAMES = {
    "rates": "--rates",
    "concurrency": "--concurrency",
    "step": "--step",
    "warmup": "--warmup",
    "arrivals": "--arrivals",
    "model": "--model",
    "max_tokens": "--max-tokens",
    "prompt_tokens": "--prompt-tokens",
    "api_key_env": "--api-key-env",
    "api": "--api",
}
_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


@dataclass(frozen=True, slots=True)
class RampFlags:
    """The flags of a run without a file, as given (``None``: not given)."""

    rates: str | None = None
    concurrency: str | None = None
    step: str | None = None
    warmup: str | None = None
    arrivals: str | None = None
    model: str | None = None
    max_tokens: int | None = None
    prompt_tokens: int | None = None
    api_key_env: str | None = None
    api: str | None = None  # chat, completions or responses (ramplab.measure.apis)

    def given(self) -> list[str]:
        """The flags given, by their command-line names."""
        return [_FLAG_NAMES[f.name] for f in fields(self) if getattr(self, f.name) is not None]

    @property
    def levels_flag(self) -> str:
        return "--concurrency" if self.concurrency is not None else "--rates"


@dataclass(frozen=True, slots=True)
class FlagCampaign:
    """The validated campaign (with the API key, if any) and its YAML (without it)."""

    campaign: Campaign
    text: str


def campaign_from_flags(
    flags: RampFlags, environ: Mapping[str, str], command: str, target: str | None
) -> FlagCampaign:
    """The campaign the flags describe, validated as a file would be; a ``UsageError`` naming
    the flag otherwise. ``command`` and ``target`` only go into the YAML's header comment."""
    mapping = campaign_mapping(flags)
    api_key = _api_key(flags.api_key_env, environ)
    checked = mapping
    if api_key is not None:
        auth = {"mode": "api-key", "api_key": api_key}
        checked = {**mapping, "workload": {**mapping["workload"], "auth": auth}}
    try:
        campaign = parse_campaign(checked, "the flags")
    except CampaignError as exc:
        raise UsageError(_flag_of(exc.field, flags), _reason(exc)) from None
    return FlagCampaign(campaign, _yaml(mapping, flags, command, target))


def campaign_mapping(flags: RampFlags) -> dict[str, Any]:
    """What a campaign file for these flags holds (the API key left out: its mode only)."""
    if (flags.rates is None) == (flags.concurrency is None):
        raise UsageError("--rates", "give exactly one of --rates (open loop, requests per "
                         "second) or --concurrency (closed loop, users)")  # fmt: skip
    closed = flags.concurrency is not None
    if closed and flags.arrivals is not None:
        raise UsageError(
            "--arrivals",
            "a closed loop has no arrival process: each user sends its next request when "
            "the last one ends (leave out --arrivals)",
        )
    levels = _levels(flags.concurrency if closed else flags.rates, flags.levels_flag, closed)
    step = flags.step or "30s"
    warmup = flags.warmup if flags.warmup is not None else _share(step)
    workload: dict[str, Any] = {}
    if flags.model is not None:
        workload["model"] = flags.model
    if flags.max_tokens is not None:
        workload["max_tokens"] = flags.max_tokens
    if flags.prompt_tokens is not None:
        workload["prompt_tokens"] = flags.prompt_tokens
    if flags.api_key_env is not None:
        workload["auth"] = {"mode": "api-key"}
    if flags.api is not None:
        workload["api"] = flags.api
    mapping: dict[str, Any] = {
        "name": "concurrency" if closed else "ramp",
        "description": f"ramplab run {flags.levels_flag} " + ",".join(f"{v:g}" for v in levels),
    }
    if closed:
        mapping["mode"] = "closed"
    elif flags.arrivals is not None:
        mapping["arrivals"] = flags.arrivals
    mapping["shape"] = {"kind": "stepped", "rates": levels, "hold": step, "warmup": warmup}
    mapping["workload"] = workload
    return mapping


def _levels(text: str | None, flag: str, closed: bool) -> list[Any]:
    items = [item.strip() for item in (text or "").split(",")]
    out: list[Any] = []
    for item in items:
        try:
            out.append(int(item) if closed else _number(item))
        except ValueError:
            what = "whole numbers of users" if closed else "requests per second"
            raise UsageError(flag, f"expected a comma list of {what}, got {text!r}") from None
    return out


def _number(text: str) -> int | float:
    value = float(text)
    return int(value) if value.is_integer() else value


def _share(step: str) -> str:
    try:
        hold_s = parse_duration(step, "--step")
    except UsageError:
        return "0s"  # the schema names --step for what is wrong with it
    return f"{hold_s * WARMUP_SHARE:g}s"


def _api_key(variable: str | None, environ: Mapping[str, str]) -> str | None:
    if variable is None:
        return None
    if not _ENV_NAME.match(variable):
        raise UsageError("--api-key-env", f"expected the name of an environment variable, "
                         f"got {variable!r}")  # fmt: skip
    value = environ.get(variable)
    if not value:
        raise UsageError("--api-key-env", f"environment variable {variable} is not set")
    return value


def _flag_of(field: str, flags: RampFlags) -> str:
    """The flag that set a campaign field the schema refused."""
    if field.endswith(".warmup"):
        return "--warmup"
    if field.startswith("shape.hold") or field.endswith(".hold"):
        return "--step"
    if field.startswith("shape"):
        return flags.levels_flag
    by_field = {"workload.model": "--model", "workload.max_tokens": "--max-tokens",
                "workload.prompt_tokens": "--prompt-tokens", "arrivals": "--arrivals",
                "workload.api": "--api"}  # fmt: skip
    return by_field.get(field, "--api-key-env" if field.startswith("workload.auth") else field)


def _reason(exc: UsageError) -> str:
    return f"{str(exc).removeprefix(f'{exc.field}: ')} (campaign field {exc.field})"


def _yaml(mapping: Mapping[str, Any], flags: RampFlags, command: str, target: str | None) -> str:
    rerun = "ramplab run CAMPAIGN.yaml" + (f" --target {target}" if target else "")
    if flags.api_key_env is not None:
        rerun = f"RAMPLAB_API_KEY=${flags.api_key_env} {rerun}"
    header = f"# Written by: {command}\n# The same run: {rerun}\n"
    return header + yaml.safe_dump(dict(mapping), sort_keys=False, default_flow_style=None)
