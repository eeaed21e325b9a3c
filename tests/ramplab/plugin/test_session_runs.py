"""Multi-turn sessions in a real Locust run against the real target (one run, many checks).

Every session arrives open-loop (2 sessions/s, Poisson) and sends 3 turns 0.2 s of think time
apart, to a target with its prefix cache on. The target answers each turn with the same text
(``seed`` fixed through ``--extra-body``, ``ignore_eos``), so the prompt growth the target
reports can be predicted exactly with the target's own tokenizer.
"""

from __future__ import annotations

import itertools
from collections import defaultdict
from typing import Any

import pytest

from target_service.textgen import generate_tokens
from target_service.tokenizer import ApproxTokenizer
from tests.support.ramp_runs import RampRun, run_ramp
from tests.support.targets import SharedTarget

# One worker for the module: its tests share one run (tests/conftest.py).
pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("session-runs")]

TURNS, THINK_S, USER_TOKENS, ANSWER_TOKENS, SEED = 3, 0.2, 16, 8, 7
ARGS = [
    "--ramplab-shape", "2@6s/1s",
    "--session-turns", str(TURNS),
    "--session-think-time", str(THINK_S),
    "--prompt-tokens", str(USER_TOKENS),
    "--max-tokens", str(ANSWER_TOKENS),
    "--extra-body", f'{{"seed": {SEED}}}',
    "--workload-seed", "3",
]  # fmt: skip


@pytest.fixture(scope="module")
def run(shared_target: SharedTarget, tmp_path_factory: pytest.TempPathFactory) -> RampRun:
    # The prefix cache on (emptied by the reset): a session's history is what it reuses.
    target = shared_target.reset({"prefix_cache": {"enabled": True}})
    done = run_ramp(tmp_path_factory.mktemp("sessions"), target.url, ARGS)
    assert done.returncode == 0, done.tail()
    return done


def sessions_of(run: RampRun) -> dict[str, list[dict[str, Any]]]:
    sessions: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for record in run.records:
        sessions[record["session_id"]].append(record)
    return {sid: sorted(turns, key=lambda r: r["turn"]) for sid, turns in sessions.items()}


def test_every_session_sends_its_turns_in_order_on_one_arrival(run: RampRun) -> None:
    sessions = sessions_of(run)
    assert None not in sessions
    assert len(sessions) >= 6
    for turns in sessions.values():
        assert [r["turn"] for r in turns] == list(range(1, TURNS + 1))
        assert all(r["ok"] for r in turns), turns
        assert len({r["arrival"] for r in turns}) == 1  # the session's one arrival
    arrivals = [turns[0]["arrival"] for turns in sessions.values()]
    assert len(set(arrivals)) == len(arrivals)


def test_prompt_grows_by_exactly_the_answer_and_the_new_user_turn(run: RampRun) -> None:
    tokenizer = ApproxTokenizer()
    answer = "".join(generate_tokens(SEED, ANSWER_TOKENS))  # what the target streams for SEED
    # Synthetic user turns are USER_TOKENS 4-letter words: one token each, as the target counts.
    growth = tokenizer.count(answer) + USER_TOKENS
    for turns in sessions_of(run).values():
        assert turns[0]["prompt_tokens"] == USER_TOKENS
        for before, after in itertools.pairwise(turns):
            assert after["prompt_tokens"] == before["prompt_tokens"] + growth


def test_each_turn_finds_the_previous_turns_prompt_in_the_prefix_cache(run: RampRun) -> None:
    # The target caches a prompt's whole 16-token blocks when its prefill ends; a later turn
    # repeats that prompt first, so exactly those blocks are served from the cache.
    block = 16
    for turns in sessions_of(run).values():
        assert turns[0]["cached_tokens"] == 0
        for before, after in itertools.pairwise(turns):
            assert after["cached_tokens"] == before["prompt_tokens"] // block * block
    by_turn = {t["turn"]: t for t in run.summary["sessions"]["turns"]}
    assert by_turn[3]["cached_tokens"]["min"] == 48


def test_later_turns_are_due_a_think_time_after_the_previous_answer(run: RampRun) -> None:
    for turns in sessions_of(run).values():
        for before, after in itertools.pairwise(turns):
            answered = before["intended_start"] + before["total_ms"] / 1000.0
            gap = after["intended_start"] - answered
            # Due = the answer's end + think; the records' epoch conversions differ by < 1 ms,
            # and the user's own bookkeeping between the two is well under 0.25 s even loaded.
            assert THINK_S - 0.001 <= gap <= THINK_S + 0.25, (before, after)


def test_sessions_per_second_offered_match_achieved(run: RampRun) -> None:
    summary = run.summary
    sessions = summary["sessions"]
    (step,) = summary["steps"]
    assert step["target_qps"] == 2
    assert sessions["offered_sessions_per_s"] == pytest.approx(step["scheduled"] / 5.0)
    # Every scheduled session that a user took started: the rate offered is the rate achieved,
    # short of the arrivals the pacer dropped (none expected: tolerated one in ten).
    assert sessions["sessions"] == step["scheduled"] - step["dropped"]
    assert step["dropped"] <= step["scheduled"] // 10
    by_turn = {t["turn"]: t for t in sessions["turns"]}
    assert sorted(by_turn) == [1, 2, 3]
    assert all(t["ttft_ms"]["count"] == t["ok"] for t in by_turn.values())
    assert by_turn[1]["prompt_tokens"]["max"] == USER_TOKENS
    assert by_turn[3]["prompt_tokens"]["min"] > by_turn[2]["prompt_tokens"]["max"]
