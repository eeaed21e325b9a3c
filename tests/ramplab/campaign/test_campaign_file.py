"""Campaign files the CLI must refuse: exit 2 naming the file or field, never a traceback.

(Beside tests/ramplab/stack/test_cli_errors.py, which another branch is editing; merge them later.)
"""

from __future__ import annotations

from pathlib import Path

import pytest

from ramplab.campaign.schema import load_campaign
from ramplab.errors import CampaignError
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


@pytest.mark.parametrize(
    ("text", "field"),
    [
        ("workload: {api_path: v1/chat}\n", "workload.api_path"),
        ("workload: {connect_timeout_s: 0}\n", "workload.connect_timeout_s"),
        ("workload: {extra_headers: {x-team: 1}}\n", "workload.extra_headers.x-team"),
        ("workload: {extra_body: [1]}\n", "workload.extra_body"),
        ("workload: {dns_cache: 'no'}\n", "workload.dns_cache"),
        ("workload: {auth: {token_path: token}}\n", "workload.auth.token_path"),
        ("workload: {verify_tls: false, tls: {}}\n", "workload.tls"),
        ("mode: half-open\n", "mode"),
        ("overflow: spill\n", "overflow"),
        ("headroom: 0.5\n", "headroom"),
        ("slo: {ttft_ms: -1}\n", "slo.ttft_ms"),
    ],
)
def test_client_fields_are_checked_like_their_options(
    tmp_path: Path, text: str, field: str
) -> None:
    path = tmp_path / "c.yaml"
    path.write_text("shape: '1@2s'\n" + text)
    with pytest.raises(CampaignError) as caught:
        load_campaign(path)
    assert caught.value.field == field


def test_client_fields_reach_the_locust_arguments(tmp_path: Path) -> None:
    (tmp_path / "ca.pem").write_text("x\n")
    path = tmp_path / "c.yaml"
    path.write_text(
        "shape: '1@2s'\n"
        "workload: {dns_cache: false, reuse_connections: false, verify_tls: false,\n"
        "  ca_file: ca.pem, connect_timeout_s: 2.5, api_path: /v2/chat, verify_text: true,\n"
        "  extra_body: {top_p: 0.5}, extra_headers: {x-api-key: k}}\n"
    )
    campaign = load_campaign(path)
    args = campaign.locust_args()
    for flag in ("--no-dns-cache", "--new-connection-per-request", "--insecure", "--verify-text"):
        assert flag in args
    assert args[args.index("--ca-file") + 1] == str(tmp_path / "ca.pem")
    assert args[args.index("--connect-timeout") + 1] == "2.5"
    assert args[args.index("--api-path") + 1] == "/v2/chat"
    assert args[args.index("--extra-body") + 1] == '{"top_p": 0.5}'
    # Headers often carry a credential: they travel like the secrets, by environment.
    assert "--extra-headers" not in args
    assert campaign.locust_env() == {"RAMPLAB_EXTRA_HEADERS": '{"x-api-key": "k"}'}


def test_a_missing_ca_file_exits_2_before_anything_starts(tmp_path: Path) -> None:
    path = tmp_path / "c.yaml"
    path.write_text("shape: '1@2s'\nworkload: {ca_file: nope.pem}\n")
    done = ramplab(["validate", str(path)])
    assert done.returncode == 2, done.stdout + done.stderr
    assert "workload.ca_file" in done.stderr
    assert "Traceback" not in done.stdout + done.stderr
