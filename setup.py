"""Builds the optional C speedups; all other metadata lives in pyproject.toml.

``pylog._speedups`` holds the two hot loops of the record format (encode and decode of
v2 records). It is optional: without a C compiler the build skips it and pylog uses its
pure-Python code paths, with the same results.
"""

from setuptools import Extension, setup

setup(
    ext_modules=[
        Extension("pylog._speedups", ["pylog/_native/speedups.c"], optional=True,
                  extra_compile_args=["-O2"]),
    ],
)
