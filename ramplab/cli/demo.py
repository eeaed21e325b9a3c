"""``make demo``: the 1 → 100 QPS demo campaign on the local stack, through the CLI.

    python -m ramplab.cli.demo [CAMPAIGN] [ramplab run options...]

Equivalent to ``ramplab run campaigns/demo.yaml``: the reference target with an embedded Redis, a
Locust master and two workers on this machine, ``results/<run>/`` written, the per-step table
printed. A different campaign (the tests use a shortened one) or extra ``run`` options may be
given; the exit code is the CLI's.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from pathlib import Path

from ramplab.cli.app import main as ramplab

DEFAULT_CAMPAIGN = Path("campaigns") / "demo.yaml"


def main(argv: Sequence[str] | None = None) -> None:
    args = list(sys.argv[1:] if argv is None else argv)
    campaign = args.pop(0) if args and not args[0].startswith("-") else str(DEFAULT_CAMPAIGN)
    ramplab(["run", campaign, *args])  # run.json records it as `ramplab run ...`


if __name__ == "__main__":
    main()
