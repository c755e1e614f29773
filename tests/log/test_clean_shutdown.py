"""Kafka's clean-shutdown marker: it belongs to the log dir, is absent while any log in it
is open for writing (in any process), and comes back only when every log closed cleanly."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap

import pytest

from pylog import Log, LogLockedError, LogManager, Record
from pylog.layout import CLEAN_SHUTDOWN_FILE

WRITER = textwrap.dedent("""
    import sys
    from pylog import Log
    log = Log.open(sys.argv[1], segment_bytes=2000)
    for i in range(int(sys.argv[2])):
        log.append([b"%08d" % i + b"." * 100])
    log.flush()
    print("ready", flush=True)
    if sys.argv[3] == "forever":
        while True:
            log.append([b"unflushed" + b"." * 100])
    sys.stdin.readline()
    log.close()
    print("closed", flush=True)
""")


def marker(root) -> bool:
    return os.path.exists(os.path.join(root, CLEAN_SHUTDOWN_FILE))


def start_writer(tmp_path, partition_dir, records, mode):
    script = tmp_path / "writer.py"
    script.write_text(WRITER)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in (os.getcwd(), os.environ.get("PYTHONPATH")) if p)}
    proc = subprocess.Popen([sys.executable, str(script), str(partition_dir), str(records), mode],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=env, text=True)
    assert proc.stdout.readline().strip() == "ready"  # an acknowledgement, not a sleep
    return proc


def fill(d, n, **cfg):
    with Log.open(d, **cfg) as log:
        for i in range(n):
            log.append([Record(b"%08d" % i + b"." * 100)])


def test_the_marker_is_kafkas_file_in_the_log_dir_and_absent_while_writing(tmp_path):
    d = tmp_path / "t-0"
    fill(d, 10)
    assert marker(tmp_path) and not marker(d)
    assert json.loads((tmp_path / CLEAN_SHUTDOWN_FILE).read_bytes()) == {"version": 0, "brokerEpoch": -1}
    with Log.open(d) as log:
        assert log.load_report.clean and log.load_report.recovered_segments == []
        assert not marker(tmp_path)  # removed before any write
        with Log.open(d, read_only=True) as reader:
            assert not reader.load_report.clean
    assert marker(tmp_path)


def test_a_writer_killed_leaves_no_marker_and_the_next_open_recovers(tmp_path):
    d = tmp_path / "t-0"
    fill(d, 30, segment_bytes=2000)
    (tmp_path / CLEAN_SHUTDOWN_FILE).write_text('{"version":0,"brokerEpoch":42}')  # as a broker leaves it
    proc = start_writer(tmp_path, d, 20, "forever")
    assert not marker(tmp_path)  # taken before the first write
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    assert not marker(tmp_path)
    with Log.open(d, segment_bytes=2000) as log:
        assert not log.load_report.clean and log.load_report.recovered_segments
        values = [r.value[:8] for r in log.records()]
        assert values[:50] == [b"%08d" % i for i in range(30)] + [b"%08d" % i for i in range(20)]
        assert log.check() == []
    assert marker(tmp_path)  # the only partition was recovered and closed cleanly
    with Log.open(d, segment_bytes=2000) as log:
        assert log.load_report.clean


def test_closing_one_of_two_writers_in_two_processes_leaves_the_marker_away(tmp_path):
    fill(tmp_path / "a-0", 5)
    fill(tmp_path / "b-0", 5)
    assert marker(tmp_path)
    proc = start_writer(tmp_path, tmp_path / "a-0", 5, "wait")
    with Log.open(tmp_path / "b-0") as log:
        log.append([b"x"])
    assert not marker(tmp_path)  # a-0 is still open in the other process
    proc.stdin.write("close\n")
    proc.stdin.flush()
    assert proc.stdout.readline().strip() == "closed"
    assert proc.wait() == 0
    assert marker(tmp_path)  # both closed cleanly: the last one wrote it
    with LogManager(tmp_path) as m:
        assert [len(list(m.log(t, 0).records())) for t in ("a", "b")] == [10, 6]
        assert m.log("a", 0).load_report.clean and m.log("b", 0).load_report.clean


def test_a_writer_in_another_process_that_crashes_after_the_first_one_closed(tmp_path):
    fill(tmp_path / "a-0", 5)
    fill(tmp_path / "b-0", 5)
    first = Log.open(tmp_path / "a-0")  # this process starts writing while the marker is present
    proc = start_writer(tmp_path, tmp_path / "b-0", 5, "forever")
    first.close()
    assert not marker(tmp_path)  # b-0 is open elsewhere
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    with Log.open(tmp_path / "a-0") as log:  # a later writer of this process
        log.append([b"y"])
    assert not marker(tmp_path)  # b-0 died mid-write: it must be recovered first
    with Log.open(tmp_path / "b-0") as log:
        assert not log.load_report.clean and log.load_report.recovered_segments


def test_the_last_writer_to_close_leaves_the_marker_away_if_another_process_was_killed(tmp_path):
    fill(tmp_path / "a-0", 5)
    fill(tmp_path / "b-0", 5)
    first = Log.open(tmp_path / "a-0")
    assert first.load_report.clean
    proc = start_writer(tmp_path, tmp_path / "b-0", 5, "forever")  # joins this process's run of writers
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    with Log.open(tmp_path / "a-1") as other:  # this process's next writer: another process wrote meanwhile
        assert not other.load_report.clean
    first.close()
    assert not marker(tmp_path)
    with Log.open(tmp_path / "b-0") as log:
        assert not log.load_report.clean and log.load_report.recovered_segments


def test_a_manager_closing_every_log_writes_the_marker_and_reopens_clean(tmp_path):
    with LogManager(tmp_path, segment_bytes=1000) as m:
        t = m.create_topic("t", 4)
        for i in range(40):
            t.append([b"v" * 100], partition=i % 4)
        assert not marker(tmp_path)
    assert marker(tmp_path)
    with LogManager(tmp_path) as m:
        for p in range(4):  # opened one by one, each after the marker was taken: all still clean
            assert m.log("t", p).load_report.clean
            assert m.log("t", p).load_report.recovered_segments == []


def test_an_old_partition_level_marker_is_ignored_and_removed(tmp_path):
    d = tmp_path / "t-0"
    fill(d, 5)
    os.remove(tmp_path / CLEAN_SHUTDOWN_FILE)  # as if the writer died
    (d / CLEAN_SHUTDOWN_FILE).write_bytes(b'{"version": 0, "brokerEpoch": -1}')  # left by an earlier pylog
    with Log.open(d, read_only=True) as log:
        assert not log.load_report.clean
    assert (d / CLEAN_SHUTDOWN_FILE).exists()  # a read-only open changes nothing
    with Log.open(d) as log:
        assert not log.load_report.clean and log.load_report.recovered_segments == [0]
        assert not (d / CLEAN_SHUTDOWN_FILE).exists()


def test_a_forked_child_does_not_share_its_parents_writer_locks(tmp_path):
    fill(tmp_path / "a-0", 3)
    with Log.open(tmp_path / "a-0") as parent_log:
        to_parent, from_child = os.pipe()
        to_child, from_parent = os.pipe()
        pid = os.fork()
        if pid == 0:  # the child: a second writer of a-0 is refused; it writes b-0 and holds it
            try:
                try:
                    Log.open(tmp_path / "a-0").close()
                    os.write(from_child, b"a-0 opened twice\n")
                except LogLockedError:
                    with Log.open(tmp_path / "b-0") as log:
                        log.append([b"child"])
                        os.write(from_child, b"holding b-0\n")
                        os.read(to_child, 1)
            finally:
                os._exit(0)
        try:
            assert os.read(to_parent, 100) == b"holding b-0\n"
            with pytest.raises(LogLockedError):
                Log.open(tmp_path / "b-0").close()  # the child's writer counts as another process's
        finally:
            os.write(from_parent, b"x")
            os.waitpid(pid, 0)
        parent_log.append([b"parent"])
    assert [r.value for r in Log.open(tmp_path / "b-0", read_only=True).records()] == [b"child"]
