"""Named points where a test can make the process die (SIGKILL) mid-operation.

``PYLOG_FAILPOINTS="swap.renamed,cleaned.written"`` in the environment arms them; unset,
``hit`` is one dictionary lookup. Used by the crash tests of compaction and retention.
"""

from __future__ import annotations

import os
import signal

_ARMED = frozenset(p for p in os.environ.get("PYLOG_FAILPOINTS", "").split(",") if p)


def hit(name: str) -> None:
    """Die here if the failpoint ``name`` is armed."""
    if name in _ARMED:
        os.kill(os.getpid(), signal.SIGKILL)
