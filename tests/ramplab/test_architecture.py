"""The folders show the architecture, and these tests keep it so.

ramplab's packages form one ordered list of layers (``LAYERS``, the same list as
``docs/architecture.md``): a module may import its own package and the packages of earlier
layers, never a later one. Packages of one layer never import each other either (``plugin`` and
``stack`` are the two processes — Locust's, gevent-patched, and the CLI's — and the CLI starts
Locust as a subprocess). On top of the layers:

- only ``ramplab/plugin`` imports ``locust`` or ``gevent``; ``import ramplab`` and the CLI load
  neither (importing Locust monkey-patches the whole process);
- ``ramplab`` never imports ``target_service`` and ``target_service`` never imports ``ramplab``;
- no import cycle, between modules or between packages, counting every import;
- every exception ramplab defines joins the tree in ``ramplab.errors``, except control-flow
  signals: private (a leading underscore) to the module that raises them, or ``BaseException``
  subclasses like ``KeyboardInterrupt`` (``ramplab.runs.signals.Interrupted``).

Every import counts: module level, inside functions and in ``TYPE_CHECKING`` blocks — an import
that runs late is still a dependency. Imports are read from the source (AST): ``import a.b``,
``from a import b``, relative imports, ``__import__("a")`` and ``importlib.import_module("a")``
with a literal name.
"""

from __future__ import annotations

import ast
import importlib
import inspect
import json
import subprocess
import sys
import types
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

import ramplab
from ramplab.errors import RamplabError
from tests.support.processes import REPO

PACKAGE = REPO / "ramplab"
TARGET = REPO / "target_service"
LOCUST_WORLD = ("locust", "gevent")
# Earliest first: a package may import the packages of earlier layers only. The root modules
# (``errors``, ``exitcodes``, ``data``) import nothing of ramplab.
LAYERS: tuple[tuple[str, ...], ...] = (
    ("errors", "exitcodes", "data"),
    ("conditions",),
    ("retry", "load"),
    ("workload",),
    ("measure",),
    ("records",),
    ("results", "metrics"),
    ("options",),
    ("campaign",),
    ("runs",),
    ("report",),
    ("attention",),
    ("plugin", "stack"),
    ("experiment",),
    ("search",),
    ("study",),
    ("cli",),
    ("__main__",),  # ``python -m ramplab``: the command line, above everything
)
LAYER_OF = {package: n for n, layer in enumerate(LAYERS) for package in layer}
# The package root and the locustfile-facing modules: they may import anything.
TOP = ("ramplab", "ramplab.users", "ramplab.openloop")


@dataclass(frozen=True, slots=True)
class Import:
    module: str  # the importing module, dotted
    target: str  # what it imports, dotted (resolved when relative)
    line: int
    top_level: bool  # runs when the module is imported (not in a function, not TYPE_CHECKING)


def module_name(path: Path, root: Path) -> str:
    parts = list(path.relative_to(root.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _literal_import(node: ast.Call) -> str | None:
    func = node.func
    named = (isinstance(func, ast.Name) and func.id == "__import__") or (
        isinstance(func, ast.Attribute) and func.attr == "import_module"
    )
    if named and node.args and isinstance(node.args[0], ast.Constant):
        value = node.args[0].value
        return value if isinstance(value, str) else None
    return None


def imports_of(path: Path, root: Path) -> Iterator[Import]:
    module = module_name(path, root)
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))

    def visit(node: ast.AST, top_level: bool) -> Iterator[Import]:
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield Import(module, alias.name, node.lineno, top_level)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")
                anchor = anchor[: len(anchor) - (node.level - 1)]
                base = ".".join([*anchor, base] if base else anchor)
            for alias in node.names:
                yield Import(module, f"{base}.{alias.name}", node.lineno, top_level)
        elif isinstance(node, ast.Call) and (name := _literal_import(node)) is not None:
            yield Import(module, name, node.lineno, False)
        inner = top_level
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda):
            inner = False
        for child in ast.iter_child_nodes(node):
            if isinstance(node, ast.If) and _is_type_checking(node.test) and child in node.body:
                yield from visit(child, False)
            else:
                yield from visit(child, inner)

    yield from visit(tree, True)


