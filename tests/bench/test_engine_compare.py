"""The comparison of ``bench/engine_truth.py`` without an engine: vLLM's figures over a run from
two real scrapes of its ``/metrics`` (recorded around three streams of 16 tokens, 21 prompt tokens
each), each tool's figures from its own output, and the verdict against the run-to-run noise."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import pytest

from bench.engine_compare import (
    Client,
    Comparison,
    Run,
    Server,
    Spread,
    compare,
    ramplab_client,
    section,
    server_figures,
    vllm_bench_client,
)
from ramplab.results.engine import parse

DATA = Path(__file__).parent / "data"


def _scrape(name: str) -> Any:
    return parse((DATA / f"vllm-metrics-{name}.txt").read_text(), "vllm", 0.0)


def test_the_servers_figures_are_the_increase_between_two_real_scrapes() -> None:
    server = server_figures(_scrape("before"), _scrape("after"))
    assert server.counts == {
        "requests": 3.0, "prompt_tokens": 63.0, "generation_tokens": 48.0, "prefix_hits": 0.0,
    }  # fmt: skip
    # Δcount: one TTFT and one E2E a request, 15 gaps a 16-token stream.
    assert server.observations["ttft"] == 3.0
    assert server.observations["itl"] == 45.0
    assert server.observations["e2e"] == 3.0
    # Δsum ÷ Δcount of the files' own _sum lines, in ms.
    assert server.means_ms["ttft"] == pytest.approx((2.884982109069824 - 2.719099283218384) / 3e-3)
    assert server.means_ms["itl"] == pytest.approx((17.74137884900847 - 16.86155597801553) / 45e-3)
    assert server.means_ms["e2e"] == pytest.approx((20.57137131690979 - 19.517436504364014) / 3e-3)
    assert set(server.means_ms) == {"ttft", "itl", "e2e", "queue", "prefill", "decode"}


def test_a_scrape_against_itself_moves_nothing() -> None:
    after = _scrape("after")
    server = server_figures(after, after)
    assert set(server.counts.values()) == {0.0}
    assert server.means_ms == {}  # no observation, no mean (never a division by zero)


def _record(
    ttft: float, ttlt: float, itl: list[float], per_event: list[int], stamp_error: float = 0.05
) -> dict[str, Any]:
    tokens = sum(per_event)
    return {
        "ok": True, "ttft_send_ms": ttft, "ttlt_send_ms": ttlt,
        "tpot_ms": (ttlt - ttft) / (tokens - 1), "prompt_tokens": 21, "output_tokens": tokens,
        "itl_ms": itl, "tokens_per_event": per_event, "stamp_error_ms": stamp_error,
    }  # fmt: skip


def test_ramplabs_figures_are_the_means_of_its_successful_records() -> None:
    rows = [
        _record(20.0, 50.0, [10.0, 10.0, 10.0], [1, 1, 1, 1]),
        # Two tokens in one event: one gap of 0.4 ms, written as 0.2 twice.
        _record(40.0, 60.0, [19.6, 0.2, 0.2], [1, 1, 2], stamp_error=19.6),
        {"ok": False, "ttft_send_ms": None, "ttlt_send_ms": None, "prompt_tokens": 0,
         "output_tokens": 0, "itl_ms": [], "tokens_per_event": [], "stamp_error_ms": None},
    ]  # fmt: skip
    client = ramplab_client(rows, exit_code=4)
    assert client.means_ms == pytest.approx({"ttft": 30.0, "tpot": 25 / 3, "e2e": 55.0})
    assert client.counts == {"requests": 2.0, "prompt_tokens": 42.0, "generation_tokens": 8.0}
    assert client.failed == 1
    assert client.exit_code == 4
    assert client.bunched == pytest.approx(1 / 5)  # of the gaps 10, 10, 10, 19.6, 0.4
    assert client.flagged == 1  # its own stamp_error_ms says the second stream's may be late


def test_vllm_bench_serves_figures_are_its_own_means_and_totals() -> None:
    result = {
        "completed": 3, "failed": 0, "total_input_tokens": 63, "total_output_tokens": 48,
        "mean_ttft_ms": 60.0, "mean_tpot_ms": 19.0, "mean_e2el_ms": 355.0,
        "itls": [[0.02, 0.0005], [0.019], []],
    }  # fmt: skip
    client = vllm_bench_client(result)
    assert client.means_ms == {"ttft": 60.0, "tpot": 19.0, "e2e": 355.0}
    assert client.counts == {"requests": 3.0, "prompt_tokens": 63.0, "generation_tokens": 48.0}
    assert client.bunched == pytest.approx(1 / 3)
    assert client.flagged is None  # it has no measure of its own stamps' error


def test_client_minus_server_and_the_token_check() -> None:
    server = server_figures(_scrape("before"), _scrape("after"))
    counts = {"requests": 3.0, "prompt_tokens": 63.0, "generation_tokens": 48.0}
    means = {"ttft": 60.0, "tpot": 20.0, "e2e": 360.0}
    run = Run("ramplab", 1.0, 1, Client(means, counts, 0, 0.0), server, (1.0, 1.0))
    assert run.diff("ttft") == pytest.approx(60.0 - server.means_ms["ttft"])
    assert run.diff("tpot") == pytest.approx(20.0 - server.means_ms["itl"])
    assert run.tokens_equal
    short = Client(means, {**counts, "generation_tokens": 47.0}, 0, 0.0)
    assert not Run("ramplab", 1.0, 1, short, server, (1.0, 1.0)).tokens_equal


def _runs(ttft_diffs: dict[str, list[float]], prefills: list[float] | None = None) -> list[Run]:
    runs = []
    prefill = iter(prefills or [])
    for tool, diffs in ttft_diffs.items():
        for repeat, diff in enumerate(diffs, 1):
            server = Server(
                {"requests": 1.0, "prompt_tokens": 1.0, "generation_tokens": 1.0,
                 "prefix_hits": 0.0},
                {"ttft": 10.0, "itl": 5.0, "e2e": 100.0, "prefill": next(prefill, 11.0)}, {},
            )  # fmt: skip
            means = {"ttft": 10.0 + diff, "tpot": 5.0, "e2e": 100.0 + diff}
            client = Client(means, dict.fromkeys(("requests", "prompt_tokens",
                                                  "generation_tokens"), 1.0), 0, 0.1)  # fmt: skip
            runs.append(Run(tool, 2.0, repeat, client, server, (3.0, 3.5)))
    return runs


def test_a_difference_within_twice_its_standard_error_is_within_noise() -> None:
    [ttft, tpot, _e2e] = compare(_runs({"ramplab": [2.0, 3.0, 4.0], "vllm-bench": [3.0, 4.0, 5.0]}))
    assert (ttft.metric, ttft.rate) == ("ttft", 2.0)
    assert ttft.delta == pytest.approx(-1.0)
    assert ttft.standard_error == pytest.approx(math.sqrt(1 / 3 + 1 / 3))
    assert ttft.within_noise
    assert tpot.delta == 0.0
    assert tpot.within_noise


def test_a_steady_difference_is_beyond_the_noise() -> None:
    comparison = Comparison(
        2.0, "e2e", {"ramplab": Spread((2.0, 2.1, 1.9)), "vllm-bench": Spread((5.0, 5.1, 4.9))}
    )
    assert comparison.delta == pytest.approx(-3.0)
    assert not comparison.within_noise


def test_the_section_has_a_row_per_run_and_says_where_the_tools_differ() -> None:
    runs = _runs({"ramplab": [2.0, 2.1, 1.9], "vllm-bench": [5.0, 5.1, 4.9]})
    text = section(runs, "context")
    assert text.count("\n| ramplab | 2 |") == 3
    assert text.count("\n| vllm-bench | 2 |") == 3
    row = "| 2 | TTFT ms | +2.0 (0.1, +1.9–+2.1, 3 runs) | +5.0 (0.1, +4.9–+5.1, 3 runs) | -3.0 |"
    assert row in text
    assert "differ beyond the run-to-run noise on TTFT at 2/s (-3.0 ms), E2E at 2/s" in text
    assert "ramplab: 3 of 3 runs equal to the counters" in text


def test_a_run_on_a_stalled_engine_is_shown_but_left_out_of_the_summary() -> None:
    # The second ramplab run met an engine whose prefill took 600 ms instead of ~11: by the
    # server's own figure, whatever either client measured.
    runs = _runs(
        {"ramplab": [2.0, 400.0, 2.2, 1.8], "vllm-bench": [5.0, 5.1, 4.9]},
        prefills=[11.0, 600.0, 12.0, 10.0, 11.0, 11.5, 10.5],
    )
    [ttft, _tpot, _e2e] = compare(runs)
    assert ttft.spreads["ramplab"].values == pytest.approx((2.0, 2.2, 1.8))
    assert ttft.within_noise is False
    text = section(runs, "context")
    assert text.count("| ramplab (stalled) | 2 | 2 |") == 1
    assert "(1 of 7 runs here); left out of this summary" in text


def test_one_run_of_a_tool_cannot_tell_noise() -> None:
    comparison = Comparison(
        1.0, "ttft", {"ramplab": Spread((2.0,)), "vllm-bench": Spread((5.0, 5.1, 4.9))}
    )
    assert comparison.within_noise is None
