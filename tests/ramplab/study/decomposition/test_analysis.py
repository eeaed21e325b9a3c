"""The §4.1 decomposition on hand-made phase rows: known segments must come back exactly, the
residual must be what was left out on purpose, and a server figure that overflows its client
window is cut at the window, never carried into another segment."""

from __future__ import annotations

import numpy as np
import pytest

from ramplab.results.breakdown import Group, group_breakdown
from ramplab.results.digest import PHASE_COLUMNS
from ramplab.study.decomposition.analysis import SEGMENTS, decompose, study_result


def row(ttlt: float, phases: dict[str, float], server: bool = True) -> list[float]:
    values = dict.fromkeys(PHASE_COLUMNS, 0.0)
    values.update(phases, ttlt=ttlt, server_seen=1.0 if server else 0.0)
    return [values[name] for name in PHASE_COLUMNS]


# One request: 20 DNS + 1 connect + 5 TLS + 0.5 send + 13.5 wait + 10 first token + 50 stream
# = 100 ms of client phases; the server: 0.5 admission, 4 queue, 6 prefill, 3 signature.
TYPICAL: dict[str, float] = {
    "dns": 20.0, "connect": 1.0, "tls": 5.0, "send": 0.5, "wait": 13.5, "first_token": 10.0,
    "stream": 50.0, "auth": 0.2, "ratelimit": 0.3, "queue": 4.0, "prefill": 6.0, "decode": 47.0,
    "lock_wait": 1.0, "sign": 2.0,
}  # fmt: skip


def test_known_segments_come_back_and_sum_to_the_ttlt() -> None:
    phases = np.array([row(100.0, TYPICAL)])
    b = group_breakdown(phases, "p99")
    assert b is not None
    d = decompose("v", b)
    expected = {"client": 0.0, "dns": 20.0, "connect": 1.0, "tls": 5.0, "send": 0.5,
                "admission": 0.5, "queue": 4.0, "prefill": 6.0, "trip": 13.0, "streaming": 47.0,
                "signature": 3.0}  # fmt: skip
    assert d.segments == pytest.approx(expected)
    assert list(d.segments) == list(SEGMENTS)
    assert d.residual_ms == pytest.approx(0.0)
    assert d.share("dns") == pytest.approx(0.2)


def test_the_residual_is_what_the_client_phases_leave_unaccounted() -> None:
    phases = np.array([row(102.5, TYPICAL)])  # 2.5 ms no phase explains
    b = group_breakdown(phases, "median")
    assert b is not None
    assert decompose("v", b).residual_ms == pytest.approx(2.5)


def test_a_server_overflow_is_cut_at_its_window_and_reported() -> None:
    # The server says 30 ms of queue, the client saw only 23.5 ms between request and first token.
    phases = np.array([row(100.0, {**TYPICAL, "queue": 30.0})])
    b = group_breakdown(phases, "p99")
    assert b is not None
    d = decompose("v", b)
    before = d.segments["admission"] + d.segments["queue"] + d.segments["prefill"]
    assert before == pytest.approx(23.5)
    assert d.segments["trip"] == pytest.approx(0.0)
    assert d.overflow_ms == pytest.approx(36.5 - 23.5)
    assert d.residual_ms == pytest.approx(0.0)  # the cut never leaks into another segment


def test_without_server_timings_the_client_view_stands_alone() -> None:
    phases = np.array([row(100.0, TYPICAL, server=False)])
    b = group_breakdown(phases, "p99")
    assert b is not None
    d = decompose("v", b)
    assert d.segments["queue"] == 0.0
    assert d.segments["trip"] == pytest.approx(23.5)
    assert d.segments["streaming"] == pytest.approx(50.0)
    assert not d.server_seen


def test_conclusions_cite_the_shares_and_the_biggest_change_against_the_baseline() -> None:
    cached = np.array([row(80.0, {**TYPICAL, "dns": 0.0})] * 50)
    uncached = np.array([row(100.0, TYPICAL)] * 50)
    found = []
    for name, phases in (("cache", cached), ("no-cache", uncached)):
        groups: tuple[Group, ...] = ("median", "p99")
        for group in groups:
            b = group_breakdown(phases, group)
            assert b is not None
            found.append(decompose(name, b))
    result = study_result(found, "cache", [])
    text = "\n".join(result.conclusions)
    assert "no-cache: the slowest 1 % (n=50) take 100.0 ms" in text
    assert "DNS is 20.0 %" in text
    assert "no-cache vs cache: slowest-1 % mean TTLT 80.0 → 100.0 ms (+20.0 ms)" in text
    assert "moved most is DNS, 0.0 → 20.0 ms" in text
    assert "within 0.00 ms" in text
    assert len(result.tables[0].rows) == 4
    assert result.charts
    assert result.data["groups"][0]["residual_ms"] == pytest.approx(0.0)
    assert not result.notes