def all_imports(root: Path) -> list[Import]:
    return [imp for path in sorted(root.rglob("*.py")) for imp in imports_of(path, root)]


def is_under(name: str, prefix: str) -> bool:
    return name == prefix or name.startswith(prefix + ".")


@pytest.fixture(scope="module")
def ramplab_imports() -> list[Import]:
    return all_imports(PACKAGE)


def violations(found: list[Import], rule: str) -> list[str]:
    return [f"{i.module}:{i.line} imports {i.target} ({rule})" for i in found]


def test_the_scan_sees_every_form_of_import(tmp_path: Path) -> None:
    package = tmp_path / "pkg"
    (package / "sub").mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "sub" / "__init__.py").write_text("")
    (package / "sub" / "mod.py").write_text(
        "from __future__ import annotations\n"
        "import locust\n"
        "import gevent.monkey as gm\n"
        "from gevent.event import Event\n"
        "from . import sibling\n"
        "from ..other import thing\n"
        "from typing import TYPE_CHECKING\n"
        "if TYPE_CHECKING:\n"
        "    from locust.env import Environment\n"
        "def f():\n"
        "    import locust.runners\n"
        "    __import__('gevent')\n"
        "    importlib.import_module('locust.user')\n"
    )
    found = {(i.target, i.top_level) for i in imports_of(package / "sub" / "mod.py", package)}
    assert found >= {
        ("locust", True),
        ("gevent.monkey", True),
        ("gevent.event.Event", True),
        ("pkg.sub.sibling", True),
        ("pkg.other.thing", True),
        ("locust.env.Environment", False),
        ("locust.runners", False),
        ("gevent", False),
        ("locust.user", False),
    }


def test_only_the_plugin_imports_locust_or_gevent(ramplab_imports: list[Import]) -> None:
    found = [
        i
        for i in ramplab_imports
        if any(is_under(i.target, name) for name in LOCUST_WORLD)
        and not is_under(i.module, "ramplab.plugin")
    ]
    assert not found, violations(found, "only ramplab/plugin may import locust or gevent")


def test_ramplab_and_the_target_never_import_each_other(ramplab_imports: list[Import]) -> None:
    found = [i for i in ramplab_imports if is_under(i.target, "target_service")]
    found += [i for i in all_imports(TARGET) if is_under(i.target, "ramplab")]
    assert not found, violations(found, "ramplab and target_service are separate")


def _module_part(target: str) -> str:
    """``ramplab.a.b.Name`` -> ``ramplab.a.b``: the longest prefix that is a module file."""
    parts = target.split(".")
    while parts:
        relative = Path(*parts[1:]) if len(parts) > 1 else Path()
        base = PACKAGE / relative
        if base.with_suffix(".py").is_file() or (base / "__init__.py").is_file():
            return ".".join(parts)
        parts.pop()
    return target


def package_of(module: str) -> str | None:
    """``ramplab.measure.sse`` -> ``measure``; ``None`` for the top (the root, the shims)."""
    if module in TOP:
        return None
    return module.split(".")[1]


def layer_violations(found: list[Import]) -> list[str]:
    """Every import of a later layer's package, or of another package of the same layer."""
    out = []
    for i in found:
        if not is_under(i.target, "ramplab"):
            continue
        source, target = package_of(i.module), package_of(_module_part(i.target))
        if source is None or (target is None and i.target == "ramplab"):
            if source is not None:  # ``import ramplab`` from below: the top is the last layer
                out.append(f"{i.module}:{i.line} imports {i.target} (the package root)")
            continue
        if target is None or source == target:
            continue
        if LAYER_OF[target] >= LAYER_OF[source]:
            out.append(
                f"{i.module}:{i.line} imports {i.target} "
                f"(layer {LAYER_OF[source]} {source} may not import layer "
                f"{LAYER_OF[target]} {target})"
            )
    return out


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    cycles: list[list[str]] = []
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    path: list[str] = []

    def walk(node: str) -> None:
        state[node] = 1
        path.append(node)
        for nxt in sorted(graph.get(node, ())):
            if state.get(nxt) == 1:
                cycles.append([*path[path.index(nxt) :], nxt])
            elif nxt not in state:
                walk(nxt)
        path.pop()
        state[node] = 2

    for node in sorted(graph):
        if node not in state:
            walk(node)
    return cycles


