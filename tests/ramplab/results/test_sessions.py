"""The summary's sessions block, from hand-made records through the real producer."""

from __future__ import annotations

from ramplab.load.shapes import parse_shape
from ramplab.measure.record import RequestRecord
from ramplab.report.tables import sessions_line, turns_table
from ramplab.results.producer import RunFacts, summarize
from ramplab.results.sessions import sessions_summary
from ramplab.results.slo import evaluate_gates, parse_gates
from tests.ramplab.results.handmade import T0, failed, rec


def session_records() -> list[RequestRecord]:
    records: list[RequestRecord] = []
    for s in range(4):  # 4 sessions of 3 turns; turn k has TTFT 10·k ms and 20·k prompt tokens
        for turn in (1, 2, 3):
            records.append(
                rec(0, 3 * s + turn - 1, 12, session_id=f"s{s}", turn=turn,
                    ttft_ms=10.0 * turn, prompt_tokens=20 * turn,
                    cached_tokens=16 * (turn - 1) if s < 2 else None)
            )  # fmt: skip
    broken = failed(0, 11, 12, 503)
    broken.session_id, broken.turn = "s3", 3
    records[-1] = broken  # the last session's third turn failed
    return records


def test_ttft_and_prompt_tokens_by_turn() -> None:
    summary = sessions_summary(session_records(), 10.0, scheduled=5)
    assert summary is not None
    assert summary.sessions == 4
    assert summary.offered_sessions_per_s == 0.5
    assert summary.achieved_sessions_per_s == 0.4
    turns = {t.turn: t for t in summary.turns}
    assert [(t.requests, t.ok) for t in summary.turns] == [(4, 4), (4, 4), (4, 3)]
    assert turns[2].ttft_ms.p50 == 20.0
    assert turns[3].ttft_ms.count == 3
    assert turns[3].prompt_tokens.max == 60
    # Sessions s0 and s1 ran against a server that reported its cache; s2 and s3 did not.
    assert (turns[2].cached_tokens.count, turns[2].cached_tokens.p50) == (2, 16.0)
    assert turns[1].cached_tokens.max == 0


def test_no_session_records_no_block() -> None:
    assert sessions_summary([rec(0, 0, 1)], 10.0, scheduled=1) is None
    run = summarize([rec(0, 0, 1)], RunFacts(parse_shape("1@10s"), run_start=T0, mode="open"))
    assert run.sessions is None


def test_the_producer_fills_the_block_over_the_measured_windows() -> None:
    facts = RunFacts(parse_shape("1@10s"), run_start=T0, mode="open", scheduled=[4])
    run = summarize(session_records(), facts)
    assert run.sessions is not None
    assert run.sessions.offered_sessions_per_s == 0.4
    assert run.to_json()["sessions"]["turns"][0]["turn"] == 1


def test_the_reports_table_and_sentence() -> None:
    facts = RunFacts(parse_shape("1@10s"), run_start=T0, mode="open", scheduled=[4])
    run = summarize(session_records(), facts)
    headers, body = turns_table(run)
    assert headers[:3] == ["turn", "requests", "ok"]
    assert body[1][:6] == ["2", "4", "4", "40", "16", "20.0"]
    line = sessions_line(run)
    assert line is not None
    assert "4 started" in line
    assert "0.4/s achieved of 0.4/s offered" in line
    plain = summarize([rec(0, 0, 1)], facts)
    assert turns_table(plain)[1] == []
    assert sessions_line(plain) is None


def test_gates_reach_the_sessions_block() -> None:
    facts = RunFacts(parse_shape("1@10s"), run_start=T0, mode="open", scheduled=[4])
    run = summarize(session_records(), facts)
    gates = parse_gates(
        ["sessions.turns[-1].ttft_ms.p50 <= 30", "sessions.achieved_sessions_per_s >= 0.5"]
    )
    verdicts = evaluate_gates(gates, run.to_json())
    assert [v.status for v in verdicts] == ["pass", "fail"]
    assert verdicts[0].observed == (("sessions.turns[-1].ttft_ms.p50", 30.0),)
