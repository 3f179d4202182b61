"""No import loop among the modules of pybackend/stub and pybackend/testing.

The graph is built from the source with ``ast``: every ``import`` counts, at the top of a
module or inside a function (an import moved into a function to dodge a loop is still the
loop), except those under ``if TYPE_CHECKING:``, which only type hints read. A module's
edge goes to each module of the checked packages that it names: ``from .x import y`` to
``x`` (and to ``x.y`` where that is a module), ``from . import y`` to ``y``.
"""

from __future__ import annotations

import ast
from pathlib import Path
from typing import Dict, Iterator, List, Optional, Set

import pytest

REPO = Path(__file__).resolve().parents[2]
PACKAGES = ("pybackend/stub", "pybackend/testing")


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(REPO).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _modules() -> Dict[str, Path]:
    found: Dict[str, Path] = {}
    for package in PACKAGES:
        for path in sorted((REPO / package).rglob("*.py")):
            found[_module_name(path)] = path
    return found


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _imports(tree: ast.AST) -> Iterator[ast.stmt]:
    """Every import statement, skipping the bodies of ``if TYPE_CHECKING:``."""
    stack: List[ast.AST] = [tree]
    while stack:
        node = stack.pop()
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            yield node
            continue
        if isinstance(node, ast.If) and _is_type_checking(node.test):
            stack.extend(node.orelse)  # only the ``else`` runs
            continue
        stack.extend(ast.iter_child_nodes(node))


def _resolve(module: str, is_package: bool, node: ast.ImportFrom) -> str:
    if not node.level:
        return node.module or ""
    base = module.split(".")
    if not is_package:
        base = base[:-1]
    if node.level > 1:
        base = base[: len(base) - (node.level - 1)]
    return ".".join(base + ([node.module] if node.module else []))


def import_graph() -> Dict[str, Set[str]]:
    modules = _modules()
    graph: Dict[str, Set[str]] = {name: set() for name in modules}
    for name, path in modules.items():
        tree = ast.parse(path.read_text(), str(path))
        for node in _imports(tree):
            if isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            else:
                target = _resolve(name, path.name == "__init__.py", node)
                targets = [target] + [f"{target}.{alias.name}" for alias in node.names]
            graph[name].update(t for t in targets if t in modules and t != name)
    return graph


def find_cycle(graph: Dict[str, Set[str]]) -> Optional[List[str]]:
    """One cycle of ``graph`` (its modules in import order, the first repeated), or None."""
    state: Dict[str, int] = {}  # 1: on the current path, 2: done
    path: List[str] = []

    def visit(node: str) -> Optional[List[str]]:
        state[node] = 1
        path.append(node)
        for nxt in sorted(graph[node]):
            if state.get(nxt) == 1:
                return path[path.index(nxt) :] + [nxt]
            if nxt not in state:
                found = visit(nxt)
                if found:
                    return found
        path.pop()
        state[node] = 2
        return None

    for node in sorted(graph):
        if node not in state:
            found = visit(node)
            if found:
                return found
    return None


def test_the_checked_packages_are_found() -> None:
    graph = import_graph()
    assert "pybackend.stub.returns" in graph and "pybackend.testing.harness" in graph
    # The walk sees what it must: a function-level import, and no TYPE_CHECKING one.
    assert "pybackend.testing.harness_errors" in graph["pybackend.testing.load_checks"]
    assert "pybackend.testing.harness" not in graph["pybackend.testing.transport"]


@pytest.mark.parametrize(
    ("graph", "cycle"),
    [
        ({"a": {"b"}, "b": {"c"}, "c": {"a"}}, ["a", "b", "c", "a"]),
        ({"a": {"b"}, "b": set()}, None),
    ],
)
def test_find_cycle(graph: Dict[str, Set[str]], cycle: Optional[List[str]]) -> None:
    assert find_cycle(graph) == cycle


def test_stub_and_testing_have_no_import_loop() -> None:
    cycle = find_cycle(import_graph())
    assert cycle is None, "import loop: " + " -> ".join(cycle or [])
