"""``python -m bench.engine study [PART ...]``: the study's sections on a real engine.

Each part starts its own vLLMs (``server.serving``: a free port, stopped at the end, nothing
left), fills this machine's model name and tokenizer directory into the campaigns of
``campaigns/engine/`` (a copy in the output directory: the shipped files hold no paths), runs
``ramplab`` as a user types it, and writes what it measured (``findings.py``) to
``OUT/PART.md`` and ``OUT/PART.json``.

Measured runs hold an exclusive ``flock`` on ``MEASURE_LOCK`` for the length of one campaign,
and only that: other engineers' engine runs on this 2-core machine take turns with ours between
campaigns instead of inflating each other's latencies. vLLM's start-up runs outside the lock
(it measures nothing). The load average is read before and after each campaign and reported
beside its figures.

Parts, servers and campaigns (``PARTS``):

- ``needle``: ``needle.yaml``, both variants against a vLLM with its prefix cache on, then the
  ``shared`` variant against one with ``--no-enable-prefix-caching``;
- ``prefix``: ``prefix.yaml`` against a vLLM with its prefix cache on;
- ``decay``: ``decay.yaml`` against ``--max-num-seqs`` 2, then 8;
- ``search``: ``ramplab search search.yaml`` against ``--max-num-seqs`` 8.

Every server sends ``usage.prompt_tokens_details.cached_tokens``
(``--enable-prompt-tokens-details``) and every run skips ramplab's preflight request, so vLLM's
counters move by exactly the runs' requests.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from bench.engine import findings, model, server

REPO = Path(__file__).resolve().parents[2]
CAMPAIGNS = REPO / "campaigns" / "engine"
MEASURE_LOCK = Path("/tmp/ramplab-engine-measure.lock")
RUN_TIMEOUT_S = 1200.0
DETAILS = "--enable-prompt-tokens-details"


@dataclass(frozen=True)
class Campaign:
    """One ramplab command against one server: ``run`` or ``search`` of a campaign file."""

    label: str  # the run directory's name under the part's output directory
    file: str  # under campaigns/engine/
    command: str = "run"
    variants: tuple[str, ...] = ()  # keep only these variants (all when empty)


@dataclass(frozen=True)
class Server:
    label: str
    settings: server.Settings
    campaigns: tuple[Campaign, ...]


@dataclass(frozen=True)
class Part:
    name: str
    servers: tuple[Server, ...]


def _settings(max_num_seqs: int = 8, *extra: str) -> server.Settings:
    return server.Settings(max_num_seqs=max_num_seqs, extra=(DETAILS, *extra))


PARTS = {
    "needle": Part("needle", (
        Server("cache-on", _settings(), (Campaign("cache-on", "needle.yaml"),)),
        Server("cache-off", _settings(8, "--no-enable-prefix-caching"),
               (Campaign("cache-off", "needle.yaml", variants=("shared",)),)),
    )),
    "prefix": Part("prefix", (
        Server("cache-on", _settings(), (Campaign("prefix", "prefix.yaml"),)),
    )),
    "decay": Part("decay", (
        Server("seqs-2", _settings(2), (Campaign("seqs-2", "decay.yaml"),)),
        Server("seqs-8", _settings(8), (Campaign("seqs-8", "decay.yaml"),)),
    )),
    "search": Part("search", (
        Server("seqs-8", _settings(8), (Campaign("search", "search.yaml", "search"),)),
    )),
}  # fmt: skip


@dataclass
class Measured:
    """What one campaign's command did, for the part's findings."""

    label: str
    server: str
    arguments: list[str]
    directory: Path
    exit_code: int
    seconds: float
    load_before: tuple[float, float, float]
    load_after: tuple[float, float, float]
    started_utc: str
    server_ready_s: float
    settings: list[str] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return {
            "label": self.label,
            "server": self.server,
            "command": " ".join(["ramplab", *self.arguments]),
            "directory": str(self.directory),
            "exit_code": self.exit_code,
            "seconds": round(self.seconds, 1),
            "load_before": self.load_before,
            "load_after": self.load_after,
            "started_utc": self.started_utc,
            "server_ready_s": round(self.server_ready_s, 1),
            "server_arguments": self.settings,
        }


def fill(source: Path, target: Path, made: model.Model, variants: Sequence[str] = ()) -> Path:
    """``source`` with this machine's model name and tokenizer directory, written to ``target``;
    with ``variants``, only those of the campaign's variants."""
    campaign: dict[str, Any] = yaml.safe_load(source.read_text(encoding="utf-8"))
    workload = campaign.setdefault("workload", {})
    workload["model"] = made.name
    workload["tokenizer"] = str(made.path)
    if variants:
        kept = [v for v in campaign.get("variants", []) if v.get("name") in variants]
        missing = set(variants) - {v["name"] for v in kept}
        if missing:
            raise ValueError(f"{source}: no variant named {sorted(missing)}")
        campaign["variants"] = kept
        if campaign.get("baseline") not in variants:
            campaign.pop("baseline", None)
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(yaml.safe_dump(campaign, sort_keys=False), encoding="utf-8")
    return target


