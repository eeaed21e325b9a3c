"""Multi-turn sessions: one conversation's history, grown turn by turn with the server's answers.

A session is one arrival of the open-loop schedule (the offered rate is sessions per second). Its
user sends turn 1, appends the server's real answer as an ``assistant`` message, waits a think
time, appends the next user turn and sends the whole history again, ``turns`` times. So turn
``k``'s prompt is turn ``k-1``'s prompt plus its answer plus the new user turn: what makes the
server's prompt grow and a prefix cache pay off in production chat.

Where user turns come from is an extension point, ``ConversationSource``: a dataset's real
conversations (the ``workloads`` branch's ShareGPT import can implement it), or ``PromptTurns``,
which draws each turn from any ``PromptSource`` (synthetic or ``--prompts-file``).
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from typing import Protocol

from ramplab.load.think import ThinkTime
from ramplab.workload.prompts import Messages, PromptSource

__all__ = [
    "Conversation",
    "ConversationSource",
    "PromptTurns",
    "SessionSettings",
    "session_id",
]


@dataclass(frozen=True, slots=True)
class SessionSettings:
    """Turns per session, the think time between them, and the affinity header (None: none)."""

    turns: int
    think_time: ThinkTime
    affinity_header: str | None = "x-session-id"


class ConversationSource(Protocol):
    """Gives the user turns of one conversation; each turn is the messages it appends."""

    def next_conversation(self, turns: int) -> list[Messages]:
        """``turns`` user turns (fewer when the conversation is shorter: the session ends)."""
        ...


class PromptTurns:
    """Each turn is the next prompt of a ``PromptSource`` (synthetic or a prompts file)."""

    def __init__(self, prompts: PromptSource) -> None:
        self.prompts = prompts

    def next_conversation(self, turns: int) -> list[Messages]:
        return [self.prompts.next() for _ in range(turns)]


def session_id(rng: random.Random) -> str:
    """A random 128-bit hex id, from the user's seeded generator (reproducible runs)."""
    return f"{rng.getrandbits(128):032x}"


@dataclass(slots=True)
class Conversation:
    """One session's history: ``request()`` adds the next user turn, ``answered()`` the reply."""

    id: str
    user_turns: list[Messages]
    history: Messages = field(default_factory=list)
    turn: int = 0  # turns sent so far; the turn being sent is 1-based ``turn``

    @property
    def done(self) -> bool:
        return self.turn >= len(self.user_turns)

    def request(self) -> Messages:
        """The messages of the next turn: the whole history plus the new user turn (a copy)."""
        if self.done:
            raise IndexError(f"session {self.id} has no turn {self.turn + 1}")
        self.history.extend(dict(message) for message in self.user_turns[self.turn])
        self.turn += 1
        return [dict(message) for message in self.history]

    def answered(self, text: str) -> None:
        """The server's answer to the last turn, appended exactly as it streamed."""
        self.history.append({"role": "assistant", "content": text})
