"""``ramplab prompts analyse|normalise``: token inflation of prompt files (study §3.3;
``ramplab.workload.inflation``, ``ramplab.workload.normalise``, docs/prompts.md).

The workload modules are imported when the verb runs, not when the CLI starts.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Annotated

import typer

from ramplab.cli.console import console
from ramplab.cli.errors import user_errors
from ramplab.cli.options import JsonFlag
from ramplab.errors import UsageError

__all__ = ["prompts_app"]

prompts_app = typer.Typer(
    help="Prompt token inflation (study §3.3): what each kind of redundancy costs; removing it.",
    no_args_is_help=True,
)
PromptFileArg = Annotated[
    Path,
    typer.Argument(
        help='JSONL ({"prompt"} or {"messages"} per line, optional "lang") or a plain-text prompt.',
        show_default=False,
    ),
]


@prompts_app.command("analyse")
def prompts_analyse(
    file: PromptFileArg,
    tokenizer: Annotated[
        list[str] | None,
        typer.Option(
            help="cl100k_base (offline), PATH/tokenizer.json (any Hugging Face tokenizer) or "
            "approx (~4 characters per token); repeatable. Default: cl100k_base.",
            show_default=False,
        ),
    ] = None,
    as_json: JsonFlag = False,
    per_prompt: Annotated[
        bool, typer.Option("--per-prompt", help="Also a table of every prompt's tokens.")
    ] = False,
) -> None:
    """Tokens per prompt and the inflation coefficient of each kind of redundancy (duplicate
    lines, blank-line runs, Markdown, trailing whitespace): removed alone, then all together."""
    from ramplab.workload.inflation import analyse, print_analysis, to_json
    from ramplab.workload.prompt_file import read_prompts
    from ramplab.workload.tokenizers import CL100K, load_tokenizers

    with user_errors():
        tokenizers = load_tokenizers(tokenizer or [CL100K])
        analyses = analyse(read_prompts(file), tokenizers)
    if as_json:
        sys.stdout.write(json.dumps(to_json(file, analyses), ensure_ascii=False, indent=2) + "\n")
    else:
        print_analysis(console, analyses, per_prompt)


@prompts_app.command("normalise")
def prompts_normalise(
    file: PromptFileArg,
    output: Annotated[
        Path,
        typer.Option(
            "--output", "-o", help="Where to write the result (same format).", show_default=False
        ),
    ],
    keep: Annotated[
        list[str] | None,
        typer.Option(
            help="A rule not to apply (repeatable): trailing-whitespace, markdown, "
            "duplicate-lines, blank-runs.",
            show_default=False,
        ),
    ] = None,
    tokenizer: Annotated[
        str | None,
        typer.Option(help="Also count tokens before and after with it.", show_default=False),
    ] = None,
) -> None:
    """Write FILE without the redundancies the study recommends removing (every rule unless
    --keep); idempotent, every content word kept in order."""
    from ramplab.workload.normalise import normalise, rules_kept
    from ramplab.workload.prompt_file import is_jsonl, read_prompts, write_prompts
    from ramplab.workload.tokenizers import load_tokenizer

    with user_errors():
        rules = rules_kept(keep or [])
        counter = load_tokenizer(tokenizer) if tokenizer is not None else None
        prompts = read_prompts(file)
        result = normalise(prompts, rules)
        try:
            write_prompts(output, result.prompts, jsonl=is_jsonl(file))
        except OSError as exc:
            raise UsageError("--output", f"cannot write {str(output)!r}: {exc.strerror}") from None
    line = (
        f"{len(prompts)} prompts, {result.changed} changed · rules: {', '.join(rules) or 'none'}"
        f" · characters {result.chars_before} → {result.chars_after}"
    )
    if counter is not None:
        before = sum(counter.count(t) for p in prompts for t in p.texts)
        after = sum(counter.count(t) for p in result.prompts for t in p.texts)
        line += f" · tokens ({counter.name}) {before} → {after}"
    console.print(f"{line} · written to {output}", highlight=False, markup=False)