def module_graph(found: list[Import]) -> dict[str, set[str]]:
    graph: dict[str, set[str]] = {}
    for i in found:
        if not is_under(i.target, "ramplab"):
            continue
        target = _module_part(i.target)
        if target != i.module:
            graph.setdefault(i.module, set()).add(target)
        # Importing ``a.b.c`` first runs ``a/b/__init__.py``: an edge to each parent package
        # the importer is not itself inside (a package's own modules import it half-built).
        parts = target.split(".")
        for n in range(2, len(parts)):
            parent = ".".join(parts[:n])
            if not is_under(i.module, parent):
                graph.setdefault(i.module, set()).add(parent)
    return graph


def test_every_package_has_a_layer() -> None:
    packages = {p.parent.name for p in PACKAGE.glob("*/__init__.py")}
    packages |= {p.stem for p in PACKAGE.glob("*.py")} - {"__init__", "users", "openloop"}
    assert packages == set(LAYER_OF), (packages - set(LAYER_OF), set(LAYER_OF) - packages)


def test_every_import_goes_to_an_earlier_layer(ramplab_imports: list[Import]) -> None:
    found = layer_violations(ramplab_imports)
    assert not found, "\n".join(found)


def test_the_layer_check_catches_an_upward_import() -> None:
    upward = Import("ramplab.measure.sse", "ramplab.cli.app.main", 3, False)
    sideways = Import("ramplab.plugin.users", "ramplab.stack.run.execute", 4, True)
    root = Import("ramplab.errors", "ramplab.exitcodes.ExitCode", 5, True)
    down = Import("ramplab.cli.app", "ramplab.measure.sse.SseParser", 6, True)
    found = layer_violations([upward, sideways, root, down])
    assert [line.split(" ")[0] for line in found] == [
        "ramplab.measure.sse:3",
        "ramplab.plugin.users:4",
        "ramplab.errors:5",
    ]


def test_no_import_cycles_between_modules(ramplab_imports: list[Import]) -> None:
    cycles = _cycles(module_graph(ramplab_imports))
    assert not cycles, "\n".join(" -> ".join(c) for c in cycles)


def test_no_import_cycles_between_packages(ramplab_imports: list[Import]) -> None:
    graph: dict[str, set[str]] = {}
    for module, targets in module_graph(ramplab_imports).items():
        source = package_of(module)
        for target in targets:
            package = package_of(target) if target.count(".") or target in TOP else None
            if source is not None and package is not None and package != source:
                graph.setdefault(source, set()).add(package)
    cycles = _cycles(graph)
    assert not cycles, "\n".join(" -> ".join(c) for c in cycles)


def test_the_cycle_check_catches_a_cycle() -> None:
    found = [
        Import("ramplab.measure.client", "ramplab.measure.http11.Http11Pool", 1, True),
        Import("ramplab.measure.http11", "ramplab.measure.client.TimedStream", 2, False),
    ]
    assert _cycles(module_graph(found)) == [
        ["ramplab.measure.client", "ramplab.measure.http11", "ramplab.measure.client"]
    ]


def _run(code: str) -> dict[str, object]:
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=120,
        check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    result: dict[str, object] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def test_importing_ramplab_and_its_cli_loads_neither_locust_nor_gevent() -> None:
    # Every module outside the plugin (and the compatibility modules that re-export it), in a
    # fresh interpreter: whatever this test session imported does not matter.
    skip = ("ramplab.plugin", "ramplab.users", "ramplab.openloop")
    names = [
        module_name(path, PACKAGE)
        for path in sorted(PACKAGE.rglob("*.py"))
        if path.name != "__main__.py"
    ]
    names = [n for n in names if not any(is_under(n, s) for s in skip)]
    code = (
        "import importlib, json, sys\n"
        "import ramplab\n"
        "loaded = {'ramplab': sorted(m for m in sys.modules if m.split('.')[0] in "
        "('locust', 'gevent'))}\n"
        f"for name in {names!r}:\n"
        "    importlib.import_module(name)\n"
        "loaded['all'] = sorted(m for m in sys.modules if m.split('.')[0] in "
        "('locust', 'gevent'))\n"
        "print(json.dumps(loaded))\n"
    )
    assert _run(code) == {"ramplab": [], "all": []}


