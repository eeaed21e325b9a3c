"""The target's modules import each other without a cycle, counting imports inside functions:
a deferred import that only hides a cycle (as ``app.py`` <-> ``server.py`` once did) fails here."""

from __future__ import annotations

import ast
from graphlib import CycleError, TopologicalSorter
from pathlib import Path

import target_service

PACKAGE = Path(target_service.__file__).parent


def module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imports(path: Path, known: set[str]) -> set[str]:
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module:
            names = [node.module, *(f"{node.module}.{alias.name}" for alias in node.names)]
        elif isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        else:
            continue
        found |= {name for name in names if name in known}
    return found


def test_no_import_cycle_inside_target_service() -> None:
    paths = {module_name(p): p for p in PACKAGE.rglob("*.py")}
    # The package's own __init__ re-exports; its submodules importing it is not a cycle of
    # modules, so it is left out as a dependency.
    known = set(paths) - {"target_service"}
    graph = {name: imports(path, known) - {name} for name, path in paths.items()}
    try:
        list(TopologicalSorter(graph).static_order())
    except CycleError as exc:
        raise AssertionError(f"import cycle: {' -> '.join(exc.args[1])}") from None
