"""``ramplab attention``: the attention backtrace on a real transformer (study §3.2;
``ramplab.attention``, docs/attention.md).

``ramplab.attention`` beyond its probe defaults is imported when the verb runs, not when the CLI
starts: it loads numpy and plotly (and, to measure, torch).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Annotated

import typer

from ramplab.attention.probe import DEFAULT_DEPTHS, DEFAULT_NEEDLE, DEFAULT_QUESTION
from ramplab.cli.console import console
from ramplab.cli.errors import user_errors
from ramplab.cli.options import JsonFlag

__all__ = ["attention"]

_DEPTHS = ",".join(f"{d:g}" for d in DEFAULT_DEPTHS)


def attention(
    model: Annotated[
        Path | None,
        typer.Option(
            help="A local Hugging Face model directory. Default: the packaged all-MiniLM-L6-v2.",
            show_default=False,
        ),
    ] = None,
    needle: Annotated[
        str, typer.Option(help="The key fact; its last word's first token is the answer token.")
    ] = DEFAULT_NEEDLE,
    question: Annotated[
        str, typer.Option(help="Ends the context ('' for none).")
    ] = DEFAULT_QUESTION,
    depths: Annotated[
        str, typer.Option(help="Where the needle goes, in percent of the filler, comma-separated.")
    ] = _DEPTHS,
    context_tokens: Annotated[
        int | None,
        typer.Option(
            help="Tokens per context, special tokens included; at most the model's window. "
            "Default: the window, at most 512.",
            show_default=False,
        ),
    ] = None,
    as_json: JsonFlag = False,
    output: Annotated[
        Path | None,
        typer.Option(
            "--output",
            "-o",
            help="Write attention.html and attention.json there.",
            show_default=False,
        ),
    ] = None,
) -> None:
    """The attention every query position pays to the needle's answer token (last layer, mean
    over heads), against the signed distance from it, at each depth of the needle."""
    from ramplab.attention.render import print_backtrace, to_json
    from ramplab.attention.run import measure_backtrace, prepare, write_backtrace

    with user_errors():
        prepared = prepare(model, needle, question, depths, context_tokens, output)
    bt = measure_backtrace(prepared)
    if as_json:
        sys.stdout.write(json.dumps(to_json(bt), ensure_ascii=False) + "\n")
    else:
        print_backtrace(console, bt)
    if output is not None:
        page, doc = write_backtrace(bt, output)
        if not as_json:
            console.print(f"written: {page}, {doc}")
