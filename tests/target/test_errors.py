"""The target's one exception tree: every exception class it defines hangs where the drawing in
``target_service/errors.py`` says, and nothing in the package imports it from elsewhere."""

from __future__ import annotations

import ast
import inspect
from pathlib import Path

from target_service import errors

PACKAGE = Path(errors.__file__).parent


def test_every_exception_class_lives_in_errors() -> None:
    # One place to look: a class deriving from an exception anywhere else is a second tree.
    strays = []
    for path in PACKAGE.rglob("*.py"):
        if path.name == "errors.py":
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ClassDef):
                bases = {ast.unparse(base) for base in node.bases}
                if any(b.endswith(("Exception", "Error", "RuntimeError")) for b in bases):
                    strays.append(f"{path.relative_to(PACKAGE)}:{node.name}")
    assert strays == []


def test_the_docstring_draws_the_whole_tree() -> None:
    doc = errors.__doc__ or ""
    classes = {
        name: cls
        for name, cls in vars(errors).items()
        if inspect.isclass(cls)
        and issubclass(cls, BaseException)
        and cls.__module__ == errors.__name__
    }
    for name, cls in classes.items():
        assert f" {name} " in doc, f"{name} is missing from the drawing"
        if cls is not errors.InjectedDisconnect:  # a control-flow signal, outside on purpose
            assert issubclass(cls, errors.TargetError), name


def test_split_by_what_the_caller_does() -> None:
    for fatal in (errors.SettingsError, errors.TracingUnavailable, errors.CapacityError):
        assert issubclass(fatal, errors.StartupError)
    for retryable in (errors.RedisUnavailable, errors.QueueFull):
        assert issubclass(retryable, errors.Overloaded)
        assert not issubclass(retryable, errors.APIError)
    assert not issubclass(errors.InjectedDisconnect, errors.TargetError)
