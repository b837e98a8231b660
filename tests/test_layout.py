"""The layout ARCHITECTURE.md describes, checked on the source: no import cycles
between the project's modules (every import counts, also those under `if
TYPE_CHECKING:` and inside functions), shared utilities depend on nothing else,
only the command imports the command package, and benchmarks do not import tests."""

import ast
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
PACKAGES = (
    "common",
    "logflume",
    "broker",
    "agent",
    "sources",
    "sinks",
    "spark_etl",
    "testkit",
    "console",
)


def module_name(path: Path) -> str:
    parts = path.relative_to(REPO).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def project_modules(packages=PACKAGES) -> dict[str, Path]:
    return {module_name(f): f for p in packages for f in sorted((REPO / p).rglob("*.py"))}


def imports_of(path: Path) -> set[str]:
    """Dotted names a module imports anywhere: at module level, under `if
    TYPE_CHECKING:` and inside functions alike (a deferred import is still a
    dependency; counting it keeps a circle from hiding in a function body)."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            found.update(f"{node.module}.{a.name}" for a in node.names)
    return found


def resolve(name: str, modules: dict[str, Path]) -> str | None:
    """The project module that `name` (a module, or a name inside one) loads."""
    while name and name not in modules:
        name = name.rpartition(".")[0]
    return name or None


def import_graph(modules: dict[str, Path]) -> dict[str, set[str]]:
    graph = {}
    for name, path in modules.items():
        deps = {resolve(i, modules) for i in imports_of(path)}
        graph[name] = {d for d in deps if d and d != name}
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found = []
    for root in graph:
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
                    work.append((child, iter(sorted(graph[child]))))
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


def test_cycle_finder_finds_a_cycle_and_only_cycles():
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}, "e": set()}
    assert cycles(graph) == [["a", "b", "c"]]
    assert cycles({"a": {"b"}, "b": set()}) == []


def test_no_import_cycles_between_project_modules():
    assert cycles(import_graph(project_modules())) == []


def test_shared_utilities_import_no_other_package():
    modules = project_modules()
    graph = import_graph(modules)
    for name in (m for m in modules if m.split(".")[0] == "common"):
        assert {d.split(".")[0] for d in graph[name]} <= {"common"}, (name, graph[name])


def test_only_the_command_imports_the_command_package():
    modules = project_modules()
    graph = import_graph(modules)
    for name, deps in graph.items():
        if name.split(".")[0] != "logflume":
            assert not [d for d in deps if d.split(".")[0] == "logflume"], (name, deps)


def test_benchmarks_do_not_import_tests():
    for path in sorted((REPO / "bench").rglob("*.py")):
        imported = imports_of(path)
        assert not [i for i in imported if i.split(".")[0] == "tests"], path
