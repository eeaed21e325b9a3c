"""The kinds of redundancy that inflate a prompt's token count (study §3.3), one rule each.

Each rule removes one kind and nothing else, so that the analyser can measure it alone
(coefficient = tokens with ÷ tokens without) and the normaliser can switch it off alone. A prompt
is a sequence of texts (one, or a chat's message contents): duplicated lines are found across the
whole sequence, since the instruction a system message gives is often repeated in the user's.

``RULES`` holds them in the order the normaliser applies them: trailing whitespace first (so that
a line and its copy with a trailing space are one line), Markdown before duplicate lines (so that
``### 指令`` and ``指令`` are one line), blank-line runs last (the other rules leave blank lines
where lines were).

What each one deliberately leaves alone, because removing it would change what the prompt says:

- fenced code blocks (```` ``` ```` / ``~~~``) are never touched by ``markdown`` or
  ``duplicate-lines`` — repeated lines and ``*`` are meaningful in code;
- numbered lists (``1.``) keep their numbers: an order is content, a bullet is not;
- underscore emphasis (``__x__``) is left as it is: identifiers such as ``__init__`` share the
  syntax; ``*`` emphasis is removed only where no ASCII letter or digit touches it (``a*b*c``);
- a duplicate line must have at least ``MIN_DUPLICATE_CHARS`` characters and a letter or digit,
  so that short repeated lines (``---``, ``}``, ``Yes.``) survive.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass

__all__ = ["MIN_DUPLICATE_CHARS", "RULES", "RULE_NAMES", "Rule", "apply_rules", "rule"]

MIN_DUPLICATE_CHARS = 6

_FENCE = re.compile(r"^\s{0,3}(```|~~~)")
_TRAILING = re.compile(r"[ \t\r\f\v\u00a0\u3000]+$", re.MULTILINE)
# One blank line separates paragraphs and stays; two or more carry nothing more.
_BLANK_RUN = re.compile(r"\n(?:[^\S\n]*\n){2,}")
_LEADING_BLANKS = re.compile(r"\A(?:[^\S\n]*\n)+")
_TRAILING_BLANKS = re.compile(r"\n(?:[^\S\n]*\n)+[^\S\n]*\Z")

_HEADING = re.compile(r"^[ \t]{0,3}#{1,6}(?:[ \t]+|$)")
_HEADING_CLOSE = re.compile(r"[ \t]+#+[ \t]*$")
_QUOTE = re.compile(r"^[ \t]{0,3}>[ \t]?")
_BULLET = re.compile(r"^[ \t]*[-*+](?:[ \t]+|$)")
_RULE_LINE = re.compile(
    r"^[ \t]{0,3}(?:(?:-[ \t]*){3,}|(?:\*[ \t]*){3,}|(?:_[ \t]*){3,}|={3,}[ \t]*)$"
)
_BOTH = re.compile(r"(?<![A-Za-z0-9*\\])\*\*\*(?=[^\s*])(.+?)(?<=[^\s*\\])\*\*\*(?![A-Za-z0-9*])")
_STRONG = re.compile(r"(?<![A-Za-z0-9*\\])\*\*(?=[^\s*])(.+?)(?<=[^\s*\\])\*\*(?![A-Za-z0-9*])")
_EMPHASIS = re.compile(r"(?<![A-Za-z0-9*\\])\*(?=[^\s*])(.+?)(?<=[^\s*\\])\*(?![A-Za-z0-9*])")
_CODE_SPAN = re.compile(r"(`+).*?\1")
_WORD = re.compile(r"\w")


@dataclass(frozen=True, slots=True)
class Rule:
    """One kind of redundancy: ``remove`` returns the texts without it (same length)."""

    name: str
    summary: str
    remove: Callable[[Sequence[str]], list[str]]


def _outside_fences(text: str, edit: Callable[[str], str | None]) -> str:
    """``edit`` every line outside fenced code; ``None`` drops the line."""
    out: list[str] = []
    fenced = False
    for line in text.split("\n"):
        if _FENCE.match(line):
            fenced = not fenced
            out.append(line)
        elif fenced:
            out.append(line)
        else:
            edited = edit(line)
            if edited is not None:
                out.append(edited)
    return "\n".join(out)


def _trailing_whitespace(texts: Sequence[str]) -> list[str]:
    return [_TRAILING.sub("", text) for text in texts]


def _blank_runs(texts: Sequence[str]) -> list[str]:
    out = []
    for text in texts:
        collapsed = _LEADING_BLANKS.sub("", _BLANK_RUN.sub("\n\n", text))
        out.append(_TRAILING_BLANKS.sub("\n", collapsed))
    return out


def _emphasis(segment: str) -> str:
    while True:
        stripped = _EMPHASIS.sub(r"\1", _STRONG.sub(r"\1", _BOTH.sub(r"\1", segment)))
        if stripped == segment:
            return segment
        segment = stripped


def _markdown_line(line: str) -> str | None:
    if _RULE_LINE.match(line):
        return ""
    while True:
        stripped = _BULLET.sub("", _QUOTE.sub("", line))
        if _HEADING.match(stripped):
            stripped = _HEADING_CLOSE.sub("", _HEADING.sub("", stripped))
        if stripped == line:
            break
        line = stripped
    if _RULE_LINE.match(line):
        return ""
    # Code spans keep their asterisks: split around them, strip emphasis between.
    pieces, last = [], 0
    for span in _CODE_SPAN.finditer(line):
        pieces.append(_emphasis(line[last : span.start()]))
        pieces.append(span.group(0))
        last = span.end()
    pieces.append(_emphasis(line[last:]))
    return "".join(pieces)


def _markdown(texts: Sequence[str]) -> list[str]:
    return [_outside_fences(text, _markdown_line) for text in texts]


def _duplicate_lines(texts: Sequence[str]) -> list[str]:
    seen: set[str] = set()

    def keep_first(line: str) -> str | None:
        key = line.strip()
        if len(key) < MIN_DUPLICATE_CHARS or not _WORD.search(key):
            return line
        if key in seen:
            return None
        seen.add(key)
        return line

    return [_outside_fences(text, keep_first) for text in texts]


RULES: tuple[Rule, ...] = (
    Rule("trailing-whitespace", "spaces and tabs at the end of a line", _trailing_whitespace),
    Rule(
        "markdown",
        "headings, block quotes, bullets, horizontal rules, * emphasis (outside code)",
        _markdown,
    ),
    Rule(
        "duplicate-lines",
        "a line repeated verbatim (an instruction given twice), after its first occurrence",
        _duplicate_lines,
    ),
    Rule("blank-runs", "two or more blank lines in a row, blank lines at either end", _blank_runs),
)
RULE_NAMES: tuple[str, ...] = tuple(r.name for r in RULES)


_BY_NAME = {r.name: r for r in RULES}


def rule(name: str) -> Rule:
    """The rule called ``name`` (``KeyError`` otherwise; callers validate names first)."""
    return _BY_NAME[name]


def apply_rules(texts: Sequence[str], names: Sequence[str]) -> list[str]:
    """``texts`` with the named rules applied, in ``RULES`` order whatever the order of
    ``names``."""
    out = list(texts)
    for r in RULES:
        if r.name in names:
            out = r.remove(out)
    return out
