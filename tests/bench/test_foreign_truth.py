"""ramplab's TTFT and ITL against the ground truth, on a server nobody here wrote.

GuideLLM's mock server (installed once into a cached venv of its own: ``bench/peer_env.py``;
the first run downloads ~370 MB and took 4 min 50 s here) streams with a fixed TTFT and ITL;
the reference client (``bench/rawclient.py``: the kernel's stamps of the request leaving and of
every byte arriving) and ramplab's ``RequestChain`` send together each round. Bounds: |Δ p50|
≤ 1 ms for TTFT and ≤ 0.2 ms for ITL, the issue's goals. Measured on this 2-core machine at a
load average of ~11 (other engineers' jobs): 5 passes in 5 runs; the 100-stream benchmark run
gave Δ TTFT p50 +0.90 ms and Δ ITL p50 +0.013 ms (docs/benchmarks.md, ``foreign_truth``), so
the TTFT bound has little margin on a machine that loaded: re-run once before concluding.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from bench import foreign_truth
from bench.peer_env import GUIDELLM, ensure

pytestmark = [pytest.mark.timing, pytest.mark.timeout(900)]


@pytest.fixture(scope="session")
def mock_port(tmp_path_factory: pytest.TempPathFactory) -> Iterator[int]:
    log = tmp_path_factory.mktemp("guidellm") / "guidellm.log"
    ensure(GUIDELLM, log)  # cached after the first session
    with foreign_truth.mock_server(20.0, 5.0, 16, log) as port:
        yield port


def test_ttft_and_itl_percentiles_agree_with_the_raw_socket(mock_port: int) -> None:
    result = foreign_truth.compare(mock_port, requests=40, tokens=16)
    assert result.reference.errors == 0
    assert result.ramplab.errors == 0
    assert len(result.ramplab.ttft_ms) == len(result.reference.ttft_ms) == 40
    assert len(result.ramplab.itl_ms) == len(result.reference.itl_ms) == 40 * 15
    report = (
        f"TTFT p50 ref {result.reference.p('ttft_ms', 50):.3f} ramplab "
        f"{result.ramplab.p('ttft_ms', 50):.3f}; ITL p50 ref {result.reference.p('itl_ms', 50):.3f}"
        f" ramplab {result.ramplab.p('itl_ms', 50):.3f}"
    )
    assert abs(result.diff("ttft_ms", 50)) <= foreign_truth.TOLERANCE_TTFT_P50_MS, report
    assert abs(result.diff("itl_ms", 50)) <= foreign_truth.TOLERANCE_ITL_P50_MS, report
