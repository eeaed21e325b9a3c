"""``experiment.json``: what an experiment is, the order it runs in, and where each run stands.

Rewritten atomically (a temporary file, then ``os.replace``) before and after every run, so a
reader — ``ramplab report``, ``ramplab compare``, a person during the run — never sees half a file,
and an experiment killed at any moment still says which runs finished. Format::

    {"format": 1, "name": "signing", "campaign": "campaigns/signing.yaml",
     "command": "ramplab run ...", "started": ISO, "finished": ISO | null,
     "status": "running" | "done" | "interrupted" | "failed", "exit_code": int | null,
     "seed": 1, "repeat": 2, "order": "shuffled", "baseline": "mode=locked",
     "fail_if": ["ttft_ms.p99 > 1.1 * baseline"],
     "variants": [{"name": "mode=locked", "slug": "mode-locked",
                   "overrides": {"target.settings.signing.mode": "locked"}}, ...],
     "runs": [{"index": 1, "variant": "mode=locked", "repeat": 1, "seed": 1,
               "dir": "01-mode-locked-r1", "status": "done", "exit_code": 0,
               "started": ISO, "finished": ISO}, ...]}

A run's ``status``: ``pending`` (not started), ``running``, ``done`` (exit 0), ``gate_missed``
(exit 3: finished, a gate of the campaign missed), ``failed`` (exit 2 or 4: its figures cannot be
trusted), ``interrupted`` (exit 130, or the experiment stopped during it), ``skipped`` (never ran:
the experiment was interrupted or stopped before it). Only ``done`` and ``gate_missed`` runs are
compared.
"""

from __future__ import annotations

import json
import os
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal

from ramplab.errors import UsageError
from ramplab.exitcodes import ExitCode
from ramplab.runs.rundir import ExperimentDir

__all__ = [
    "FINISHED",
    "MANIFEST",
    "Manifest",
    "RunEntry",
    "RunStatus",
    "VariantEntry",
    "now",
    "status_of",
]

MANIFEST = ExperimentDir.MANIFEST
FORMAT = 1
RunStatus = Literal["pending", "running", "done", "gate_missed", "failed", "interrupted", "skipped"]
FINISHED: tuple[RunStatus, ...] = ("done", "gate_missed")


def now() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")


def status_of(code: int) -> RunStatus:
    """A run's status from ``execute``'s exit code."""
    if code == ExitCode.OK:
        return "done"
    if code == ExitCode.SLO_MISSED:
        return "gate_missed"
    if code == ExitCode.INTERRUPTED:
        return "interrupted"
    return "failed"


@dataclass(slots=True)
class VariantEntry:
    name: str
    slug: str
    overrides: dict[str, Any]


@dataclass(slots=True)
class RunEntry:
    index: int
    variant: str
    repeat: int
    seed: int
    dir: str
    status: RunStatus = "pending"
    exit_code: int | None = None
    started: str | None = None
    finished: str | None = None


@dataclass(slots=True)
class Manifest:
    name: str
    campaign: str
    seed: int
    repeat: int
    order: str
    baseline: str
    variants: list[VariantEntry]
    runs: list[RunEntry]
    fail_if: list[str] = field(default_factory=list)
    study: str | None = None
    command: str | None = None
    started: str = field(default_factory=now)
    finished: str | None = None
    status: Literal["running", "done", "interrupted", "failed"] = "running"
    exit_code: int | None = None

    def to_json(self) -> dict[str, Any]:
        return {"format": FORMAT, **asdict(self)}

    def write(self, directory: Path) -> None:
        path = directory / MANIFEST
        tmp = path.with_suffix(".json.tmp")
        tmp.write_text(json.dumps(self.to_json(), indent=2) + "\n", encoding="utf-8")
        os.replace(tmp, path)

    @classmethod
    def read(cls, directory: Path) -> Manifest:
        """The manifest of an experiment directory; ``UsageError`` when it is not one."""
        path = directory / MANIFEST
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
            data.pop("format", None)
            data["variants"] = [VariantEntry(**v) for v in data["variants"]]
            data["runs"] = [RunEntry(**r) for r in data["runs"]]
            return cls(**data)
        except OSError as exc:
            raise UsageError(str(directory), f"no {MANIFEST}: {exc.strerror}") from None
        except (ValueError, KeyError, TypeError) as exc:
            raise UsageError(str(path), f"not an experiment manifest ({exc})") from None

    def finished_runs(self) -> list[RunEntry]:
        return [r for r in self.runs if r.status in FINISHED]
