"""``ramplab export``: a run's records as JSON Lines, CSV or Parquet, for another tool."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn

from ramplab.cli.console import console
from ramplab.cli.errors import storage_errors, user_errors
from ramplab.errors import UsageError
from ramplab.records.export import Format
from ramplab.records.export import export as export_records
from ramplab.runs.rundir import RunDir

__all__ = ["export"]


def export(
    run_dir: Annotated[Path, typer.Argument(help="A run directory (results/<run>/).")],
    fmt: Annotated[
        Format, typer.Option("--format", help="jsonl (one record a line), csv or parquet.")
    ] = Format.jsonl,
    output: Annotated[
        Path | None,
        typer.Option("--output", "-o", help="Where to write (default: RUN_DIR/requests.<format>)."),
    ] = None,
) -> None:
    """Write a run's records (docs/records.md) as JSON Lines, CSV or Parquet.

    Any run directory: its Parquet records, the journal a killed run left, or an old
    requests.jsonl. CSV holds lists and maps as JSON text.
    """
    with storage_errors(), user_errors():
        files = RunDir(run_dir).records
        if not files.exist():
            raise UsageError("RUN_DIR", f"{run_dir} holds no records (docs/records.md)")
        out = output if output is not None else run_dir / f"requests.{fmt.value}"
        sources = [files.parquet, files.journal] if files.columnar else [files.jsonl]
        if out.resolve() in {source.resolve() for source in sources}:
            raise UsageError("--output", f"{out} is where the run's records are read from")
        total = files.count()
        columns = (TextColumn("exporting"), BarColumn(), MofNCompleteColumn())
        with Progress(*columns, console=console, transient=True) as bar:
            task = bar.add_task("export", total=total)
            written = export_records(files, fmt, out, lambda n: bar.update(task, completed=n))
        console.print(f"export: {written:,} records → {out}")
