"""``make bench``: run every benchmark and write ``docs/benchmarks.md``.

``python -m bench [name ...]`` runs only the named ones (module names under ``bench/``), and
replaces only their sections in the file.
"""

from __future__ import annotations

import importlib
import os
import platform
import re
import sys
import time
from pathlib import Path

BENCHMARKS = [
    "target_stream",
    "target_signing",
    "stream_accuracy",
    "rate_precision",
    "exporter_overhead",
    "progress_poll",
    "schedule_memory",
    "token_words",
    "prefix_cache",
    "tracing_overhead",
    "foreign_truth",
    "wire_accuracy",
    "records_scale",
    "peers",
    "engine_startup",
    "engine_truth",
    "generator_load",
    "soak",
    "fuzz",
]
OUTPUT = Path(__file__).resolve().parents[1] / "docs" / "benchmarks.md"
HEADER = """# Benchmarks

Produced by `make bench` (`python -m bench`); every figure below is measured in the run that wrote
it, as a ratio against a baseline measured in the same run on the same machine. Timing on shared
machines is noisy: read the ratios, not the absolute numbers.
"""


def _machine() -> str:
    cpu = "unknown CPU"
    cpuinfo = Path("/proc/cpuinfo")
    if cpuinfo.exists():
        match = re.search(r"model name\s*:\s*(.+)", cpuinfo.read_text())
        if match:
            cpu = match.group(1).strip()
    return f"{os.cpu_count()} cores ({cpu}), Python {platform.python_version()}"


def main(names: list[str]) -> None:
    selected = names or BENCHMARKS
    unknown = [name for name in selected if name not in BENCHMARKS]
    if unknown:
        print(f"bench: unknown benchmark(s) {unknown}; known: {BENCHMARKS}", file=sys.stderr)
        raise SystemExit(2)
    sections: dict[str, str] = {}
    for name in selected:
        print(f"bench: running {name} ...", flush=True)
        module = importlib.import_module(f"bench.{name}")
        started = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
        body = module.run()
        sections[name] = (
            f"{body}\nCommand: `python -m bench {name}` — run {started} on {_machine()}.\n\n"
        )
    OUTPUT.parent.mkdir(exist_ok=True)
    old = OUTPUT.read_text() if OUTPUT.exists() else ""
    OUTPUT.write_text(merge(old, sections))
    print(f"bench: wrote {OUTPUT}")


def _block(name: str, body: str) -> str:
    return f"<!-- bench:{name} -->\n{body}<!-- /bench:{name} -->\n"


def merge(text: str, bodies: dict[str, str]) -> str:
    """``text`` with the blocks of ``bodies`` replaced in place; text outside the blocks (notes
    written by hand between them) is kept. A block the text lacks goes before the next one in
    ``BENCHMARKS`` order that it has, or at the end."""
    if not text:
        text = HEADER
    for name, body in bodies.items():
        pattern = re.compile(rf"<!-- bench:{name} -->\n.*?<!-- /bench:{name} -->\n", flags=re.S)
        found = pattern.search(text)
        if found:
            text = text[: found.start()] + _block(name, body) + text[found.end() :]
            continue
        later = BENCHMARKS[BENCHMARKS.index(name) + 1 :]
        at = min(
            (text.find(f"<!-- bench:{n} -->") for n in later if f"<!-- bench:{n} -->" in text),
            default=-1,
        )
        if at < 0:
            text = text.rstrip("\n") + "\n\n" + _block(name, body)
        else:
            text = text[:at] + _block(name, body) + "\n" + text[at:]
    return text


if __name__ == "__main__":
    main(sys.argv[1:])
