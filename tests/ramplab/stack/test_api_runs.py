"""``ramplab run`` per API against the reference target: the same figures whatever the API.

One target process serves the three runs, with 429s and 503s injected (before prefill, so its
token counters count only the requests that were served). Each run must account for every
request (one record each, ``completed + failed``), count tokens exactly as the target's own
counters did over the run, and have TTFT and ITL where chat has them.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.cli import ramplab, records
from tests.support.processes import TargetProcess
from tests.support.scrape import metric

pytestmark = pytest.mark.slow

MAX_TOKENS = 8
CAMPAIGN = """\
name: api-{api}
shape: {{kind: stepped, rates: [4], hold: 5s, warmup: 0s}}
seed: 3
max_users: 20
drain_s: 10
workload: {{api: {api}, max_tokens: {max_tokens}, ignore_eos: true, chunk_size: 2,
            prompt_tokens: 16}}
stack: {{workers: 1}}
preflight: {{request: false}}  # its request would add to the target's counters
"""
COUNTERS = ("target_prompt_tokens_total", "target_output_tokens_total")


@pytest.fixture(scope="module")
def target() -> Iterator[TargetProcess]:
    env = {
        "APP_LATENCY__ITL_MS": "5",
        "APP_LATENCY__PREFILL_OVERHEAD_MS": "5",
        "APP_FAULTS__RATIO_429": "0.1",
        "APP_FAULTS__RATIO_503": "0.1",
        "APP_FAULTS__RETRY_AFTER_S": "1",
    }
    with TargetProcess(env) as process:
        yield process


def _counters(target: TargetProcess) -> dict[str, float]:
    counts = {name: metric(target.url + "/metrics", name) for name in COUNTERS}
    counts["completed"] = metric(
        target.url + "/metrics", "target_completions_total", outcome="completed"
    )
    return counts


@pytest.mark.parametrize("api", ["chat", "completions", "responses"])
def test_a_run_per_api_counts_every_request_and_every_token(
    tmp_path: Path, target: TargetProcess, api: str
) -> None:
    campaign = tmp_path / f"{api}.yaml"
    campaign.write_text(CAMPAIGN.format(api=api, max_tokens=MAX_TOKENS))
    before = _counters(target)
    done = ramplab(["run", str(campaign), "--target", target.url, "--results-dir", str(tmp_path),
                    "--run-name", api])  # fmt: skip
    after = _counters(target)
    run_dir = tmp_path / api
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    summary = json.loads((run_dir / "summary.json").read_text())
    rows = records(run_dir)
    ok = [r for r in rows if r["ok"]]
    failed = [r for r in rows if not r["ok"]]
    # Every request accounted for: one record each, completed or failed, nothing lost.
    for step in summary["steps"]:
        assert step["dispatched"] == step["completed"] + step["failed"], step
        assert step["scheduled"] == step["dispatched"], step
        assert step["unaccounted"] == step["unfinished"] == 0, step
    assert len(rows) == summary["requests"] == summary["completed"] + summary["failed"]
    assert len(ok) == summary["completed"] > 10
    # The injected faults are recorded as what they are.
    assert failed, "no injected 429/503 in the run"
    assert {(r["error_kind"], r["status"]) for r in failed} <= {
        ("http_status", 429),
        ("http_status", 503),
    }
    # Exact token counts: every answer's usage, and the same totals as the target counted.
    assert {(r["output_tokens"], r["output_tokens_source"]) for r in ok} == {(MAX_TOKENS, "usage")}
    assert sum(r["prompt_tokens"] for r in ok) == after[COUNTERS[0]] - before[COUNTERS[0]]
    assert sum(r["output_tokens"] for r in ok) == after[COUNTERS[1]] - before[COUNTERS[1]]
    assert len(ok) == after["completed"] - before["completed"]
    # TTFT and ITL measured as for chat: each event after the first gives one gap per token.
    for r in ok:
        assert 0 < r["ttft_ms"] <= r["ttlt_ms"] < 5000
        assert r["tokens_per_event"] == [2] * (MAX_TOKENS // 2)
        assert len(r["itl_ms"]) == MAX_TOKENS - 2
        assert all(0 <= gap < 1000 for gap in r["itl_ms"])
        assert r["completion_id"].startswith(
            {"chat": "chatcmpl-", "completions": "cmpl-", "responses": "resp_"}[api]
        )
    assert summary["ttft_ms"]["p50"] > 0, summary["ttft_ms"]
