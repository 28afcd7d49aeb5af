"""The package's import graph: no cycles, and no module reaching into another's privates.

A cycle between modules means neither can be read, tested or moved without the other,
and works only as long as each import happens to come late enough; a private name
imported from another module is a contract nobody wrote down. Both are checked on the
source (every import, inside functions too; ``TYPE_CHECKING`` blocks excepted: they
never run), so that a new one fails here rather than in a reader's head.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import pytest

PACKAGE = Path(__file__).parents[2] / "src" / "streamshield"


def _modules() -> dict[str, Path]:
    found = {}
    for path in PACKAGE.rglob("*.py"):
        parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        found[".".join(parts)] = path
    return found


MODULES = _modules()


def _known(name: str) -> str | None:
    """The module (or package) of ours that ``name`` is or is inside."""
    while name and name not in MODULES:
        name = name.rpartition(".")[0]
    return name or None


def _imports(module: str) -> Iterator[tuple[str, str, int]]:
    """``(imported module, imported name or "", line)`` for every import of ours that
    ``module`` runs."""
    path = MODULES[module]
    tree = ast.parse(path.read_text(encoding="utf-8"))
    typing_only = {
        id(inner)
        for node in ast.walk(tree)
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test)
        for inner in ast.walk(node)
    }
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    for node in ast.walk(tree):
        if id(node) in typing_only:
            continue
        if isinstance(node, ast.Import):
            for alias in node.names:
                if (target := _known(alias.name)) is not None:
                    yield target, "", node.lineno
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*anchor, base] if base else anchor)
            for alias in node.names:
                full = f"{base}.{alias.name}"
                if full in MODULES:  # a submodule imported by name
                    yield full, "", node.lineno
                elif (target := _known(base)) is not None:
                    yield target, alias.name, node.lineno


def _private_reads(module: str) -> Iterator[tuple[str, str, int]]:
    """``(module, private name, line)`` for every ``alias._name`` read in ``module``
    where ``alias`` is another module of ours it imported (``import a.b as alias``,
    ``from a import b as alias``)."""
    tree = ast.parse(MODULES[module].read_text(encoding="utf-8"))
    package = module if MODULES[module].name == "__init__.py" else module.rpartition(".")[0]
    aliases: dict[str, str] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.asname and alias.name in MODULES:
                    aliases[alias.asname] = alias.name
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*anchor, base] if base else anchor)
            for alias in node.names:
                if f"{base}.{alias.name}" in MODULES:
                    aliases[alias.asname or alias.name] = f"{base}.{alias.name}"
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.Attribute)
            and isinstance(node.value, ast.Name)
            and node.value.id in aliases
            and node.attr.startswith("_")
            and not node.attr.startswith("__")
            and aliases[node.value.id] != module
        ):
            yield aliases[node.value.id], node.attr, node.lineno


def _graph() -> dict[str, set[str]]:
    return {m: {t for t, _, _ in _imports(m) if t != m} for m in MODULES}


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph.get(child, ())))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return found


def test_the_package_has_no_import_cycle() -> None:
    assert _cycles(_graph()) == []


def test_no_module_imports_another_modules_private_name() -> None:
    reaching = [
        f"{MODULES[m].relative_to(PACKAGE.parent)}:{line}: {target}.{name}"
        for m in MODULES
        for target, name, line in _imports(m)
        if name.startswith("_") and not name.startswith("__") and target != m
    ]
    assert reaching == []


def test_no_module_reads_another_modules_private_name_through_its_alias() -> None:
    """``port._helper`` is the same reach as ``from port import _helper``."""
    reaching = [
        f"{MODULES[m].relative_to(PACKAGE.parent)}:{line}: {target}.{name}"
        for m in MODULES
        for target, name, line in _private_reads(m)
    ]
    assert reaching == []


@pytest.mark.parametrize(
    ("graph", "cycles"),
    [
        ({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}, [["a", "b", "c"]]),
        ({"a": {"b"}, "b": set()}, []),
        ({"a": {"b"}, "b": {"a"}, "c": {"d"}, "d": {"c"}}, [["a", "b"], ["c", "d"]]),
    ],
)
def test_the_cycle_finder_finds_cycles(graph, cycles) -> None:
    """The check above can fail: a graph with cycles is reported, one without is not."""
    assert sorted(_cycles(graph)) == cycles
