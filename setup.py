"""Builds the optional C speedups and the optional Spark jar; all other metadata lives in pyproject.toml.

``pylog._speedups`` holds the two hot loops of the record format (encode and decode of
v2 records). It is optional: without a C compiler the build skips it and pylog uses its
pure-Python code paths, with the same results.

The JVM reader's jar (docs/spark.md, "The JVM reader") is compiled into the package when a
JDK and Spark's jars are found at install time; else one line says why, and the jar is
built on first use.
"""

import importlib.util
from pathlib import Path

from setuptools import Extension, setup
from setuptools.command.build_py import build_py

HERE = Path(__file__).resolve().parent


class build_py_with_jar(build_py):
    """``build_py``, then the Spark jar into the built package (into the checkout when editable)."""

    def run(self):
        super().run()
        # pylog's own imports need its dependencies, absent from the build environment: load by path
        spec = importlib.util.spec_from_file_location("_pylog_jvm_build", HERE / "pylog/spark/jvm/__init__.py")
        jvm = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(jvm)
        root = HERE if self.editable_mode else Path(self.build_lib)
        jvm.build_packaged(root / "pylog" / "spark" / "jvm")


setup(
    cmdclass={"build_py": build_py_with_jar},
    ext_modules=[
        Extension("pylog._speedups", ["pylog/_native/speedups.c"], optional=True,
                  extra_compile_args=["-O2"]),
    ],
)
