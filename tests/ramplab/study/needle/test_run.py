"""The needle campaign, shortened, on the local stack: a full 3 × 3 grid whose TTFT grows with the
context as the target's configured prefill model says, and whose deep needles are cheaper once
the shared haystack is in the target's prefix cache.

One run (~40 s on a loaded machine): the real target (prefill 20 ms + 0.02 ms × P + 1e-7 ms × P²,
prefix cache on), one Locust master and worker, one user in a closed loop for 10 s after a 3 s
warm-up. Tolerances, from what the run measures on top of the model (a run with the machine's
load average at 12: 5–14 ms per cell, request trips plus the target's tokenising of the prompt):

* the depth-0 cells (nothing cached: the needle opens the prompt) have median TTFT between the
  model's prefill − 2 ms and the prefill + 30 ms + 15 %;
* TTFT(24K) − TTFT(1K) at depth 0 is the model's difference (537 ms) within −10 % / +20 %;
* at 24K tokens the deepest needle's median TTFT is under a quarter of the shallowest's (the
  model says 4 %: 21 ms against 558 ms).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from ramplab.study.needle.model import PrefillModel
from tests.support.cli import ramplab

# One worker for the module: its tests share one run (tests/conftest.py).
pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("needle-run")]

MODEL = PrefillModel(overhead_ms=20, per_token_ms=0.02, per_token_sq_ms=1e-7)
LENGTHS = (1000, 8000, 24000)
DEPTHS = (0.0, 0.5, 1.0)
CAMPAIGN = """\
name: needle
mode: closed
steps: [{qps: 1, hold: 10s, warmup: 3s}]
seed: 5
drain_s: 10
workload:
  max_tokens: 4
  ignore_eos: true
  needle: {lengths: [1000, 8000, 24000], depths: [0, 0.5, 1.0], shared_prefix: true}
stack: {workers: 1}
target:
  settings:
    latency: {prefill_overhead_ms: 20, prefill_per_token_ms: 0.02,
              prefill_per_token_sq_ms: 0.0000001, itl_ms: 5, itl_jitter_ms: 0,
              slowdown_per_seq: 0}
    signing: {mode: "off"}
    prefix_cache: {enabled: true}
variants:
  - {name: cache-on}
study: needle
"""


@pytest.fixture(scope="module")
def result(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    tmp = tmp_path_factory.mktemp("needle")
    campaign = tmp / "needle.yaml"
    campaign.write_text(CAMPAIGN)
    done = ramplab(["run", str(campaign), "--results-dir", str(tmp), "--run-name", "exp"])
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-3000:]
    study: dict[str, Any] = json.loads((Path(tmp) / "exp" / "study.json").read_text())
    return study


def test_the_grid_is_full_and_ttft_grows_with_the_context_as_configured(
    result: dict[str, Any],
) -> None:
    variant = result["data"]["variants"]["cache-on"]
    cells = {(c["length"], c["depth"]): c for c in variant["cells"]}
    assert set(cells) == {(n, d) for n in LENGTHS for d in DEPTHS}, result.get("notes")
    assert all(c["count"] >= 1 for c in cells.values())
    for length in LENGTHS:
        prefill = MODEL.prefill_ms(length)
        measured = cells[length, 0.0]["ttft_ms"]
        assert prefill - 2 <= measured <= prefill + 30 + 0.15 * prefill, (length, measured)
    grown = cells[24000, 0.0]["ttft_ms"] - cells[1000, 0.0]["ttft_ms"]
    model = MODEL.prefill_ms(24000) - MODEL.prefill_ms(1000)
    assert 0.9 * model <= grown <= 1.2 * model, (grown, model)


def test_deep_needles_are_cheaper_with_the_shared_prefix_cached(result: dict[str, Any]) -> None:
    effect = {e["length"]: e for e in result["data"]["variants"]["cache-on"]["depth_effect"]}
    longest = effect[24000]
    assert longest["deep_ttft_ms"] < 0.25 * longest["shallow_ttft_ms"], longest
    assert longest["model_change"] < -0.9
    assert len(result["charts"]) == 2  # the TTFT and TTLT heatmaps
    assert any("24,000 tokens" in c for c in result["conclusions"])
