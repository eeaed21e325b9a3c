"""Campaign files the CLI must refuse: exit 2 naming the file or field, never a traceback.

(Beside tests/ramplab/stack/test_cli_errors.py, which another branch is editing; merge them later.)
"""

from __future__ import annotations

from pathlib import Path

import pytest

from ramplab.stack.campaign import CampaignError, load_campaign
from tests.support.cli import ramplab


def test_a_campaign_that_is_not_utf8_exits_2(tmp_path: Path) -> None:
    # Regression: a Latin-1 or UTF-16 file raised UnicodeDecodeError out of `ramplab validate`.
    path = tmp_path / "latin1.yaml"
    path.write_bytes("name: caf\xe9\nshape: '1@2s'\n".encode("latin-1"))
    for command in ("validate", "run"):
        done = ramplab(
            [command, str(path), *(["--results-dir", str(tmp_path)] * (command == "run"))]
        )
        assert done.returncode == 2, done.stdout + done.stderr
        assert "latin1.yaml: not UTF-8" in done.stderr
        assert "Traceback" not in done.stdout + done.stderr


@pytest.mark.parametrize(
    ("text", "field"),
    [
        ("max_users: true\n", "max_users"),  # was 1 user, silently
        ("workload: {max_tokens: true}\n", "workload.max_tokens"),  # was 1 token
        ("seed: '7'\n", "seed"),
        ("workload: {stream: 'no'}\n", "workload.stream"),
    ],
)
def test_a_value_of_the_wrong_type_is_refused_not_coerced(
    tmp_path: Path, text: str, field: str
) -> None:
    path = tmp_path / "c.yaml"
    path.write_text("shape: '1@2s'\n" + text)
    with pytest.raises(CampaignError) as caught:
        load_campaign(path)
    assert caught.value.field == field


def test_numbers_and_paths_still_read_as_written(tmp_path: Path) -> None:
    path = tmp_path / "c.yaml"
    path.write_text(
        "shape: '1@2s'\nheadroom: 2\nslo: {ttft_ms: 500}\nworkload: {prompts_file: p.jsonl}\n"
    )
    campaign = load_campaign(path)
    assert campaign.headroom == 2.0
    assert campaign.slo == {"ttft_ms": 500.0}
    assert campaign.workload.prompts_file == tmp_path / "p.jsonl"
