"""One short real run for the report tests, produced once per session (per xdist worker)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.cli import ramplab

# Two steps against the reference target with injected 429s (Retry-After) that the client
# retries, so every chart — errors and retries included — has measured data to show.
REPORT_RUN = """\
name: report-check
shape: {kind: stepped, rates: [4, 8], hold: 4s, warmup: 1s}
arrivals: poisson
seed: 5
max_users: 40
drain_s: 10
slo: {ttft_ms: 500}
retry: {policy: retry_after, retry_after_cap_s: 0.2, max_attempts: 3, retry_on: [429, 503]}
workload: {max_tokens: 8, ignore_eos: true, chunk_size: 2, prompt_tokens: 16}
stack: {workers: 1}
target:
  settings:
    latency: {itl_ms: 5, prefill_overhead_ms: 5}
    faults: {ratio_429: 0.15, retry_after_s: 1}
"""


@pytest.fixture(scope="session")
def report_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A finished ``ramplab run`` directory (real target, master and worker)."""
    root = tmp_path_factory.mktemp("report-run")
    campaign = root / "report-check.yaml"
    campaign.write_text(REPORT_RUN, encoding="utf-8")
    done = ramplab(["run", str(campaign), "--results-dir", str(root), "--run-name", "run"],
                   timeout=180)  # fmt: skip
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    return root / "run"
