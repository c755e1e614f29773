"""Processes that write the same partition take turns: each hands the log over when
another waits, and every append lands."""

from __future__ import annotations

import os
import subprocess
import sys
import threading

from pylog import Log
from pylog.clients.writers import WriterPool
from pylog.errors import PylogError
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


def test_threads_of_one_process_opening_a_partition_at_once_share_one_log(root):
    make_topic(root, "t", 1)
    pool = WriterPool.for_root(root)
    start = threading.Barrier(8)
    errors, appended = [], []

    def append(i):
        start.wait()
        try:
            with pool.writer("t", 0, max_block_ms=2000) as log:
                appended.append(log.append([b"%d" % i]).first_offset)
        except PylogError as e:
            errors.append(e)
    threads = [threading.Thread(target=append, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    pool.release()
    assert errors == []
    assert sorted(appended) == list(range(8))
