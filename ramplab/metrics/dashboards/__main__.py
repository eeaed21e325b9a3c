"""``python -m ramplab.metrics.dashboards [--check] [DIR]``: write (or compare) the JSON."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from ramplab.metrics.dashboards.catalog import all_dashboards
from ramplab.metrics.dashboards.model import Dashboard, render

DEFAULT_DIR = Path(__file__).resolve().parents[3] / "grafana" / "dashboards"


def file_name(dashboard: Dashboard) -> str:
    return dashboard.uid.removeprefix("ramplab-") + ".json"


def text(dashboard: Dashboard) -> str:
    """The exact file content: sorted keys and a final newline, so diffs stay small."""
    return json.dumps(render(dashboard), indent=2, sort_keys=True) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m ramplab.metrics.dashboards")
    parser.add_argument("directory", nargs="?", type=Path, default=DEFAULT_DIR)
    parser.add_argument("--check", action="store_true", help="exit 1 if a file differs")
    args = parser.parse_args(argv)
    stale = []
    for dashboard in all_dashboards():
        path = args.directory / file_name(dashboard)
        wanted = text(dashboard)
        if args.check:
            if not path.is_file() or path.read_text() != wanted:
                stale.append(str(path))
            continue
        args.directory.mkdir(parents=True, exist_ok=True)
        path.write_text(wanted)
        print(path)
    if stale:
        sys.stderr.write(
            "stale dashboards (run python -m ramplab.metrics.dashboards): "
            + ", ".join(stale)
            + "\n"
        )
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
