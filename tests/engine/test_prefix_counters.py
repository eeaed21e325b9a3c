"""ramplab's per-request ``cached_tokens`` against vLLM's own prefix-cache counters: a miniature
of the study's shared-prefix part (docs/study.md#shared-prefixes-on-a-real-engine-vllm).

Two 256-token system prefixes, four requests each, sized in the model's own tokens: the first
use of each prefix misses, the three after it find its two 128-token blocks cached (vLLM's block
on this CPU build), and the tokens ramplab read from each answer's usage add up to exactly what
``vllm:prefix_cache_hits_total`` and ``queries_total`` moved by over the run.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bench.engine import server
from bench.engine.findings import expected_hit
from tests.support.cli import ramplab
from tests.support.records import run_records
from tests.support.scrape import metric

pytestmark = [pytest.mark.engine, pytest.mark.xdist_group("engine"), pytest.mark.timeout(600)]

CAMPAIGN = """\
name: engine-prefix-counters
shape: {kind: stepped, rates: [2], hold: 6s, warmup: 1s}
arrivals: constant
seed: 5
max_users: 20
drain_s: 60
workload:
  model: MODEL
  tokenizer: TOKENIZER
  max_tokens: 4
  ignore_eos: true
  prompt_tokens: 32
  shared_prefix: {prefixes: 2, prefix_tokens: 256, requests_per_prefix: 4}
stack: {workers: 1}
"""


def _counters(url: str) -> tuple[float, float]:
    page = f"{url}/metrics"
    return (
        metric(page, "vllm:prefix_cache_hits_total"),
        metric(page, "vllm:prefix_cache_queries_total"),
    )


def test_cached_tokens_add_up_to_vllms_prefix_cache_hits(
    engine: server.Engine, tmp_path: Path
) -> None:
    campaign = tmp_path / "campaign.yaml"
    text = CAMPAIGN.replace("MODEL", engine.model.name)
    campaign.write_text(text.replace("TOKENIZER", str(engine.model.path)))
    hits_before, queries_before = _counters(engine.url)
    done = ramplab(
        ["run", str(campaign), "--target", engine.url, "--no-preflight",
         "--results-dir", str(tmp_path), "--run-name", "prefix"],
        timeout=400,
    )  # fmt: skip
    hits_after, queries_after = _counters(engine.url)
    assert done.returncode in (0, 4), done.stdout[-3000:] + done.stderr[-3000:]  # 4: stamps
    records = run_records(tmp_path / "prefix")
    assert 12 <= len(records) <= 15  # 2/s for 7 s
    assert [r["error_kind"] for r in records if r["error_kind"]] == []
    cached = {r["arrival"]: r["cached_tokens"] for r in records}
    assert cached == {i: 256 if expected_hit(i, 2, 4) else 0 for i in cached}
    assert sum(cached.values()) == hits_after - hits_before
    assert sum(r["prompt_tokens"] for r in records) == queries_after - queries_before
    # The run's own scrape of /metrics says the same over the run.
    scraped = json.loads((tmp_path / "prefix" / "summary.json").read_text())["engine"]
    assert scraped["prefix_hits"] == sum(cached.values())
    assert scraped["prefix_queries"] == sum(r["prompt_tokens"] for r in records)
