"""Project habits checked in CI: lint, types, doctests, and the layering of the tree.

The layers (docs/development.md): core < kernels < metrics < events < monitors < stream <
(report, integrations, cli). A module may import its own layer and the ones below it, never one above;
the library never imports ``consumers`` (the Kafka service imports the library); and no
module-level import circle exists between modules.
"""
from __future__ import annotations

import ast
import doctest
import importlib
import os
import pkgutil
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import streammetrics

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = Path(streammetrics.__file__).parent

LAYERS = {"core": 0, "kernels": 1, "metrics": 2, "events": 3, "monitors": 4, "stream": 5,
          "report": 6, "integrations": 6, "cli": 6, "spark": 6, "__init__": 7}


def _tool(name: str) -> str:
    path = shutil.which(name, path=str(Path(sys.executable).parent)) or shutil.which(name)
    if path is None:
        if os.environ.get("CI"):
            pytest.fail(f"{name} is not installed (it is in the test extra)")
        pytest.skip(f"{name} is not installed")
    return path


def test_ruff_is_clean():
    result = subprocess.run([_tool("ruff"), "check", "."], cwd=ROOT, capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr


@pytest.mark.slow
def test_mypy_is_clean():
    result = subprocess.run([_tool("mypy")], cwd=ROOT, capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr


def _library_modules() -> list[str]:
    return sorted(m.name for m in pkgutil.walk_packages([str(PACKAGE)], "streammetrics."))


@pytest.mark.parametrize("name", _library_modules())
def test_docstring_examples_run(name):
    try:
        module = importlib.import_module(name)
    except ImportError as exc:  # an optional extra (pyspark, river, matplotlib) that is not installed
        if os.environ.get("CI"):
            raise
        pytest.skip(f"{name}: {exc}")
    result = doctest.testmod(module, optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    assert result.failed == 0, f"{result.failed} of {result.attempted} docstring examples failed in {name}"


def test_public_classes_have_examples():
    """Every public accumulator and monitor documents itself with a runnable example."""
    missing = [cls.__name__ for cls in streammetrics.registered_types().values()
               if cls.__module__.startswith("streammetrics.") and ">>>" not in (cls.__doc__ or "")
               and ">>>" not in (sys.modules[cls.__module__].__doc__ or "")]
    assert not missing, f"no docstring example: {missing}"


def _layer(module: str) -> int | None:
    parts = module.split(".")
    if parts[0] != "streammetrics":
        return None
    return LAYERS.get(parts[1] if len(parts) > 1 else "__init__")


def _module_level_imports(path: Path) -> list[str]:
    """Modules imported at module level (not inside functions, not under TYPE_CHECKING)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    names: list[str] = []

    def visit(body: list[ast.stmt]) -> None:
        for node in body:
            if isinstance(node, ast.Import):
                names.extend(alias.name for alias in node.names)
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                names.append(node.module)
                names.extend(f"{node.module}.{alias.name}" for alias in node.names)
            elif isinstance(node, ast.If) and "TYPE_CHECKING" not in ast.unparse(node.test):
                visit(node.body)
                visit(node.orelse)
            elif isinstance(node, ast.Try):
                visit(node.body)

    visit(tree.body)
    return names


def _source_files() -> dict[str, Path]:
    files = {}
    for path in PACKAGE.rglob("*.py"):
        rel = path.relative_to(PACKAGE.parent).with_suffix("")
        parts = list(rel.parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        files[".".join(parts)] = path
    return files


def test_layers_import_only_downwards_and_never_the_service():
    offenders = []
    for module, path in _source_files().items():
        mine = _layer(module)
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):  # function-level imports count too
            if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                # ``from streammetrics import monitors`` imports the subpackage; ``__version__`` is no layer
                targets = ([f"{node.module}.{a.name}" for a in node.names] if node.module == "streammetrics"
                           else [node.module])
            elif isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            else:
                continue
            for target in targets:
                if target.split(".")[0] == "consumers" and module != "streammetrics.cli":
                    offenders.append(f"{module} imports {target}")
                theirs = _layer(target)
                if mine is not None and theirs is not None and theirs > mine:
                    offenders.append(f"{module} (layer {mine}) imports {target} (layer {theirs})")
    assert not offenders, "\n".join(offenders)


def test_no_module_level_import_circle():
    files = _source_files()
    graph: dict[str, set[str]] = {}
    for module, path in files.items():
        deps = set()
        for name in _module_level_imports(path):
            while name and name not in files:
                name = name.rpartition(".")[0]
            if name and name != module and name != "streammetrics":
                deps.add(name)
        graph[module] = deps
    state: dict[str, int] = {}
    cycles = []

    def dfs(node: str, stack: list[str]) -> None:
        state[node] = 1
        stack.append(node)
        for dep in sorted(graph.get(node, ())):
            if state.get(dep) == 1:
                cycles.append(" -> ".join(stack[stack.index(dep):] + [dep]))
            elif dep not in state:
                dfs(dep, stack)
        stack.pop()
        state[node] = 2

    for module in sorted(graph):
        if module not in state:
            dfs(module, [])
    assert not cycles, "\n".join(cycles)


# ----------------------------------------------------------------------------- private reads
#: reads of another module's private attributes in streammetrics/ and consumers/ (issue 24): this
#: number may only shrink. Lower it when a change removes some; a change that adds one gives the
#: attribute a public name (or moves the code that needs it next to its owner) instead.
#: 39 = 34 + the five reads of kafka-python's producer internals by consumers/lean_producer.py
#: (``_accumulator``, ``_sender``, and the accumulator's ``_tp_lock``, ``_batches``, ``_incomplete``:
#: kafka-python has no public way to append many records; gated by a self-test, as lean_records)
PRIVATE_READS_ALLOWED = 39
#: underscore names that are public API of the standard library (os._exit, namedtuple's _replace, ...)
_STDLIB_UNDERSCORE_API = {"_exit", "_getframe", "_replace", "_asdict", "_fields", "_make"}


def _is_private(name: str) -> bool:
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


def _defined_names(tree: ast.AST) -> set[str]:
    """Names a module defines: functions, classes, assigned names and annotations, arguments,
    ``self.x`` / ``cls.x`` attributes it assigns, import aliases and ``__slots__`` entries."""
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            names.add(node.id)
        elif (isinstance(node, ast.Attribute) and isinstance(node.ctx, (ast.Store, ast.Del))
              and isinstance(node.value, ast.Name) and node.value.id in ("self", "cls")):
            names.add(node.attr)
        elif isinstance(node, ast.arg):
            names.add(node.arg)
        elif isinstance(node, ast.alias) and node.asname:
            names.add(node.asname)
        elif isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "__slots__"
                                                  for t in node.targets):
            names.update(c.value for c in ast.walk(node.value)
                         if isinstance(c, ast.Constant) and isinstance(c.value, str))
    return names


def private_reads(path: Path) -> list[str]:
    """``obj._x`` where no ``_x`` is defined in the module, and ``from m import _x``."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    mine = _defined_names(tree) | _STDLIB_UNDERSCORE_API
    shown = path.relative_to(ROOT) if path.is_relative_to(ROOT) else path
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and _is_private(node.attr) and node.attr not in mine:
            found.append(f"{shown}:{node.lineno}: .{node.attr}")
        elif isinstance(node, ast.ImportFrom):
            found += [f"{shown}:{node.lineno}: from {node.module} import {a.name}"
                      for a in node.names if _is_private(a.name)]
    return found


def _all_private_reads() -> list[str]:
    return [r for pkg in ("streammetrics", "consumers") for path in sorted((ROOT / pkg).rglob("*.py"))
            for r in private_reads(path)]


def test_private_reads_across_modules_only_shrink():
    found = _all_private_reads()
    assert len(found) <= PRIVATE_READS_ALLOWED, (
        f"{len(found)} reads of other modules' private attributes (allowed: {PRIVATE_READS_ALLOWED}); "
        "give the attribute a public name instead. All of them:\n" + "\n".join(found))


def test_private_reads_counter_sees_both_forms(tmp_path):
    # the counter can fail: a private import and a read of an attribute the module does not define
    probe = tmp_path / "probe.py"
    probe.write_text("import os\nfrom streammetrics.kernels.binning import _MASK\n"
                     "class A:\n    _declared: int\n    def __init__(self):\n        self._mine = 1\n"
                     "    def f(self, other):\n"
                     "        os._exit(other._mine + other._theirs + self._declared + other.__len__())\n",
                     encoding="utf-8")
    reads = sorted(r.split(": ", 1)[1] for r in private_reads(probe))
    assert reads == ["._theirs", "from streammetrics.kernels.binning import _MASK"]
