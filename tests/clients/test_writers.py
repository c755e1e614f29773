"""Processes that write the same partition take turns: each hands the log over when
another waits, and every append lands."""

from __future__ import annotations

import os
import subprocess
import sys
import threading

from pylog import Log
from pylog.logdir.writers import WriterPool
from pylog.errors import PylogError
from tests.clients.conftest import _REPO, make_topic

APPENDS = 15
_CHILD = """
import sys
from pylog.logdir.writers import WriterPool
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


def test_held_logs_take_a_topic_s_altered_settings_at_once(root):
    """``pylog configs --alter`` in another process while this one holds the topic's log:
    the held log takes the new settings (its next appends roll at the new size), as a
    Kafka broker applies altered topic configs, without a reopen."""
    from tests.waiting import wait_until
    make_topic(root, "t", 1)
    pool = WriterPool.for_root(root)

    def held(read):
        with pool.writer("t", 0) as log:
            return read(log)
    try:
        assert held(lambda log: log.append([b"a"]).first_offset) == 0
        out = subprocess.run([sys.executable, "-m", "pylog.cli.main", "configs", root, "--alter", "--topic", "t",
                              "--add-config", "segment.bytes=2000,retention.ms=5000"], capture_output=True,
                             env=dict(os.environ, PYTHONPATH=_REPO), timeout=120)
        assert out.returncode == 0, out.stderr
        wait_until(lambda: held(lambda log: log.config.segment_bytes) == 2000, "the held log to take the settings")
        assert held(lambda log: log.config.retention_ms) == 5000
        for i in range(30):
            held(lambda log: log.append([b"x" * 200]))
        assert held(lambda log: len(log.segments)) > 2
    finally:
        pool.release()


def test_a_topic_configs_file_that_does_not_parse_leaves_the_held_logs_settings(root):
    """A hand-edited ``topic-configs.json`` that does not parse: taking the topic configs,
    which the hand-off thread runs, neither raises (that would end the thread, and with it
    the hand-offs) nor changes the held log's settings."""
    make_topic(root, "t", 1)
    pool = WriterPool.for_root(root)
    try:
        with pool.writer("t", 0) as log:
            log.append([b"a"])
            size = log.config.segment_bytes
        with open(os.path.join(root, "topic-configs.json"), "w") as f:
            f.write("{not json")
        pool.take_topic_configs()
        with pool.writer("t", 0) as log:
            assert log.config.segment_bytes == size
    finally:
        pool.release()
