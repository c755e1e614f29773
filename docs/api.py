"""Build pylog's API reference (HTML, from the docstrings) with pdoc.

    python docs/api.py [OUTPUT_DIR]        # default build/api; open OUTPUT_DIR/index.html

Every public module of the package gets a page (pdoc alone would list only the names in
``pylog.__all__``); modules whose optional dependencies are missing (``pylog.spark``
without pyspark) are left out with a note on stderr. tests/docs builds it on every run.
"""

from __future__ import annotations

import importlib
import pkgutil
import sys
import warnings
from pathlib import Path

import pdoc

import pylog


def public_modules() -> list[str]:
    """``pylog`` and every submodule whose dotted name has no ``_``-prefixed part and
    that imports here, with the names its ``__all__`` loads on first use loaded (pdoc reads
    a module's ``__dict__``, where a lazy name appears only once it has been used)."""
    names = ["pylog"]
    for info in pkgutil.walk_packages(pylog.__path__, "pylog."):
        if any(part.startswith("_") for part in info.name.split(".")):
            continue
        try:
            importlib.import_module(info.name)
        except ImportError as e:
            print(f"api reference: leaving out {info.name} ({e})", file=sys.stderr)
            continue
        names.append(info.name)
    for name in names:
        module = sys.modules[name]
        for public in getattr(module, "__all__", ()):
            getattr(module, public, None)
    return names


def build(output_dir: Path) -> list[str]:
    """Write the HTML reference into ``output_dir``; returns the modules documented."""
    modules = public_modules()
    pdoc.render.configure(docformat="restructuredtext", search=True)
    with warnings.catch_warnings():
        # a package that re-exports a function named like its submodule (pylog.retention.compact)
        # makes pdoc meet the submodule twice; it still writes the one page
        warnings.filterwarnings("ignore", "The module specification .* has already been added", UserWarning)
        pdoc.pdoc(*modules, output_directory=Path(output_dir))
    return modules


if __name__ == "__main__":
    out = Path(sys.argv[1] if len(sys.argv) > 1 else "build/api")
    print(f"{len(build(out))} modules documented in {out}/index.html")
