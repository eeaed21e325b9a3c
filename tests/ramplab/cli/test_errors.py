"""``user_errors()``: a user's mistake is one line on stderr and exit 2; anything else passes."""

from __future__ import annotations

import pytest
import typer

from ramplab.cli.errors import user_errors
from ramplab.errors import ShapeError, UsageError
from ramplab.exitcodes import ExitCode


def test_a_usage_error_is_one_line_and_exit_2(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(typer.Exit) as caught, user_errors():
        raise ShapeError("shape", "bad")
    assert caught.value.exit_code == ExitCode.USAGE
    assert capsys.readouterr().err == "ramplab: error: shape: bad\n"


def test_the_program_name_is_the_callers(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(typer.Exit), user_errors("ramplab container"):
        raise UsageError("RAMPLAB_WORKERS", "too many")
    assert capsys.readouterr().err == "ramplab container: error: RAMPLAB_WORKERS: too many\n"


def test_an_exit_and_other_errors_pass_through() -> None:
    with pytest.raises(typer.Exit) as caught, user_errors():
        raise typer.Exit(3)
    assert caught.value.exit_code == 3
    with pytest.raises(KeyError), user_errors():
        raise KeyError("a bug keeps its traceback")
