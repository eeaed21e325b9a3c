"""A conversation's history: user turns, the server's answers, copies handed out."""

from __future__ import annotations

import random

import pytest

from ramplab.options.settings import UserSettings
from ramplab.options.workload import session_settings
from ramplab.workload.prompts import SyntheticPrompts
from ramplab.workload.session import Conversation, PromptTurns, session_id


def turn(text: str) -> list[dict[str, str]]:
    return [{"role": "user", "content": text}]


def test_each_turn_sends_the_whole_history_plus_the_new_turn() -> None:
    conversation = Conversation("s1", [turn("a"), turn("b"), turn("c")])
    assert conversation.request() == turn("a")
    conversation.answered(" x y")
    second = conversation.request()
    assert second == [*turn("a"), {"role": "assistant", "content": " x y"}, *turn("b")]
    assert conversation.turn == 2
    conversation.answered(" z")
    third = conversation.request()
    assert third[:3] == second
    assert third[3:] == [{"role": "assistant", "content": " z"}, *turn("c")]
    assert conversation.done
    with pytest.raises(IndexError):
        conversation.request()


def test_the_messages_sent_are_copies() -> None:
    user_turns = [turn("a"), turn("b")]
    conversation = Conversation("s1", user_turns)
    sent = conversation.request()
    sent[0]["content"] = "changed"
    conversation.answered("ok")
    assert conversation.request()[0]["content"] == "a"
    assert user_turns[0][0]["content"] == "a"


def test_prompt_turns_draw_one_prompt_per_turn() -> None:
    prompts = SyntheticPrompts(4, 0, random.Random(1))
    turns = PromptTurns(prompts).next_conversation(3)
    assert len(turns) == 3
    assert all(len(t[0]["content"].split()) == 4 for t in turns)


def test_session_ids_are_reproducible_from_the_seed() -> None:
    assert session_id(random.Random(2)) == session_id(random.Random(2))
    assert len(session_id(random.Random(2))) == 32


def test_settings_with_one_turn_mean_no_sessions() -> None:
    assert session_settings(UserSettings()) is None
    sessions = session_settings(
        UserSettings(session_turns=3, session_think_time="uniform:1-2", session_header=None)
    )
    assert sessions is not None
    assert (sessions.turns, sessions.think_time.mean_s, sessions.affinity_header) == (3, 1.5, None)
