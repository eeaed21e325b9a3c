"""``docs/failures.md`` documents exactly the error kinds a record can carry."""

from __future__ import annotations

import re

from ramplab.measure.record import ERROR_KINDS
from tests.support.processes import REPO

FAILURES = REPO / "docs" / "failures.md"


def documented_kinds() -> list[str]:
    """The first column of the table under "## Error kinds", in order."""
    section = FAILURES.read_text(encoding="utf-8").split("## Error kinds", 1)[1]
    section = section.split("\n## ", 1)[0]
    return re.findall(r"^\| `([a-z0-9_]+)` \|", section, flags=re.MULTILINE)


def test_the_documented_kinds_are_the_kinds() -> None:
    kinds = documented_kinds()
    assert len(kinds) == len(set(kinds)), "a kind documented twice"
    assert kinds == list(ERROR_KINDS)


def test_every_kind_the_code_names_is_listed() -> None:
    """Kinds written as literals in the code (``_StreamFailure("…")``, ``error_kind = "…"``,
    head checks) are all in ``ERROR_KINDS``."""
    named: set[str] = set()
    for path in (REPO / "ramplab").rglob("*.py"):
        text = path.read_text(encoding="utf-8")
        named.update(re.findall(r'_StreamFailure\(\s*"([a-z0-9_]+)"', text))
        named.update(re.findall(r'error_kind\s*=\s*"([a-z0-9_]+)"', text))
        named.update(re.findall(r'HeadFailure\(\s*"([a-z0-9_]+)"', text))
        named.update(re.findall(r'return "([a-z_]+)"', text) if path.name == "attempt.py" else ())
    assert named
    assert named <= set(ERROR_KINDS), named - set(ERROR_KINDS)