@contextlib.contextmanager
def measuring(lock: Path = MEASURE_LOCK) -> Iterator[None]:
    """The machine's measurement turn: an exclusive flock, waited for, held for one campaign."""
    with lock.open("a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def _load() -> tuple[float, float, float]:
    return os.getloadavg()


def _ramplab(arguments: list[str], log: Path) -> int:
    environment = dict(os.environ, PYTHONPATH=str(REPO))
    with log.open("w") as out:
        done = subprocess.run(
            [sys.executable, "-m", "ramplab", *arguments],
            stdout=out,
            stderr=subprocess.STDOUT,
            cwd=REPO,
            env=environment,
            timeout=RUN_TIMEOUT_S,
            check=False,
        )
    return done.returncode


def run_part(part: Part, out: Path, made: model.Model) -> list[Measured]:
    directory = out / part.name
    directory.mkdir(parents=True, exist_ok=True)
    measured: list[Measured] = []
    for spec in part.servers:
        log = directory / f"vllm-{spec.label}.log"
        with server.serving(made, spec.settings, log=log) as engine:
            for campaign in spec.campaigns:
                filled = fill(
                    CAMPAIGNS / campaign.file,
                    directory / f"{campaign.label}.yaml",
                    made,
                    campaign.variants,
                )
                arguments = [campaign.command, str(filled), "--target", engine.url]
                if campaign.command == "run":
                    arguments.append("--no-preflight")
                arguments += ["--results-dir", str(directory), "--run-name", campaign.label]
                print(f"study {part.name}: ramplab {' '.join(arguments)}", flush=True)
                with measuring():
                    before, started = _load(), time.monotonic()
                    stamp = time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime())
                    code = _ramplab(arguments, directory / f"{campaign.label}.log")
                    seconds, after = time.monotonic() - started, _load()
                print(f"study {part.name}: exit {code} after {seconds:.0f} s", flush=True)
                measured.append(
                    Measured(
                        campaign.label, spec.label, arguments, directory / campaign.label,
                        code, seconds, before, after, stamp, engine.ready_s,
                        spec.settings.arguments(),
                    )
                )  # fmt: skip
    return measured


def write_findings(part: str, directory: Path, runs: list[dict[str, Any]]) -> str:
    """The part's findings as Markdown, also saved as ``PART.md`` and ``PART.json``."""
    data, text = findings.PARTS[part](runs)
    (directory / f"{part}.json").write_text(json.dumps({"runs": runs, **data}, indent=1) + "\n")
    (directory / f"{part}.md").write_text(text)
    return text


def main(names: Sequence[str], out: Path) -> int:
    unknown = [name for name in names if name not in PARTS]
    if unknown:
        print(f"study: unknown part(s) {unknown}; known: {list(PARTS)}", file=sys.stderr)
        return 2
    made = model.ensure(seed=0)
    failed = 0
    for name in names or list(PARTS):
        measured = run_part(PARTS[name], out, made)
        failed += sum(1 for m in measured if m.exit_code not in (0, 3, 4))
        runs = [m.to_json() for m in measured]
        print(write_findings(name, out / name, runs), flush=True)
    return 1 if failed else 0


def refind(names: Sequence[str], out: Path) -> int:
    """The findings again from a saved study's ``PART.json`` (its runs), nothing run."""
    for name in names or list(PARTS):
        saved = out / name / f"{name}.json"
        if not saved.exists():
            print(f"study: {saved} does not exist (run the part first)", file=sys.stderr)
            return 2
        runs = json.loads(saved.read_text())["runs"]
        print(write_findings(name, out / name, runs), flush=True)
    return 0
