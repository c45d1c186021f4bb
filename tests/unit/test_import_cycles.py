"""No import cycle between deployctl's packages, nor between its modules (imports inside functions and under
``TYPE_CHECKING`` count: a cycle hidden in a function is still one). import-linter's layers state the order;
this shows there is an order to state. grimp is the graph import-linter itself builds."""

from __future__ import annotations

from typing import Callable, Iterable

import grimp
import pytest


def cycles(nodes: Iterable[str], successors: Callable[[str], Iterable[str]]) -> list[list[str]]:
    """The strongly connected components of more than one node (Tarjan), iteratively."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    for root in nodes:
        if root in index:
            continue
        work = [(root, iter(sorted(successors(root))))]
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
                    work.append((child, iter(sorted(successors(child)))))
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


def test_the_cycle_finder_finds_a_cycle() -> None:
    edges = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert cycles(sorted(edges), lambda n: edges[n]) == [["a", "b", "c"]]


@pytest.fixture(scope="module")
def graph() -> grimp.ImportGraph:
    return grimp.build_graph("deployctl")


def _package(module: str) -> str:
    return ".".join(module.split(".")[:2])


def test_no_import_cycle_between_modules(graph: grimp.ImportGraph) -> None:
    modules = sorted(graph.modules)
    assert cycles(modules, graph.find_modules_directly_imported_by) == []


def test_no_import_cycle_between_packages(graph: grimp.ImportGraph) -> None:
    edges: dict[str, set[str]] = {}
    for module in graph.modules:
        for imported in graph.find_modules_directly_imported_by(module):
            if _package(module) != _package(imported) and "deployctl" not in (_package(module), _package(imported)):
                edges.setdefault(_package(module), set()).add(_package(imported))
    packages = sorted({_package(m) for m in graph.modules})
    assert len(packages) > 10
    assert cycles(packages, lambda p: edges.get(p, set())) == []
