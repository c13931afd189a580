"""The layers hold: each unit imports only the layers below it, no import circle anywhere, the doc is the code's."""

from __future__ import annotations

import pytest

from tests import architecture as arch


def test_every_unit_has_a_layer() -> None:
    """A new subpackage or top-level module is placed in ``LAYERS`` before it is used."""
    units = {arch.unit(m) for m in arch.modules()}
    assert units == set(arch.LAYER_OF), units ^ set(arch.LAYER_OF)


def test_each_unit_imports_only_the_layers_below_it() -> None:
    """Function-level imports count: one that reaches up is a circle waiting for the module that closes it."""
    wrong = [
        f"{imp.source}:{imp.line} imports {imp.target} ({arch.unit(imp.source)} may not import {arch.unit(imp.target)})"
        for imp in arch.imports()
        if arch.unit(imp.source) != arch.unit(imp.target)
        and arch.LAYER_OF[arch.unit(imp.target)] >= arch.LAYER_OF[arch.unit(imp.source)]
    ]
    assert not wrong, "\n".join(wrong)


def test_no_import_circle_between_modules() -> None:
    """Between any two modules, whether the import is at the top or inside a function (an annotation-only import
    under ``TYPE_CHECKING`` is no circle at run time and is left out)."""
    graph: dict[str, set[str]] = {m: set() for m in arch.modules()}
    for imp in arch.imports():
        if not imp.typing_only:
            graph[imp.source].add(imp.target)
    circles = _circles(graph)
    assert not circles, circles


def test_the_circle_finder_finds_one() -> None:
    """The check above can fail: a circle through a function-level import is found."""
    assert _circles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


def test_architecture_doc_is_generated_from_the_code() -> None:
    """docs/architecture.md's tables and picture are the code's: run ``python -m tests.architecture`` after moving a
    module."""
    assert arch.current() == arch.render(), "docs/architecture.md is stale: run `python -m tests.architecture`"


@pytest.mark.parametrize("unit", [u for u in arch.LAYER_OF if u.startswith("_") and u != "_require"])
def test_each_package_says_what_it_owns_and_may_import(unit: str) -> None:
    summary = arch.docstring_summary(unit)
    assert len(summary) > 20, f"{unit} has no docstring saying what it owns"


def _circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan's, iterative), each sorted."""
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
