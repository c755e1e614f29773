"""The API reference (pdoc, from the docstrings) builds, every public name has a docstring,
and every Sphinx-style cross-reference in a docstring (``:class:`X```, ``:meth:`Y``` ...)
names something that exists."""

from __future__ import annotations

import importlib
import importlib.util
import inspect
import re
from pathlib import Path

import pytest

import pylog

pdoc = pytest.importorskip("pdoc", reason="pdoc is not installed (extra 'dev')")


def _api_builder():
    """docs/api.py, the script that builds the reference."""
    path = Path(__file__).resolve().parents[2] / "docs" / "api.py"
    spec = importlib.util.spec_from_file_location("pylog_docs_api", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


API = _api_builder()

#: the classes whose public methods and properties must each have a docstring
DOCUMENTED_CLASSES = ["Log", "LogManager", "Topic", "Segment", "OffsetIndex", "TimeIndex", "FetchData", "Record",
                      "RecordBatch", "LogConfig"]
ROLE = re.compile(r":(?:class|func|meth|attr|mod|exc|data|obj):`~?([^`<>]+?)(?:\(\))?`")


def _own_doc(obj) -> str:
    if isinstance(obj, property):
        obj = obj.fget
    obj = getattr(obj, "__func__", obj)
    return (getattr(obj, "__doc__", None) or "").strip()


def public_names_without_docstring() -> list[str]:
    missing = [n for n in pylog.__all__ if n != "SPEEDUPS" and not inspect.getdoc(getattr(pylog, n))]
    for class_name in DOCUMENTED_CLASSES:
        cls = getattr(pylog, class_name)
        for name, member in vars(cls).items():
            routine = callable(getattr(member, "__func__", member)) or isinstance(member, property)
            if not name.startswith("_") and routine and not _own_doc(member):
                missing.append(f"{class_name}.{name}")
    return missing


def test_every_public_name_has_a_docstring():
    assert public_names_without_docstring() == []


def _lookup(path: str, namespaces: list) -> bool:
    """True if the dotted ``path`` is an importable object, or an attribute chain of one
    of ``namespaces`` (the docstring's class, its module, the pylog package)."""
    parts = path.split(".")
    for i in range(len(parts), 0, -1):
        try:
            obj = importlib.import_module(".".join(parts[:i]))
        except ImportError:
            continue
        if _chain(obj, parts[i:]):
            return True
    return any(_chain(ns, parts) for ns in namespaces)


def _chain(obj, names: list[str]) -> bool:
    for name in names:
        if isinstance(obj, type) and name in getattr(obj, "__annotations__", {}):
            return True  # a dataclass or NamedTuple field
        try:
            obj = getattr(obj, name)
        except AttributeError:
            return False
    return True


def _docs(module: "pdoc.doc.Module"):
    """(docstring, namespaces to resolve it in) of a module and everything documented in it."""
    yield module.docstring, [module.obj, pylog]
    stack = list(module.members.values())
    while stack:
        doc = stack.pop()
        if doc.modulename != module.modulename:
            continue
        owner = importlib.import_module(doc.modulename)
        cls = None
        if isinstance(doc, pdoc.doc.Class):
            stack += list(doc.own_members)
            cls = doc.obj
        elif "." in doc.qualname:
            cls = _resolve_class(owner, doc.qualname.rsplit(".", 1)[0])
        home = inspect.getmodule(cls if cls is not None else doc.obj)  # where a re-exported name is defined
        yield _written_here(doc), [ns for ns in (cls, owner, home, pylog) if ns is not None]


def _written_here(doc) -> str:
    """The docstring as written in pylog's source: pdoc shows an undocumented override
    with its base class's docstring (PySpark's, say), which is not pylog's to check."""
    if isinstance(doc, (pdoc.doc.Function, pdoc.doc.Class)):
        return inspect.cleandoc(getattr(doc.obj, "__doc__", None) or "")
    return doc.docstring


def _resolve_class(module, qualname: str):
    obj = module
    for name in qualname.split("."):
        obj = getattr(obj, name, None)
    return obj


def broken_cross_references() -> list[str]:
    broken = []
    for name in API.public_modules():
        module = pdoc.doc.Module(importlib.import_module(name))
        for text, namespaces in _docs(module):
            broken += [f"{module.modulename}: {m[1]}" for m in ROLE.finditer(text or "")
                       if not _lookup(m[1], namespaces)]
    return sorted(set(broken))


def test_every_cross_reference_in_a_docstring_resolves():
    assert broken_cross_references() == []


def test_the_reference_builds_with_a_page_per_module(tmp_path):
    modules = API.build(tmp_path)
    assert {"pylog", "pylog.log", "pylog.manager", "pylog.segment.segment", "pylog.index.offset_index"} <= set(modules)
    for name in modules:
        assert (tmp_path / (name.replace(".", "/") + ".html")).is_file(), name
    assert 'id="Log.append"' in (tmp_path / "pylog" / "log.html").read_text()


def test_the_cross_reference_check_sees_a_broken_one():
    assert _lookup("Log.append", [pylog]) and _lookup("pylog.segment.fetch.FetchData.transfer_to", [])
    assert not _lookup("Log.no_such_method", [pylog]) and not _lookup("pylog.nowhere.Thing", [])
    module = pdoc.doc.Module(importlib.import_module("pylog.log"))
    assert sum(len(ROLE.findall(text or "")) for text, _ in _docs(module)) > 3
