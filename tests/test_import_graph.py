"""Imports run one way (cli and spark -> clients -> coordinator -> logdir -> manager/log ->
storage): no module of pylog/ imports, at the top or inside a function, a module that imports
it back, directly or through others; and pylog's modules import each other at the top, where
a reader sees them, but for the few function-level imports listed here with their reasons. A
violation fails here, naming the modules."""

from __future__ import annotations

import ast
import functools
import os
import subprocess
import sys
from pathlib import Path

PYLOG = Path(__file__).resolve().parent.parent / "pylog"


@functools.lru_cache(maxsize=None)
def parsed(path: Path) -> ast.Module:
    """``path``'s syntax tree, parsed once a session: these tests walk pylog's files many times."""
    return ast.parse(path.read_text(encoding="utf-8"))


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
    return {name: imported_modules(parsed(path), names) - {name}
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


_NUMPY = "loads numpy on first use: ``import pylog`` does not need it (~0.1 s)"
_OBJECT_STORAGE = "object storage (tiered layouts, fsspec) loads for a URL or a remote_storage: a local log needs none of it"
_FIRST_REQUEST = "a coordinator loads with the server's first group or transaction request: its first answer needs neither"
#: The imports of pylog's own modules a function may make, each with its reason.
LAZY_IMPORTS = {
    ("pylog.clients.fetcher", "pylog.record.columns_scratch"): _NUMPY,
    ("pylog.segment.fetch", "pylog.record.columnar"): _NUMPY,
    ("pylog.record.arrow", "pylog.record.columnar"): _NUMPY,
    ("pylog.record.backend", "pylog.record.vector_decode"): _NUMPY,
    ("pylog.record.backend", "pylog.record.vector_encode"): _NUMPY,
    ("pylog.record.backend", "pylog._speedups"): "the optional C extension (absent without a compiler, "
                                                "or switched off by PYLOG_NO_SPEEDUPS), loaded by the backend alone",
    ("pylog.spark", "pylog.spark.source"): "pyspark's entry point: importing pylog.spark loads no Spark code until used",
    ("pylog.cli.serve", "pylog.serve"): "kafka-python, of the extra 'serve': `pylog serve` without it says so in one line",
    ("pylog.cli.main", "pylog.spark.jvm"): "only `pylog --version` lists the JVM readers: no command loads them to start",
    ("pylog.log.log", "pylog.remote.log_dir"): _OBJECT_STORAGE,
    ("pylog.manager", "pylog.remote.log_dir"): _OBJECT_STORAGE,
    ("pylog.manager", "pylog.remote.manager"): _OBJECT_STORAGE,
    ("pylog.serve.kafka_apis", "pylog.coordinator.group_coordinator"): _FIRST_REQUEST,
    ("pylog.serve.kafka_apis", "pylog.coordinator.txn_coordinator"): _FIRST_REQUEST,
    ("pylog.serve.kafka_apis", "pylog.serve.transactions"): _FIRST_REQUEST,
}


def imports_inside_functions(root: Path = PYLOG) -> list[tuple[str, str]]:
    """(module, pylog module it imports) for each import of pylog inside a function (an
    import under a module-level ``try`` or ``if`` is at the top)."""
    found = []
    for path in root.rglob("*.py"):
        tree = parsed(path)
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


def test_the_package_and_the_record_codec_are_on_no_import_circle():
    graph = import_graph()
    assert "pylog.record.batch" in graph["pylog.record"]
    found = [sorted(c) for c in circles(graph) if any(m == "pylog" or m.startswith("pylog.record") for m in c)]
    assert not found, "import circles through pylog or its record codec:\n" + "\n".join(" -> ".join(c) for c in found)


#: The record codec and the modules that pick its implementation: they import pylog's modules
#: at the top, except those in NUMPY_LAZY.
CODEC_MODULES = ("pylog.record.", "pylog.segment.fetch", "pylog.errors", "pylog.listing")

#: (module, module it imports inside a function), each for the same reason: the imported
#: module imports numpy (~0.1 s) at its top, and ``import pylog`` does not need it.
NUMPY_LAZY = {("pylog.record.backend", "pylog.record.vector_decode"),
              ("pylog.record.backend", "pylog.record.vector_encode"),
              ("pylog.record.arrow", "pylog.record.columnar"),
              ("pylog.segment.fetch", "pylog.record.columnar")}


def top_level_imports(module: str) -> set[str]:
    path = PYLOG.parent / (module.replace(".", "/") + ".py")
    tree = parsed(path)
    return {alias.name for node in tree.body if isinstance(node, ast.Import) for alias in node.names}


def test_the_record_codec_imports_pylog_at_the_top_except_the_modules_importing_numpy():
    hidden = [(module, imported) for module, imported in imports_inside_functions()
              if module.startswith(CODEC_MODULES) and (module, imported) not in NUMPY_LAZY
              and imported != "pylog._speedups"]  # the optional C extension, loaded by backend.py alone
    assert not hidden, "imports of pylog inside functions of the record codec: " + repr(hidden)
    for _, lazy in NUMPY_LAZY:
        assert "numpy" in top_level_imports(lazy), f"{lazy} no longer imports numpy: import it at the top"


def test_only_the_backend_loads_the_c_extension():
    loaders = set()
    for path in PYLOG.rglob("*.py"):
        for node in ast.walk(parsed(path)):
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module:
                names = [node.module] + [f"{node.module}.{alias.name}" for alias in node.names]
            else:
                continue
            if "pylog._speedups" in names:
                loaders.add(module_name(path))
    assert loaders == {"pylog.record.backend"}


def test_import_pylog_leaves_numpy_unloaded():
    out = subprocess.run([sys.executable, "-c", "import sys, pylog; print('numpy' in sys.modules)"],
                         capture_output=True, text=True, timeout=60,
                         env={**os.environ, "PYTHONPATH": str(PYLOG.parent)})
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "False"


def test_the_partition_log_is_on_no_import_circle():
    graph = import_graph()
    assert "pylog.remote.location" in graph["pylog.log.log"]  # Log.open tells a URL from a path there
    found = [sorted(c) for c in circles(graph) if any(m == "pylog.log" or m.startswith("pylog.log.") for m in c)]
    assert not found, "import circles through the partition log:\n" + "\n".join(" -> ".join(c) for c in found)


OPEN_A_REMOTE_PARTITION_AFTER_THE_REMOTE_LOG = """
import pylog.remote.log  # first: the remote log, then the partition log whose parts it reads with
import os, sys
import fsspec
from pylog.log import Log
with Log.open(os.path.join(sys.argv[1], "events-0")) as log:
    log.append([b"a", b"b"])
store = fsspec.filesystem("memory")
for name in os.listdir(os.path.join(sys.argv[1], "events-0")):
    with open(os.path.join(sys.argv[1], "events-0", name), "rb") as f:
        store.pipe(f"/bucket/events-0/{name}", f.read())
with Log.open("memory://bucket/events-0", read_only=True) as remote:
    print(type(remote).__name__, [r.value for r in remote.records()])
"""


def test_log_open_reaches_object_storage_whichever_module_is_imported_first(tmp_path):
    out = subprocess.run([sys.executable, "-W", "ignore", "-c", OPEN_A_REMOTE_PARTITION_AFTER_THE_REMOTE_LOG,
                          str(tmp_path)], capture_output=True, text=True, timeout=120,
                         env={**os.environ, "PYTHONPATH": str(PYLOG.parent)})
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "RemoteLog [b'a', b'b']"
