"""``python -m ramplab.options [--markdown | --write | --check] [DOC]``: the options reference.

``--markdown`` prints it, ``--write`` puts it into ``docs/cli.md``, ``--check`` exits 1 when the
doc's copy is stale.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from ramplab.options.reference import markdown, replace_block

DEFAULT_DOC = Path(__file__).resolve().parents[2] / "docs" / "cli.md"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m ramplab.options")
    action = parser.add_mutually_exclusive_group(required=True)
    action.add_argument("--markdown", action="store_true", help="print the reference")
    action.add_argument("--write", action="store_true", help="update the reference in DOC")
    action.add_argument("--check", action="store_true", help="exit 1 if DOC's reference is stale")
    parser.add_argument("doc", nargs="?", type=Path, default=DEFAULT_DOC)
    args = parser.parse_args(argv)
    if args.markdown:
        sys.stdout.write(markdown())
        return 0
    try:
        current = args.doc.read_text(encoding="utf-8")
        wanted = replace_block(current)
    except (OSError, ValueError) as exc:
        sys.stderr.write(f"{args.doc}: no options reference to update ({exc})\n")
        return 2
    if args.check:
        if current != wanted:
            sys.stderr.write(
                f"stale options reference in {args.doc} (run python -m ramplab.options --write)\n"
            )
            return 1
        return 0
    args.doc.write_text(wanted, encoding="utf-8")
    print(args.doc)
    return 0


if __name__ == "__main__":
    sys.exit(main())
