"""Imports run one way (cli and spark -> clients -> coordinator -> logdir -> manager/log ->
storage): no module of pylog/ imports, at the top or inside a function, a module that imports
it back, directly or through others; and pylog's modules import each other at the top, where
a reader sees them, but for the few function-level imports listed here with their reasons. A
violation fails here, naming the modules."""

from __future__ import annotations

import ast
from pathlib import Path

PYLOG = Path(__file__).resolve().parent.parent / "pylog"


def module_name(path: Path, root: Path = PYLOG) -> str:
    parts = list(path.relative_to(root.parent).parts)
    parts[-1] = parts[-1].split(".")[0]  # speedups.py, or _speedups.cpython-311-x86_64-linux-gnu.so
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
    extensions = {module_name(p, root) for p in root.rglob("*.so")}  # compiled: they import nothing of pylog
    names = set(paths) | extensions
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


def test_no_module_is_on_an_import_circle():
    graph = import_graph()
    assert "pylog.clients.consumer" in graph and "pylog.manager" in graph
    found = [sorted(c) for c in circles(graph)]
    assert not found, "import circles (each module imports the next, at the top or in a function):\n" + \
        "\n".join(" -> ".join(c) for c in found)


def test_a_compiled_module_imported_from_the_package_is_a_module_not_the_package(tmp_path):
    package = tmp_path / "pylog"
    package.mkdir()
    (package / "__init__.py").write_text("from pylog import a\n")
    (package / "a.py").write_text("from pylog import _speedups\n")
    (package / "_speedups.cpython-311-x86_64-linux-gnu.so").write_bytes(b"")
    assert import_graph(package)["pylog.a"] == {"pylog._speedups"}
    assert circles(import_graph(package)) == []


def test_the_circle_finder_finds_a_circle_through_a_function_level_import(tmp_path):
    package = tmp_path / "pylog"
    (package / "clients").mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "clients" / "__init__.py").write_text("")
    (package / "clients" / "a.py").write_text("from pylog.clients import b\n")
    (package / "clients" / "b.py").write_text("def f():\n    from pylog.clients.a import x\n")
    (package / "clients" / "c.py").write_text("import pylog.clients.a\n")
    assert circles(import_graph(package)) == [{"pylog.clients.a", "pylog.clients.b"}]


_NUMPY = "loads numpy (an optional dependency) on first use"
_OTHERS = "in an area changed elsewhere at the moment; to move to the top there"
#: The imports of pylog's own modules a function may make, each with its reason.
LAZY_IMPORTS = {
    ("pylog.clients.fetcher", "pylog.record.columnar"): _NUMPY,
    ("pylog.segment.fetch", "pylog.record.columnar"): _NUMPY,
    ("pylog.record.arrow", "pylog.record.columnar"): _NUMPY,
    ("pylog.record.batch", "pylog.record.scan"): _NUMPY,
    ("pylog.record.encode", "pylog.record.vector_encode"): _NUMPY,
    ("pylog.record.batch", "pylog.record.legacy"): _OTHERS,
    ("pylog.record.record", "pylog.layout"): _OTHERS,
    ("pylog.log.log", "pylog.remote.log_dir"): _OTHERS,
    **{("pylog.cli.consumer_groups", m): _OTHERS for m in (
        "pylog.coordinator.offsets_reader", "pylog.coordinator.group_coordinator", "pylog.coordinator.group_membership",
        "pylog.coordinator.partitioning", "pylog.log", "pylog.manager")},
    **{("pylog.spark", m): "pyspark's entry points: importing pylog.spark loads no Spark code until used"
       for m in ("pylog.spark.jvm", "pylog.spark.source", "pylog.errors")},
    ("pylog.spark.plan", "pylog.manager"): _OTHERS,
    ("pylog.spark.plan", "pylog.log"): _OTHERS,
    **{("pylog.spark.source", m): _OTHERS for m in ("pylog.remote.log_dir", "pylog.remote.store", "pylog.spark.write")},
}


def imports_inside_functions(root: Path = PYLOG) -> list[tuple[str, str]]:
    """(module, pylog module it imports) for each import of pylog inside a function (an
    import under a module-level ``try`` or ``if`` is at the top)."""
    found = []
    for path in root.rglob("*.py"):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for function in ast.walk(tree):
            if not isinstance(function, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
                continue
            for node in ast.walk(function):
                if isinstance(node, (ast.Import, ast.ImportFrom)):
                    names = [node.module] if isinstance(node, ast.ImportFrom) else [a.name for a in node.names]
                    found += [(module_name(path, root), n) for n in names if n and n.split(".")[0] == "pylog"]
    return found


def test_pylog_modules_import_pylog_at_the_top():
    hidden = sorted({found for found in imports_inside_functions() if found not in LAZY_IMPORTS})
    assert not hidden, "imports of pylog inside functions (move them to the top, or list them with a " \
                       "reason in LAZY_IMPORTS):\n" + "\n".join(f"{m} imports {i}" for m, i in hidden)


def test_every_allowed_function_level_import_is_still_made():
    stale = set(LAZY_IMPORTS) - set(imports_inside_functions())
    assert not stale, f"LAZY_IMPORTS lists imports no function makes any more: {sorted(stale)}"


def test_the_function_level_import_finder_skips_module_level_try_blocks(tmp_path):
    package = tmp_path / "pylog"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "a.py").write_text("try:\n    from pylog import b\nexcept ImportError:\n    b = None\n"
                                  "def f():\n    from pylog.c import x\n")
    assert imports_inside_functions(package) == [("pylog.a", "pylog.c")]
