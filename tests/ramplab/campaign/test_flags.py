"""A campaign from flags (``ramplab.campaign.flags``) is the campaign its YAML describes."""

from __future__ import annotations

from pathlib import Path

import pytest

from ramplab.campaign.flags import RampFlags, campaign_from_flags
from ramplab.campaign.schema import Campaign, load_campaign
from ramplab.errors import UsageError


def reloaded(text: str, tmp_path: Path) -> Campaign:
    path = tmp_path / "printed.yaml"
    path.write_text(text)
    return load_campaign(path)


@pytest.mark.parametrize(
    "flags",
    [
        RampFlags(rates="1,2,5,10"),
        RampFlags(rates="0.5,3", step="1m", warmup="0s", arrivals="gamma:2", model="m",
                  max_tokens=7, prompt_tokens=900),
        RampFlags(concurrency="1,4,16", step="10s", max_tokens=32),
    ],
)  # fmt: skip
def test_the_yaml_describes_the_same_campaign(flags: RampFlags, tmp_path: Path) -> None:
    built = campaign_from_flags(flags, {}, "ramplab run …", "http://127.0.0.1:8000")
    assert reloaded(built.text, tmp_path) == built.campaign
    assert "# The same run: ramplab run CAMPAIGN.yaml --target http://127.0.0.1:8000" in built.text


def test_the_key_is_in_the_campaign_and_not_in_its_yaml(tmp_path: Path) -> None:
    flags = RampFlags(rates="1", api_key_env="KEY_VAR")
    built = campaign_from_flags(flags, {"KEY_VAR": "sk-secret"}, "ramplab run …", None)
    assert built.campaign.workload.auth.api_key == "sk-secret"
    assert built.campaign.locust_env()["RAMPLAB_API_KEY"] == "sk-secret"
    assert "sk-secret" not in built.text
    again = reloaded(built.text, tmp_path)
    assert again.workload.auth.mode == "api-key"
    keyless = built.campaign.workload.auth.model_copy(update={"api_key": None})
    assert again.workload.auth == keyless


def test_the_default_warmup_is_a_fifth_of_the_step() -> None:
    built = campaign_from_flags(RampFlags(rates="1,2", step="45s"), {}, "ramplab run …", None)
    assert [(s.duration_s, s.warmup_s) for s in built.campaign.load_shape.stages] == [(45, 9)] * 2


def test_an_empty_key_variable_is_refused() -> None:
    with pytest.raises(UsageError, match="--api-key-env: environment variable K is not set"):
        campaign_from_flags(RampFlags(rates="1", api_key_env="K"), {"K": ""}, "ramplab", None)
