"""What a campaign needs before any process starts, checked by ``validate`` and ``run``.

Parsing a campaign (``ramplab.campaign.schema``) checks each field's form; the checks here look at
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
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from ramplab.campaign.schema import Campaign
from ramplab.errors import CampaignError, UsageError
from ramplab.results.producer import EngineCounts, RunFacts, summarize
from ramplab.results.slo import Gate, evaluate_gates, parse_gates
from ramplab.workload.token_words import token_words
from ramplab.workload.tokenizers import load_tokenizer

__all__ = ["check_campaign", "check_gates", "summary_template", "target_check", "target_env"]

REPO = Path(__file__).resolve().parents[2]
_TARGET_CHECK_TIMEOUT_S = 60.0


def summary_template(campaign: Campaign) -> dict[str, Any]:
    """A ``summary.json`` of this campaign with no data: every key a gate can name. The producer
    itself on no records, so it has exactly the keys of the real summary."""
    shape = campaign.load_shape
    zeros = [0] * len(shape.stages)
    facts = RunFacts(
        shape=shape,
        mode=campaign.mode,
        scheduled=zeros if campaign.mode == "open" else None,
        counts=EngineCounts(zeros, zeros),
    )
    return summarize([], facts).to_json()


def check_gates(campaign: Campaign, gates: Sequence[Gate], field: str) -> None:
    """A gate naming no metric of the summary (a typo, a step past the last) is refused now
    rather than reported ``invalid`` after the whole run."""
    template = summary_template(campaign)
    for index, verdict in enumerate(evaluate_gates(gates, template)):
        if verdict.status == "invalid":
            raise UsageError(f"{field}[{index}]", f"{verdict.gate!r}: {verdict.detail}")


def _check_dataset(campaign: Campaign) -> None:
    """Every record of the dataset, read as the workers will read it: a bad line is refused now,
    naming ``FILE:LINE``, not by each Locust process after the stack started."""
    from ramplab.workload.dataset import Dataset, parse_range
    from ramplab.workload.tokenizers import load_tokenizer

    w = campaign.workload
    if w.dataset is None:
        return
    Dataset.load(
        w.dataset,
        load_tokenizer(w.dataset_tokenizer, "workload.dataset_tokenizer"),
        w.dataset_format,  # type: ignore[arg-type]
        parse_range(w.dataset_prompt_tokens, "workload.dataset_prompt_tokens"),
        parse_range(w.dataset_output_tokens, "workload.dataset_output_tokens"),
        w.dataset_sample,
        w.dataset_seed,
        field="workload.dataset",
    )


def check_campaign(campaign: Campaign, environ: Mapping[str, str] | None = None) -> list[Gate]:
    """The prompts and CA files, the auth credentials and the gates; ``CampaignError`` names
    the field. Returns the campaign's gates, parsed."""
    env = os.environ if environ is None else environ
    campaign.load_shape  # noqa: B018 - a search-only campaign has none: refused, naming shape
    for name in ("prompts_file", "ca_file", "dataset"):
        path = getattr(campaign.workload, name)
        if path is None:
            continue
        try:
            with path.open("rb"):
                pass
        except OSError as exc:
            raise CampaignError(f"workload.{name}", f"{str(path)!r}: {exc.strerror}") from None
    # Loaded here (cl100k_base: a fraction of a second) so that a bad name — or a tokenizer with
    # too few words to write prompts in its tokens — exits 2 before any process starts, rather
    # than failing every Locust worker.
    token_words(load_tokenizer(campaign.workload.tokenizer, "workload.tokenizer"))
    _check_dataset(campaign)
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
        gates = parse_gates(campaign.gates, field="gates")
        check_gates(campaign, gates, "gates")
    except UsageError as exc:
        raise CampaignError(exc.field, str(exc).removeprefix(f"{exc.field}: ")) from None
    return gates


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
