"""The package's imports, read from its source: no cycle among its modules even counting
the imports made inside functions, no more such imports than today, and a comment at
each saying why (an optional dependency, or a model that cannot be imported at module
load)."""

from __future__ import annotations

import ast
import io
import tokenize
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "laterite_django"
# Imports of the package's own modules made inside a function body today; lower it as
# they move to module level, never raise it.
MOST_INSIDE_FUNCTIONS = 13


def _modules() -> dict[str, Path]:
    found = {}
    for path in PACKAGE.rglob("*.py"):
        parts = path.relative_to(ROOT).with_suffix("").parts
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        found[name] = path
    return found


def _imports(name: str, path: Path, modules: dict[str, Path]
             ) -> Iterator[tuple[str, bool, int]]:
    """Each module of the package that `name` imports, whether inside a function, and
    the line of the import; imports under `if TYPE_CHECKING:` are left out (annotations
    only)."""
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
                yield target, id(node) in in_function, node.lineno


def _graph() -> tuple[dict[str, set[str]], int]:
    modules = _modules()
    edges: dict[str, set[str]] = {name: set() for name in modules}
    inside = 0
    for name, path in modules.items():
        for target, in_function, _ in _imports(name, path, modules):
            edges[name].add(target)
            inside += in_function
    return edges, inside


def _unexplained(name: str, path: Path, modules: dict[str, Path]) -> list[int]:
    """The lines of `name`'s imports of the package's own modules inside a function with
    no comment on their line or the line above."""
    tokens = tokenize.generate_tokens(io.StringIO(path.read_text()).readline)
    commented = {token.start[0] for token in tokens if token.type == tokenize.COMMENT}
    return sorted({line for _, in_function, line in _imports(name, path, modules)
                   if in_function and not {line, line - 1} & commented})


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


def test_each_import_inside_a_function_says_why() -> None:
    modules = _modules()
    unexplained = [f"{path.relative_to(ROOT)}:{line}" for name, path in sorted(modules.items())
                   for line in _unexplained(name, path, modules)]
    assert unexplained == []


def test_an_import_without_a_comment_is_seen(tmp_path: Path) -> None:
    """The reader finds an import inside a function with no comment (so the test above
    can fail), and takes a comment on the line above as one."""
    path = tmp_path / "example.py"
    path.write_text(
        "def silent():\n"
        "    from laterite_django.conf import settings\n"
        "\n"
        "\n"
        "def said():\n"
        "    # Why, in a comment.\n"
        "    from laterite_django.conf import settings\n"
    )
    modules = {**_modules(), "laterite_django.example": path}
    assert _unexplained("laterite_django.example", path, modules) == [2]


def test_a_cycle_is_seen() -> None:
    """The reader finds a cycle where there is one (so the first test can fail)."""
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
