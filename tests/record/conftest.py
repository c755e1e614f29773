"""Run codec tests once per backend of pylog.record.backend: the C extension (when
built), numpy and pure Python."""

from __future__ import annotations

import pytest

from pylog.record import backend


@pytest.fixture(params=backend.NAMES)
def impl(request):
    """Parametrise a test over every backend, switched with ``backend.use``; ``c`` is
    skipped where the C extension is not built."""
    if request.param not in backend.available():
        pytest.skip("pylog._speedups is not built (or PYLOG_NO_SPEEDUPS is set)")
    with backend.use(request.param):
        yield request.param
