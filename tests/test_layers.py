"""The package's layers, read from its source with `ast` (nothing is imported, no JAX).

The neutral layers (the gate, the outputs, the corpus, the subcommands, the options and the
session collector) reach a framework only through the `Backend` protocol
(`backends/__init__.py`): none imports a module of ``backends/jax`` or ``backends/torch``,
not even inside a function or under ``TYPE_CHECKING``. And the package has no import
circle: every import, function-local ones included, resolved to the package's modules.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path

import pytest

import pytest_jaxcompile

PACKAGE = "pytest_jaxcompile"
ROOT = Path(pytest_jaxcompile.__file__).parent
NEUTRAL = ("gate", "output", "corpus", "cli", "options", "session")
BACKEND_PACKAGES = (f"{PACKAGE}.backends.jax", f"{PACKAGE}.backends.torch")


@dataclass(frozen=True)
class Import:
    """One import statement's target, resolved to a module of the package."""

    module: str  # the importing module
    line: int
    target: str  # the imported module (the longest one of the package the name reaches)
    text: str  # the statement as written


def modules() -> dict[str, Path]:
    """Every module of the package by dotted name (a package by its own name)."""
    found = {}
    for path in sorted(ROOT.rglob("*.py")):
        parts = list(path.relative_to(ROOT.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        found[".".join(parts)] = path
    return found


def _resolve(name: str, known: Mapping[str, Path]) -> str | None:
    while name and name not in known:
        name = name.rpartition(".")[0]
    return name or None


def imports_of(module: str, path: Path, known: Mapping[str, Path]) -> Iterator[Import]:
    """Every import in the module's source, at any depth, that reaches the package."""
    tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    for node in ast.walk(tree):
        if not isinstance(node, (ast.Import, ast.ImportFrom)):
            continue
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        else:
            base = node.module or ""
            if node.level:
                anchor = package
                for _ in range(node.level - 1):
                    anchor = anchor.rpartition(".")[0]
                base = f"{anchor}.{base}" if base else anchor
            # ``from pkg import name``: the submodule `name` where there is one, else `pkg`.
            names = [
                f"{base}.{alias.name}" if f"{base}.{alias.name}" in known else base
                for alias in node.names
            ]
        targets = {_resolve(name, known) for name in names if name.startswith(PACKAGE)}
        for target in sorted(filter(None, targets - {module})):
            yield Import(module, node.lineno, target, ast.unparse(node))


def import_graph() -> dict[str, list[Import]]:
    known = modules()
    return {module: list(imports_of(module, path, known)) for module, path in known.items()}


def is_neutral(module: str) -> bool:
    layer = module.removeprefix(f"{PACKAGE}.").split(".")[0]
    return layer in NEUTRAL


def find_cycle(graph: Mapping[str, list[Import]]) -> list[Import] | None:
    """One import circle as the imports that make it, or None when there is none."""
    done: set[str] = set()
    path: list[Import] = []
    on_path: dict[str, int] = {}  # module -> its position in `path`

    def visit(module: str) -> list[Import] | None:
        on_path[module] = len(path)
        for edge in graph.get(module, []):
            if edge.target in on_path:
                return [*path[on_path[edge.target] :], edge]
            if edge.target not in done:
                path.append(edge)
                found = visit(edge.target)
                if found is not None:
                    return found
                path.pop()
        del on_path[module]
        done.add(module)
        return None

    for start in sorted(graph):
        if start not in done:
            cycle = visit(start)
            if cycle is not None:
                return cycle
    return None


def describe(cycle: list[Import]) -> str:
    return "\n".join(
        f"  {edge.module}:{edge.line} -> {edge.target} ({edge.text})" for edge in cycle
    )


def test_neutral_layers_reach_backends_only_through_the_protocol() -> None:
    graph = import_graph()
    neutral = [module for module in graph if is_neutral(module)]
    assert f"{PACKAGE}.gate.judging" in neutral and f"{PACKAGE}.gate.view" in neutral
    assert f"{PACKAGE}.session" in neutral
    offending = [
        f"{edge.module}:{edge.line} imports {edge.target} ({edge.text})"
        for module in neutral
        for edge in graph[module]
        if edge.target.startswith(BACKEND_PACKAGES)
    ]
    assert not offending, (
        "a neutral layer imports a backend's module; reach it through the Backend protocol "
        "(backends/__init__.py) instead:\n" + "\n".join(offending)
    )


def test_the_package_has_no_import_circle() -> None:
    graph = import_graph()
    # The graph sees function-local imports: the activation imports each output when enabled.
    activation = graph[f"{PACKAGE}.activation"]
    assert f"{PACKAGE}.output.artifacts" in {edge.target for edge in activation}
    cycle = find_cycle(graph)
    assert cycle is None, "import circle:\n" + describe(cycle or [])


@pytest.mark.parametrize(
    ("edges", "circle"),
    [
        ({"a": ["b"], "b": ["c"], "c": ["a"]}, ["a", "b", "c", "a"]),
        ({"a": ["b", "c"], "b": ["c"], "c": ["d"], "d": ["b"]}, ["b", "c", "d", "b"]),
        ({"a": ["b", "c"], "b": ["c"], "c": []}, None),
    ],
)
def test_find_cycle_names_the_circle(edges: dict[str, list[str]], circle: list[str] | None) -> None:
    graph = {
        module: [
            Import(module, line, target, f"import {target}")
            for line, target in enumerate(targets, 1)
        ]
        for module, targets in edges.items()
    }
    found = find_cycle(graph)
    assert (None if found is None else [found[0].module] + [e.target for e in found]) == circle
    if found is not None:
        assert describe(found).splitlines()[0].startswith(f"  {found[0].module}:")
