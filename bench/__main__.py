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
    "prefix_cache",
    "tracing_overhead",
    "foreign_truth",
    "peers",
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


def _sections(text: str) -> dict[str, str]:
    found = re.findall(r"<!-- bench:(\w+) -->\n(.*?)<!-- /bench:\1 -->", text, flags=re.S)
    return dict(found)


def main(names: list[str]) -> None:
    selected = names or BENCHMARKS
    unknown = [name for name in selected if name not in BENCHMARKS]
    if unknown:
        print(f"bench: unknown benchmark(s) {unknown}; known: {BENCHMARKS}", file=sys.stderr)
        raise SystemExit(2)
    sections = _sections(OUTPUT.read_text()) if OUTPUT.exists() else {}
    for name in selected:
        print(f"bench: running {name} ...", flush=True)
        module = importlib.import_module(f"bench.{name}")
        started = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
        body = module.run()
        sections[name] = (
            f"{body}\nCommand: `python -m bench {name}` — run {started} on {_machine()}.\n\n"
        )
    OUTPUT.parent.mkdir(exist_ok=True)
    parts = [HEADER]
    for name in BENCHMARKS:
        if name in sections:
            parts.append(f"<!-- bench:{name} -->\n{sections[name]}<!-- /bench:{name} -->\n")
    OUTPUT.write_text("\n".join(parts))
    print(f"bench: wrote {OUTPUT}")


if __name__ == "__main__":
    main(sys.argv[1:])
