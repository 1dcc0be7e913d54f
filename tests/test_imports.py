"""The package's imports, read from its source: no cycle among its modules even counting
the imports made inside functions (lint-imports sees only those at module level), and
no more such imports than today (the aim is 30 or fewer, each saying why)."""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "laterite_django"
# Imports of the package's own modules made inside a function body today; lower it as
# they move to module level, never raise it.
MOST_INSIDE_FUNCTIONS = 66


def _modules() -> dict[str, Path]:
    found = {}
    for path in PACKAGE.rglob("*.py"):
        parts = path.relative_to(ROOT).with_suffix("").parts
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        found[name] = path
    return found


def _imports(name: str, path: Path, modules: dict[str, Path]
             ) -> Iterator[tuple[str, bool]]:
    """Each module of the package that `name` imports, and whether inside a function;
    imports under `if TYPE_CHECKING:` are left out (annotations only)."""
    tree = ast.parse(path.read_text())
    typing_only: set[int] = set()
    in_function: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            typing_only.update(id(n) for n in ast.walk(node))
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            in_function.update(id(n) for n in ast.walk(node) if n is not node)
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    for node in ast.walk(tree):
        if id(node) in typing_only:
            continue
        targets: list[str] = []
        if isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parent = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*parent, *([base] if base else [])])
            if base.split(".")[0] != "laterite_django":
                continue
            targets = [f"{base}.{alias.name}" for alias in node.names]
        elif isinstance(node, ast.Import):
            targets = [a.name for a in node.names if a.name.split(".")[0] == "laterite_django"]
        for target in targets:
            while target not in modules and "." in target:
                target = target.rpartition(".")[0]
            if target != name:
                yield target, id(node) in in_function


def _graph() -> tuple[dict[str, set[str]], int]:
    modules = _modules()
    edges: dict[str, set[str]] = {name: set() for name in modules}
    inside = 0
    for name, path in modules.items():
        for target, in_function in _imports(name, path, modules):
            edges[name].add(target)
            inside += in_function
    return edges, inside


def _cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected groups of more than one module (Tarjan's algorithm)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    groups: list[list[str]] = []

    def visit(module: str) -> None:
        index[module] = low[module] = len(index)
        stack.append(module)
        on_stack.add(module)
        for other in edges[module]:
            if other not in index:
                visit(other)
                low[module] = min(low[module], low[other])
            elif other in on_stack:
                low[module] = min(low[module], index[other])
        if low[module] == index[module]:
            group = []
            while True:
                other = stack.pop()
                on_stack.discard(other)
                group.append(other)
                if other == module:
                    break
            if len(group) > 1:
                groups.append(sorted(group))

    for module in edges:
        if module not in index:
            visit(module)
    return groups


def test_no_import_cycle_even_inside_functions() -> None:
    edges, _ = _graph()
    assert _cycles(edges) == []


def test_imports_inside_functions_do_not_grow() -> None:
    _, inside = _graph()
    assert inside <= MOST_INSIDE_FUNCTIONS


def test_a_cycle_is_seen() -> None:
    """The reader finds a cycle where there is one (so the first test can fail)."""
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
