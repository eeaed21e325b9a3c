"""The run plan: everything a worker needs to rebuild the global schedule and find its share."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

from ramplab.load.arrivals.split import Epoch

Mode = Literal["open", "closed"]

PLAN_MESSAGE = "ramplab_plan"
PROGRESS_MESSAGE = "ramplab_progress"


@dataclass(slots=True)
class Plan:
    start_epoch: float  # wall-clock time of the schedule's offset 0
    shape: str
    arrivals: str
    seed: int
    mode: Mode
    overflow: str
    epochs: list[tuple[float, list[str]]] = field(default_factory=list)
    # --ramplab-max-users: the workers start users on demand up to their share of it.
    max_users: int | None = None

    def epoch_objects(self) -> list[Epoch]:
        return [Epoch(start, workers) for start, workers in self.epochs]

    def to_message(self) -> dict[str, Any]:
        return {
            "start_epoch": self.start_epoch,
            "shape": self.shape,
            "arrivals": self.arrivals,
            "seed": self.seed,
            "mode": self.mode,
            "overflow": self.overflow,
            "epochs": [[start, list(workers)] for start, workers in self.epochs],
            "max_users": self.max_users,
        }

    @classmethod
    def from_message(cls, data: dict[str, Any]) -> Plan:
        return cls(
            start_epoch=float(data["start_epoch"]),
            shape=str(data["shape"]),
            arrivals=str(data["arrivals"]),
            seed=int(data["seed"]),
            mode=data["mode"],
            overflow=str(data["overflow"]),
            epochs=[(float(start), [str(w) for w in workers]) for start, workers in data["epochs"]],
            max_users=None if data.get("max_users") is None else int(data["max_users"]),
        )
