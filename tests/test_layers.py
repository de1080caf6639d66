"""The package's shape: no import cycle, imports inside functions only where deliberately lazy, small modules,
and a core that names no plug-in. (The direction of imports between layers is the import-linter contract in
pyproject.toml, checked by `lint-imports` in `make test`.)"""

from __future__ import annotations

import ast
import re
import sys
from pathlib import Path

import grimp
import pytest

from nlgkit.core.registry import HEADS, MODELS, TASKS

PACKAGE = Path(__file__).resolve().parents[1] / "nlgkit"
MAX_LINES = 400


def strongly_connected(graph: grimp.ImportGraph) -> list[list[str]]:
    """Tarjan's strongly connected components of more than one module: each is an import cycle."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    cycles: list[list[str]] = []

    def visit(module: str) -> None:
        index[module] = low[module] = len(index)
        stack.append(module)
        on_stack.add(module)
        for imported in sorted(graph.find_modules_directly_imported_by(module)):
            if imported not in index:
                visit(imported)
                low[module] = min(low[module], low[imported])
            elif imported in on_stack:
                low[module] = min(low[module], index[imported])
        if low[module] == index[module]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == module:
                    break
            if len(component) > 1:
                cycles.append(sorted(component))

    limit = sys.getrecursionlimit()
    sys.setrecursionlimit(max(limit, 10_000))
    try:
        for module in sorted(graph.modules):
            if module not in index:
                visit(module)
    finally:
        sys.setrecursionlimit(limit)
    return cycles


def test_no_import_cycle_anywhere_in_the_package() -> None:
    """Imports inside functions and annotation-only imports count too: a cycle hidden there is still a cycle."""
    graph = grimp.build_graph("nlgkit", exclude_type_checking_imports=False)
    assert len(graph.modules) > 50
    assert strongly_connected(graph) == []


def test_the_cycle_finder_finds_a_cycle() -> None:
    graph = grimp.ImportGraph()
    for name in ("a", "b", "c"):
        graph.add_module(name)
    graph.add_import(importer="a", imported="b")
    graph.add_import(importer="b", imported="a")
    graph.add_import(importer="b", imported="c")
    assert strongly_connected(graph) == [["a", "b"]]


def modules() -> list[Path]:
    return sorted(PACKAGE.rglob("*.py"))


def function_level_imports(path: Path) -> list[tuple[int, bool]]:
    """(line, commented) of every import of an nlgkit module inside a function, outside ``TYPE_CHECKING``;
    commented: a comment with "lazy" on the line or in the contiguous block of imports and comments above."""
    source = path.read_text(encoding="utf-8")
    lines = source.splitlines()
    found: list[tuple[int, bool]] = []

    def visit(node: ast.AST, in_function: bool) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.If) and "TYPE_CHECKING" in ast.unparse(child.test):
                continue
            inside = in_function or isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef))
            names = [child.module or ""] if isinstance(child, ast.ImportFrom) else (
                [alias.name for alias in child.names] if isinstance(child, ast.Import) else [])
            if inside and any(name == "nlgkit" or name.startswith("nlgkit.") for name in names):
                first = child.lineno - 1
                while first > 0 and re.match(r"\s*(#|from |import |\)|[\w, ]+,?$)", lines[first - 1]) \
                        and not lines[first - 1].rstrip().endswith(":"):
                    first -= 1
                block = lines[first: (child.end_lineno or child.lineno)]
                found.append((child.lineno, any("lazy" in line.lower() for line in block if "#" in line)))
            visit(child, inside)

    visit(ast.parse(source), False)
    return found


def test_imports_inside_functions_are_deliberately_lazy() -> None:
    """An import of nlgkit inside a function is there to keep `nlgkit --help` fast, and says so."""
    unexplained = [f"{path.relative_to(PACKAGE.parent)}:{line}" for path in modules()
                   for line, commented in function_level_imports(path) if not commented]
    assert unexplained == []


def test_no_module_is_longer_than_the_limit() -> None:
    long = {str(path.relative_to(PACKAGE.parent)): n for path in modules()
            if (n := len(path.read_text(encoding="utf-8").splitlines())) > MAX_LINES}
    assert long == {}


@pytest.mark.parametrize("registry", [TASKS, MODELS, HEADS], ids=lambda r: r.kind)
def test_the_core_names_no_plugin(registry: object) -> None:
    """Plug-ins register themselves; the core (config parsing above all) never names one."""
    core = "\n".join(path.read_text(encoding="utf-8") for path in sorted((PACKAGE / "core").glob("*.py")))
    names = registry.names()  # type: ignore[attr-defined]
    assert names
    assert [name for name in names if re.search(rf"[\"']{re.escape(name)}[\"']", core)] == []
