"""``ramplab dataset inspect``: what a dataset would send (``ramplab.workload.dataset``,
docs/workloads.md).

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

__all__ = ["dataset_app"]

dataset_app = typer.Typer(
    help="Datasets for realistic workloads: ShareGPT conversations, prompt JSONL, prompt lines.",
    no_args_is_help=True,
)


@dataset_app.command("inspect")
def dataset_inspect(
    file: Annotated[
        Path,
        typer.Argument(
            help="ShareGPT JSON/JSONL, prompt JSONL (optional output_tokens) or one prompt a line.",
            show_default=False,
        ),
    ],
    dataset_format: Annotated[
        str, typer.Option("--format", help="auto, sharegpt, prompts or text.")
    ] = "auto",
    tokenizer: Annotated[
        str,
        typer.Option(
            help="approx (~4 characters per token), cl100k_base (offline) or PATH/tokenizer.json."
        ),
    ] = "approx",
    prompt_tokens: Annotated[
        str, typer.Option(help="Keep prompts of LOW..HIGH tokens (as --dataset-prompt-tokens).")
    ] = "",
    output_tokens: Annotated[
        str, typer.Option(help="Keep prompts whose output is LOW..HIGH tokens.")
    ] = "",
    sample: Annotated[
        int | None, typer.Option(help="Only this many prompts (seeded).", show_default=False)
    ] = None,
    seed: Annotated[int, typer.Option(help="Order of the prompts (as --dataset-seed).")] = 0,
    as_json: JsonFlag = False,
) -> None:
    """Prompt and output length histograms of FILE, as a run with the same options would send it."""
    from ramplab.workload.dataset import Dataset, parse_range
    from ramplab.workload.dataset_formats import FORMATS
    from ramplab.workload.inspect import print_inspection, to_json
    from ramplab.workload.tokenizers import load_tokenizer

    with user_errors():
        if dataset_format not in FORMATS:
            raise UsageError("--format", f"expected one of {', '.join(FORMATS)}")
        if sample is not None and sample < 1:
            raise UsageError("--sample", f"must be at least 1, got {sample}")
        dataset = Dataset.load(
            file,
            load_tokenizer(tokenizer),
            dataset_format,
            parse_range(prompt_tokens, "--prompt-tokens"),
            parse_range(output_tokens, "--output-tokens"),
            sample,
            seed,
            field="FILE",
        )
    if as_json:
        sys.stdout.write(json.dumps(to_json(dataset), indent=2) + "\n")
    else:
        print_inspection(console, dataset)
