"""One ``ramplab attention`` run: its input checked and the model loaded, the probes measured,
the backtrace written.

Two steps on purpose: ``prepare`` does everything that can refuse the input — the depths, the
context length against the window (read from ``config.json``, before the model loads), the model
and its extra, the output directory — so bad input exits 2 within seconds instead of after the
measurement; ``measure_backtrace`` then reads every probe, which is the slow part.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from ramplab.attention.model import LoadedModel, default_model_dir, load_model, model_window
from ramplab.attention.probe import Probe, TokenizerEncoder, build_probes, parse_depths
from ramplab.attention.relevance import check_window, measure
from ramplab.attention.render import Backtrace, to_json, write_chart
from ramplab.errors import UsageError

__all__ = ["HTML_NAME", "JSON_NAME", "Prepared", "measure_backtrace", "prepare", "write_backtrace"]

JSON_NAME = "attention.json"
HTML_NAME = "attention.html"
_MAX_DEFAULT_TOKENS = 512  # the default context: the model's window, at most this


@dataclass(frozen=True)
class Prepared:
    """A loaded model and the probes it is to read."""

    loaded: LoadedModel
    probes: list[Probe]
    context_tokens: int
    needle: str
    question: str


def prepare(
    model: Path | None,
    needle: str,
    question: str,
    depths: str,
    context_tokens: int | None,
    output: Path | None,
) -> Prepared:
    """Check the input, load the model (``None``: the packaged MiniLM), build one probe per depth
    and create ``output``; a ``UsageError`` names the option at fault."""
    wanted = parse_depths(depths)
    window = model_window(model if model is not None else default_model_dir())
    tokens = (
        context_tokens
        if context_tokens is not None
        else min(window or _MAX_DEFAULT_TOKENS, _MAX_DEFAULT_TOKENS)
    )
    check_window(tokens, window)
    loaded = load_model(model)
    probes = build_probes(TokenizerEncoder(loaded.tokenizer), wanted, tokens, needle, question)
    if output is not None:
        try:
            output.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise UsageError("--output", f"cannot create {str(output)!r}: {exc.strerror}") from None
    return Prepared(loaded, probes, tokens, needle, question)


def measure_backtrace(prepared: Prepared) -> Backtrace:
    """Run the model on every probe: the backtrace, with what it was measured on."""
    loaded = prepared.loaded
    return Backtrace(
        model=loaded.name,
        directory=loaded.directory,
        window=loaded.window,
        layers=loaded.layers,
        heads=loaded.heads,
        context_tokens=prepared.context_tokens,
        needle=prepared.needle,
        question=prepared.question,
        results=measure(loaded, prepared.probes),
    )


def write_backtrace(bt: Backtrace, directory: Path) -> tuple[Path, Path]:
    """``attention.html`` (the chart) and ``attention.json`` (``to_json``) into ``directory``;
    their paths, the page first."""
    page, doc = directory / HTML_NAME, directory / JSON_NAME
    doc.write_text(json.dumps(to_json(bt), ensure_ascii=False), encoding="utf-8")
    write_chart(bt, page)
    return page, doc
