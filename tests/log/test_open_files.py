"""Open file descriptors are bounded: a log of many segments, a log dir of many partitions,
under a 64-descriptor limit; running out anyway raises StorageError, never a raw OSError."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest

from pylog import Log, LogManager, Record
from pylog.errors import InvalidConfigError
from pylog.segment.open_files import OpenFiles

LIMIT = textwrap.dedent("""
    import resource, sys
    resource.setrlimit(resource.RLIMIT_NOFILE, (64, 64))
    from pylog import Log, LogManager, Record
    from pylog.errors import StorageError
    root = sys.argv[1]
""")


def run_limited(body: str, *args) -> str:
    """Run ``body`` in a fresh interpreter whose descriptor limit is 64; its stdout."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in (os.getcwd(), os.environ.get("PYTHONPATH")) if p)}
    proc = subprocess.run([sys.executable, "-c", LIMIT + textwrap.dedent(body), *map(str, args)],
                          capture_output=True, text=True, env=env, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return proc.stdout


def test_read_only_reads_of_300_segments_under_64_descriptors(tmp_path):
    d = tmp_path / "t-0"
    with Log.open(d, segment_bytes=200) as log:
        for i in range(300):
            log.append([Record(b"%05d" % i + b"." * 100, timestamp=1_700_000_000_000 + i)])
        assert len(log.segments) == 300
    out = run_limited("""
        with Log.open(root + "/t-0", read_only=True) as log:
            values = [r.value[:5] for r in log.records()]
            assert values == [b"%05d" % i for i in range(300)], values[:5]
            for i in range(299, -1, -7):  # backwards: every read opens a released segment again
                assert log.read(i).records()[0].offset == i
                assert log.offset_for_timestamp(1_700_000_000_000 + i) == i
        with Log.open(root + "/t-0") as log:  # and a writer, reading and rolling
            assert sum(1 for _ in log.records()) == 300
            for i in range(50):
                log.append([b"x" * 100])
        print("ok")
    """, tmp_path)
    assert out.split() == ["ok"]


def test_appends_to_100_partitions_of_a_manager_under_64_descriptors(tmp_path):
    out = run_limited("""
        with LogManager(root, segment_bytes=1000, index_interval_bytes=10) as m:
            topic = m.create_topic("t", 100)
            for round in range(3):
                for p in range(100):
                    topic.append([b"r%d-p%d" % (round, p) + b"." * 300], partition=p)
            assert all(len(m.log("t", p).segments) >= 2 for p in range(100))  # rolled
        with LogManager(root, read_only=True) as m:
            for p in range(100):
                values = [r.value.split(b".")[0] for r in m.log("t", p).records()]
                assert values == [b"r%d-p%d" % (r, p) for r in range(3)], values
        print("ok")
    """, tmp_path)
    assert out.split() == ["ok"]


def test_running_out_of_descriptors_raises_storage_error(tmp_path):
    with Log.open(tmp_path / "t-0", segment_bytes=200) as log:
        for i in range(20):
            log.append([b"x" * 100])
    with Log.open(tmp_path / "u-0") as log:
        log.append([b"y"])
    out = run_limited("""
        import errno, os
        log = Log.open(root + "/t-0", max_open_files=3)
        held = []
        try:
            while True:
                held.append(os.open("/dev/null", os.O_RDONLY))
        except OSError as e:
            assert e.errno == errno.EMFILE
        for what, action in [("read", lambda: log.read(0)),
                             ("read-only open", lambda: Log.open(root + "/u-0", read_only=True)),
                             ("writable open", lambda: Log.open(root + "/u-0")),
                             ("roll", lambda: log.roll())]:
            try:
                action()
            except StorageError as e:
                assert e.errno == errno.EMFILE, e
                print(what)
        for fd in held:
            os.close(fd)
        assert [r.offset for r in log.records()] == list(range(20))  # and all is well again
        log.close()
    """, tmp_path)
    assert out.splitlines() == ["read", "read-only open", "writable open", "roll"]


def test_the_bound_is_shared_by_the_logs_of_a_manager_and_kept(tmp_path):
    with LogManager(tmp_path, max_open_files=12, segment_bytes=300) as m:
        topic = m.create_topic("t", 10)
        for i in range(200):
            topic.append([b"v" * 100], partition=i % 10)
        for p in range(10):
            assert sum(1 for _ in m.log("t", p).records()) == 20
            assert m._open_files.open_files <= 12
        open_fds = [s for p in range(10) for s in m.log("t", p).segments if s._log is not None and s._log.is_open]
        assert len(open_fds) <= 12


def test_max_open_files_is_checked():
    assert OpenFiles().max_open_files >= 8
    with pytest.raises(InvalidConfigError):
        OpenFiles(max_open_files=2)
    with pytest.raises(InvalidConfigError):
        OpenFiles(max_open_files="100")
