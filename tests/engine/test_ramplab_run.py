"""ramplab's open loop against vLLM: every request it sent is a record, and its token counts are
the server's own counters, to the token.

The run is ``ramplab run --target`` as a user types it, with ``--no-preflight`` so that every
request the server counts is one of the ramp's; the counters are read here before and after it,
and by the run itself (its scrape of ``/metrics`` into ``summary.json``'s ``engine``).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bench.engine import server
from tests.support.cli import ramplab
from tests.support.records import run_records
from tests.support.scrape import metric

pytestmark = [pytest.mark.engine, pytest.mark.xdist_group("engine"), pytest.mark.timeout(900)]

CAMPAIGN = """\
name: engine-open-loop
shape: {kind: stepped, rates: [2], hold: 10s, warmup: 1s}
arrivals: constant
seed: 3
max_users: 20
drain_s: 60
workload: {model: MODEL, max_tokens: 16, ignore_eos: true, prompt_tokens: 32}
stack: {workers: 1}
"""


def _counters(url: str) -> dict[str, float]:
    page = f"{url}/metrics"
    return {
        "prompt": metric(page, "vllm:prompt_tokens_total"),
        "output": metric(page, "vllm:generation_tokens_total"),
        "requests": metric(page, "vllm:request_success_total"),
    }


def test_open_loop_token_counts_equal_the_servers_counters(
    engine: server.Engine, tmp_path: Path
) -> None:
    campaign = tmp_path / "campaign.yaml"
    campaign.write_text(CAMPAIGN.replace("MODEL", engine.model.name))
    before = _counters(engine.url)
    done = ramplab(
        ["run", str(campaign), "--target", engine.url, "--no-preflight",
         "--results-dir", str(tmp_path), "--run-name", "engine"],
        timeout=400,
    )  # fmt: skip
    after = _counters(engine.url)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    records = run_records(tmp_path / "engine")
    assert 20 <= len(records) <= 23  # 2/s for 11 s
    summary = json.loads((tmp_path / "engine" / "summary.json").read_text())
    assert summary["incomplete"] == []
    assert summary["dropped"] == 0
    assert [(step["lost"], step["unaccounted"]) for step in summary["steps"]] == [(0, 0)]
    assert [r["error_kind"] for r in records if r["error_kind"]] == []
    assert {r["output_tokens"] for r in records} == {16}
    assert {r["output_tokens_source"] for r in records} == {"usage"}
    moved = {name: after[name] - before[name] for name in after}
    counted = {
        "prompt": sum(r["prompt_tokens"] for r in records),
        "output": sum(r["output_tokens"] for r in records),
        "requests": len(records),
    }
    assert moved == counted, f"the server's counters moved by {moved}, ramplab counted {counted}"
    # The run's own scrape of /metrics (engine_metrics: auto) read vLLM's names and saw the same.
    scraped = summary["engine"]
    assert scraped["engine"] == "vllm"
    names = {"prompt": "prompt_tokens", "output": "generation_tokens", "requests": "requests"}
    assert {names[key]: scraped[names[key]] for key in counted} == scraped["client"]
    assert scraped["client"] == {names[key]: value for key, value in counted.items()}


@pytest.mark.parametrize("api", ["completions", "responses"])
def test_each_api_against_vllms_own_implementation(
    engine: server.Engine, tmp_path: Path, api: str
) -> None:
    """``--api completions`` and ``--api responses`` read vLLM's own streams: every request
    succeeds, its tokens come from the server's usage, and they add up to its counters."""
    campaign = tmp_path / "campaign.yaml"
    text = CAMPAIGN.replace("MODEL", engine.model.name).replace("hold: 10s", "hold: 4s")
    campaign.write_text(text.replace("workload: {", f"workload: {{api: {api}, "))
    before = _counters(engine.url)
    done = ramplab(
        ["run", str(campaign), "--target", engine.url, "--no-preflight",
         "--results-dir", str(tmp_path), "--run-name", api],
        timeout=400,
    )  # fmt: skip
    after = _counters(engine.url)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    records = run_records(tmp_path / api)
    assert 8 <= len(records) <= 11  # 2/s for 5 s
    assert [r["error_kind"] for r in records if r["error_kind"]] == []
    assert {r["output_tokens_source"] for r in records} == {"usage"}
    assert all(r["ttft_ms"] is not None and r["ttft_ms"] > 0 for r in records)
    assert all(1 <= r["output_tokens"] <= 16 for r in records)
    moved = {name: after[name] - before[name] for name in after}
    counted = {
        "prompt": sum(r["prompt_tokens"] for r in records),
        "output": sum(r["output_tokens"] for r in records),
        "requests": len(records),
    }
    assert moved == counted, f"the server's counters moved by {moved}, ramplab counted {counted}"
