"""The layers of ldpsim.tasks and ldpsim.pipeline: no module imports one of a layer above
its own (the import-linter contracts in pyproject.toml, run by `make test`), and no two
modules import each other, directly or through others, anywhere in the package.

grimp, import-linter's graph, reads every import: at the top of a module, inside a
function and under ``if TYPE_CHECKING:``.
"""

from __future__ import annotations

import grimp


def strongly_connected(edges: dict[str, set[str]]) -> list[list[str]]:
    """The import circles of a graph: its strongly connected components of two or more
    modules (Tarjan's algorithm, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    out: list[list[str]] = []
    for root in sorted(edges):
        if root in index:
            continue
        work = [(root, iter(sorted(edges[root])))]
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
                    work.append((child, iter(sorted(edges[child]))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    out.append(sorted(component))
    return out


def test_strongly_connected_finds_a_circle_through_three_modules():
    edges = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert strongly_connected(edges) == [["a", "b", "c"]]


def test_no_import_circle_in_tasks_or_pipeline():
    graph = grimp.build_graph("ldpsim.tasks", "ldpsim.pipeline", include_external_packages=False)
    edges = {m: set(graph.find_modules_directly_imported_by(m)) for m in graph.modules}
    assert len(edges) > 100  # every module of both packages
    assert strongly_connected(edges) == []
