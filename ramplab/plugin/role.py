"""What one Locust process does in a run, read once from its runner.

A local runner is both sides in one process: it sends the requests and coordinates the run.
"""

from __future__ import annotations

from enum import Enum

from locust.runners import MasterRunner, Runner, WorkerRunner


class Role(Enum):
    LOCAL = "local"
    MASTER = "master"
    WORKER = "worker"

    @classmethod
    def of(cls, runner: Runner | None) -> Role:
        """A process without a runner yet (Locust used as a library) counts as local."""
        if isinstance(runner, MasterRunner):
            return cls.MASTER
        if isinstance(runner, WorkerRunner):
            return cls.WORKER
        return cls.LOCAL

    @property
    def sends(self) -> bool:
        """Runs users: sends requests, paces arrivals, serves the load metrics."""
        return self is not Role.MASTER

    @property
    def coordinates(self) -> bool:
        """Owns the run: the plan, the results files, the run gauges, the exit code."""
        return self is not Role.WORKER
