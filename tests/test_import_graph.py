"""Imports run one way: no client module of pylog/clients/ (the Producer and the Consumer
and the classes they are made of) imports, at the top or inside a function, a module that
imports it back, directly or through others; and the modules of pylog/clients/ import
pylog's modules at the top, where a reader sees them. A violation fails here, naming the
modules."""

from __future__ import annotations

import ast
from pathlib import Path

PYLOG = Path(__file__).resolve().parent.parent / "pylog"

#: The modules of pylog/clients/ that the coordinators stand on, to move below clients/ and
#: coordinator/; the rest are the clients themselves.
PLUMBING: set[str] = set()


def module_name(path: Path, root: Path = PYLOG) -> str:
    parts = list(path.relative_to(root.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def imported_modules(tree: ast.AST, modules: set[str]) -> set[str]:
    """The pylog modules ``tree`` imports anywhere (``from pylog.x import y`` counts as
    ``pylog.x.y`` when that is a module, else as ``pylog.x``)."""
    out = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            for alias in node.names:
                full = f"{node.module}.{alias.name}"
                out.add(full if full in modules else node.module)
        elif isinstance(node, ast.Import):
            out.update(alias.name for alias in node.names)
    return out & modules


def import_graph(root: Path = PYLOG) -> dict[str, set[str]]:
    paths = {module_name(p, root): p for p in root.rglob("*.py")}
    names = set(paths)
    return {name: imported_modules(ast.parse(path.read_text(encoding="utf-8")), names) - {name}
            for name, path in paths.items()}


def circles(graph: dict[str, set[str]]) -> list[set[str]]:
    """The strongly connected components of more than one module (Tarjan's algorithm,
    iterative). O(modules + imports)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found = []
    for start in sorted(graph):
        if start in index:
            continue
        work = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
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
                component = set()
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.add(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(component)
    return found


def test_no_client_module_is_on_an_import_circle():
    graph = import_graph()
    clients = {m for m in graph if m.startswith("pylog.clients.") and m not in PLUMBING}
    assert "pylog.clients.consumer" in clients
    new = [sorted(c) for c in circles(graph) if c & clients]
    assert not new, "import circles (each module imports the next, at the top or in a function):\n" + \
        "\n".join(" -> ".join(c) for c in new)


def test_the_circle_finder_finds_a_circle_through_a_function_level_import(tmp_path):
    package = tmp_path / "pylog"
    (package / "clients").mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "clients" / "__init__.py").write_text("")
    (package / "clients" / "a.py").write_text("from pylog.clients import b\n")
    (package / "clients" / "b.py").write_text("def f():\n    from pylog.clients.a import x\n")
    (package / "clients" / "c.py").write_text("import pylog.clients.a\n")
    assert circles(import_graph(package)) == [{"pylog.clients.a", "pylog.clients.b"}]


#: Imports a client module may make inside a function: modules that load an optional
#: dependency (numpy) on first use.
LAZY_IMPORTS = {("pylog.clients.fetcher", "pylog.record.columnar")}


def imports_inside_functions(root: Path = PYLOG) -> list[tuple[str, str]]:
    """(module, pylog module it imports) for each import of pylog below a module's top level."""
    found = []
    for path in root.rglob("*.py"):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        top = {id(node) for node in tree.body}
        for node in ast.walk(tree):
            if isinstance(node, (ast.Import, ast.ImportFrom)) and id(node) not in top:
                names = [node.module] if isinstance(node, ast.ImportFrom) else [a.name for a in node.names]
                found += [(module_name(path, root), n) for n in names if n and n.split(".")[0] == "pylog"]
    return found


def test_client_modules_import_pylog_at_the_top():
    hidden = [(module, imported) for module, imported in imports_inside_functions()
              if module.startswith("pylog.clients.") and (module, imported) not in LAZY_IMPORTS]
    assert not hidden, "imports of pylog inside functions of client modules: " + repr(hidden)
