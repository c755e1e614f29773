"""Processes that write the same partition take turns: each hands the log over when
another waits, and every append lands."""

from __future__ import annotations

import os
import subprocess
import sys

from pylog import Log
from tests.clients.conftest import _REPO, make_topic

APPENDS = 15
_CHILD = """
import sys
from pylog.clients.writers import WriterPool
pool = WriterPool.for_root(sys.argv[1])
for i in range({n}):
    with pool.writer("t", 0, max_block_ms=30_000) as log:
        log.append([b"%s-%d" % (sys.argv[2].encode(), i)])
pool.release()
"""


def test_two_processes_appending_to_one_partition_take_turns(root):
    make_topic(root, "t", 1)
    env = dict(os.environ, PYTHONPATH=_REPO + os.pathsep + os.environ.get("PYTHONPATH", ""))
    children = [subprocess.Popen([sys.executable, "-c", _CHILD.format(n=APPENDS), root, name], env=env)
                for name in ("a", "b")]
    assert [c.wait(120) for c in children] == [0, 0]
    with Log.open(os.path.join(root, "t-0"), read_only=True) as log:
        values = [r.value for r in log.records()]
    for name in (b"a", b"b"):
        assert [v for v in values if v.startswith(name)] == [b"%s-%d" % (name, i) for i in range(APPENDS)]
