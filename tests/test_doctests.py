"""Every docstring example in the ``pylog`` package runs in the default ``pytest`` run.

The examples are collected here (not with ``--doctest-modules``) so that a plain
``pytest`` from the checkout root runs them against the package on the path, whatever
the test paths given.
"""

from __future__ import annotations

import doctest
import importlib
import pkgutil

import pytest

import pylog

#: Modules that cannot be imported without an optional dependency, and that dependency.
_OPTIONAL = {"pylog.spark": "pyspark", "pylog.serve": "kafka", "pylog.cli.serve": "kafka", "pylog.testing": "kafka"}


def _module_names() -> list[str]:
    names = ["pylog"]
    for info in pkgutil.walk_packages(pylog.__path__, prefix="pylog."):
        if not info.name.endswith("__main__"):  # importing it runs the command line
            names.append(info.name)
    return sorted(names)


def _examples() -> list:
    finder = doctest.DocTestFinder(exclude_empty=True)
    out = []
    for name in _module_names():
        optional = next((dep for prefix, dep in _OPTIONAL.items()
                         if name == prefix or name.startswith(prefix + ".")), None)
        if optional is not None:
            try:
                importlib.import_module(optional)
            except ImportError:
                continue
        module = importlib.import_module(name)
        for test in finder.find(module, name):
            if test.examples and test.name.startswith(name):
                out.append(pytest.param(test, id=test.name))
    return out


EXAMPLES = _examples()


def test_the_package_has_examples():
    assert len(EXAMPLES) >= 10


@pytest.mark.parametrize("example", EXAMPLES)
def test_docstring_example(example):
    report: list[str] = []
    runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS)
    result = runner.run(example, out=report.append)
    assert result.failed == 0, "".join(report)
