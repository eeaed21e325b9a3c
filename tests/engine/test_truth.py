"""ramplab and ``vllm bench serve`` against vLLM's own histograms, one short run each: the run of
``bench/engine_truth.py`` (the benchmark takes turns three times at two rates) in miniature.

Each tool's mean TTFT and E2E from its send can only be above the server's, which starts later
(the request's arrival in the engine) and stops earlier (the iteration that made the token); the
bound above is generous because on this 2-core machine a client reads events late and bunched
while vLLM's processes hold the cores (docs/engines.md: 130-300 ms in the worst streams seen).
TPOT is the client's span over the stream against the server's mean inter-token gap: reading
bunched shortens or lengthens it, but not by more than the gap itself on average.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from bench import engine_truth
from bench.engine import server

pytestmark = [pytest.mark.engine, pytest.mark.xdist_group("engine"), pytest.mark.timeout(600)]

RATE = 2.0
REQUESTS = 10
LATE_MS = 250.0  # the most a client's mean may lag the server's here (see the docstring)


@pytest.mark.parametrize("tool", ["ramplab", "vllm-bench"])
def test_each_tools_means_against_the_servers_own(
    engine: server.Engine, tmp_path: Path, tool: str
) -> None:
    run = engine_truth.measure(engine, tool, RATE, 1, tmp_path, REQUESTS)
    sent = run.client.counts["requests"]
    assert run.client.failed == 0
    assert 4 <= sent <= 20  # vllm bench serve: exactly 10; ramplab: a Poisson draw over 5 s
    assert run.tokens_equal, f"{tool} counted {run.client.counts}, vLLM {run.server.counts}"
    assert run.client.counts["prompt_tokens"] == sent * engine_truth.PROMPT_TOKENS
    assert run.client.counts["generation_tokens"] == sent * engine_truth.OUTPUT_TOKENS
    assert run.server.observations["itl"] == sent * (engine_truth.OUTPUT_TOKENS - 1)
    assert 0.0 < run.diff("ttft") < LATE_MS, run
    assert 0.0 < run.diff("e2e") < LATE_MS, run
    assert abs(run.diff("tpot")) < run.server.means_ms["itl"], run
