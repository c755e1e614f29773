"""Run codec tests against both implementations: the C speedups (when built) and the
pure-Python/numpy paths pylog uses without a compiler."""

from __future__ import annotations

import contextlib

import pytest

import pylog.record.batch as _batch
import pylog.record.columnar as _columnar
import pylog.record.encode as _encode

_MODULES = (_batch, _encode, _columnar)
IMPLEMENTATIONS = ["c", "python"]


@contextlib.contextmanager
def implementation(name: str):
    """Use the C speedups (``"c"``) or hide them (``"python"``) inside the block."""
    saved = [m._speedups for m in _MODULES]
    if name == "c" and saved[0] is None:
        pytest.skip("pylog._speedups is not built")
    try:
        if name == "python":
            for m in _MODULES:
                m._speedups = None
        yield
    finally:
        for m, s in zip(_MODULES, saved):
            m._speedups = s


@pytest.fixture(params=IMPLEMENTATIONS)
def impl(request):
    """Parametrise a test over both implementations."""
    with implementation(request.param):
        yield request.param
