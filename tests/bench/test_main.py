"""``python -m bench NAME`` rewrites only NAME's block of docs/benchmarks.md."""

from __future__ import annotations

from bench.__main__ import HEADER, merge


def test_merge_replaces_a_block_in_place_and_keeps_notes_between_blocks() -> None:
    text = (
        f"{HEADER}\n<!-- bench:peers -->\nold peers\n<!-- /bench:peers -->\n\n"
        "### A note written by hand\n\n<!-- bench:soak -->\nsoak\n<!-- /bench:soak -->\n"
    )
    merged = merge(text, {"peers": "new peers\n"})
    assert merged == text.replace("old peers", "new peers")


def test_merge_puts_a_missing_block_in_benchmarks_order() -> None:
    text = f"{HEADER}\n<!-- bench:soak -->\nsoak\n<!-- /bench:soak -->\n"
    merged = merge(text, {"peers": "peers\n", "fuzz": "fuzz\n"})
    assert merged.index("bench:peers") < merged.index("bench:soak") < merged.index("bench:fuzz")
    assert merge("", {"fuzz": "fuzz\n"}).startswith(HEADER)