def test_public_surface_is_declared_complete() -> None:
    public = {
        name
        for name, value in vars(ramplab).items()
        if not name.startswith("_") and not isinstance(value, types.ModuleType)
    }
    lazy = set(ramplab._LAZY)
    assert set(ramplab.__all__) == public | lazy | {"__version__"}
    assert len(ramplab.__all__) == len(set(ramplab.__all__))
    errors = importlib.import_module("ramplab.errors")
    assert set(errors.__all__) <= set(ramplab.__all__)  # the whole tree is public
    assert isinstance(ramplab.__version__, str)
    assert ramplab.__version__


def test_every_public_name_imports() -> None:
    # The Locust classes load lazily (importing them patches the interpreter): a fresh one.
    code = (
        "import json, sys\n"
        "import ramplab\n"
        "light = 'locust' not in sys.modules\n"
        "from ramplab import *\n"
        "kinds = {n: type(getattr(ramplab, n)).__name__ for n in ramplab.__all__}\n"
        "import warnings\n"
        "with warnings.catch_warnings(record=True) as caught:\n"
        "    warnings.simplefilter('always')\n"
        "    from ramplab.users import LLMStreamUser\n"
        "    from ramplab.openloop import RampShape, RampUser\n"
        "said = [str(w.message) for w in caught if w.category is DeprecationWarning]\n"
        "same = LLMStreamUser is ramplab.LLMStreamUser and RampUser is ramplab.RampUser "
        "and RampShape is ramplab.RampShape\n"
        "print(json.dumps({'light': light, 'kinds': kinds, 'same': same, 'said': said}))\n"
    )
    result = _run(code)
    assert result["light"] is True
    assert result["same"] is True  # the deprecated modules still give the same classes, and say so
    said = result["said"]
    assert isinstance(said, list)
    assert any("ramplab.users is deprecated" in s for s in said), said
    assert any("ramplab.openloop is deprecated" in s for s in said), said
    kinds = result["kinds"]
    assert isinstance(kinds, dict)
    assert set(kinds) == set(ramplab.__all__)
    assert kinds["__version__"] == "str"
    for name in ("LLMStreamUser", "RampUser", "RampShape"):
        assert kinds[name] != "NoneType", name


def _exception_classes() -> Iterator[tuple[str, str]]:
    """(module, class) of every class defined in ramplab that derives from an exception."""
    for path in sorted(PACKAGE.rglob("*.py")):
        module = module_name(path, PACKAGE)
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if isinstance(node, ast.ClassDef):
                bases = [ast.unparse(b) for b in node.bases]
                if any(b.endswith(("Error", "Exception")) for b in bases):
                    yield module, node.name


def test_every_exception_joins_the_tree() -> None:
    outside = []
    for module, name in _exception_classes():
        assert not is_under(module, "ramplab.plugin"), f"{module}.{name}: load it here instead"
        cls = getattr(importlib.import_module(module), name)
        assert inspect.isclass(cls)
        assert issubclass(cls, BaseException)
        signal = not issubclass(cls, Exception)  # a BaseException, as KeyboardInterrupt is
        if not name.startswith("_") and not signal and not issubclass(cls, RamplabError):
            outside.append(f"{module}.{name}")
    assert not outside, f"not in ramplab.errors' tree: {outside}"


def test_repository_paths_survived_the_move() -> None:
    # Regression: moving modules one folder down left `parents[1]` pointing inside ramplab/.
    from ramplab.campaign import preflight
    from ramplab.metrics import promconfig
    from ramplab.metrics.dashboards import __main__ as dashboards
    from ramplab.stack import run

    assert (preflight.REPO / "pyproject.toml").is_file(), preflight.REPO
    assert promconfig.SHIPPED_RULES.is_dir()
    assert run.DEFAULT_LOCUSTFILE.is_file()
    assert dashboards.DEFAULT_DIR.is_dir()
