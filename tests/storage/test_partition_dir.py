"""``PartitionDir`` (pylog/partition_dir.py): the directory's name, its writer lock, its
clean-shutdown marker and its lines in the log dir's checkpoint files
(docs/format/checkpoints.md)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap

import pytest

from pylog import Log
from pylog.errors import InvalidTopicError, LogLockedError
from pylog.layout import LOG_START_OFFSET_CHECKPOINT, RECOVERY_POINT_CHECKPOINT, REPLICATION_OFFSET_CHECKPOINT
from pylog.partition_dir import PartitionDir, parse_partition_dir

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


# -- names -------------------------------------------------------------------------------------
@pytest.mark.parametrize("name, expected", [
    ("orders-3", ("orders", 3)),
    ("my-topic-12", ("my-topic", 12)),      # split at the last dash
    ("__consumer_offsets-40", ("__consumer_offsets", 40)),
    ("a.b_c-0", ("a.b_c", 0)),
    ("t-2147483647", ("t", 2**31 - 1)),
    ("x" * 249 + "-1", ("x" * 249, 1)),
])
def test_parse_partition_dir_names(name, expected):
    assert parse_partition_dir(name) == expected


@pytest.mark.parametrize("name", [
    "orders", "orders-", "-3", "orders-x", "orders-+3", "orders- 3", "orders-\u0663",
    "t-2147483648", "x" * 250 + "-1", "..-0", ".-0", "or ders-0", "or/ders-0",
    "orders-0.0123456789abcdef-delete", "",
])
def test_parse_partition_dir_refuses_bad_names(name):
    with pytest.raises(InvalidTopicError):
        parse_partition_dir(name)


def test_a_bad_name_is_refused_before_anything_is_created(tmp_path):
    with pytest.raises(InvalidTopicError):
        PartitionDir.open(tmp_path / "no_partition", create=True)
    assert os.listdir(tmp_path) == []


def test_open_creates_the_directory_and_knows_its_log_dir(tmp_path):
    pdir = PartitionDir.open(tmp_path / "orders-7", create=True)
    assert os.path.isdir(tmp_path / "orders-7")
    assert (pdir.topic, pdir.partition, pdir.log_dir) == ("orders", 7, str(tmp_path))


# -- writer lock -------------------------------------------------------------------------------
def test_a_second_lock_in_the_same_process_is_refused_until_unlock(tmp_path):
    first = PartitionDir.open(tmp_path / "orders-0", create=True)
    second = PartitionDir(tmp_path / "orders-0")
    first.lock()
    with pytest.raises(LogLockedError):
        second.lock()
    first.unlock()
    second.lock()
    second.unlock()


HOLDER = textwrap.dedent("""
    import sys
    from pylog import Log
    log = Log.open(sys.argv[1])
    print("open", flush=True)
    sys.stdin.read()
    log.close()
""")


def start_holder(path) -> subprocess.Popen:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [ROOT, os.environ.get("PYTHONPATH")]))}
    proc = subprocess.Popen([sys.executable, "-c", HOLDER, str(path)], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, text=True, env=env)
    assert proc.stdout.readline().strip() == "open"  # the child holds the lock from here
    return proc


def test_a_writer_in_another_process_gets_log_locked_error(tmp_path):
    path = tmp_path / "orders-0"
    holder = start_holder(path)
    try:
        with pytest.raises(LogLockedError):
            Log.open(path)
        with Log.open(path, read_only=True) as reader:  # readers take no lock
            assert reader.log_end_offset == 0
    finally:
        holder.stdin.close()
        assert holder.wait(timeout=60) == 0
    with Log.open(path) as log:  # released by the holder's close
        assert log.log_end_offset == 0


def test_the_lock_goes_with_a_killed_writer(tmp_path):
    path = tmp_path / "orders-0"
    holder = start_holder(path)
    holder.send_signal(signal.SIGKILL)
    holder.wait(timeout=60)
    holder.stdin.close()
    holder.stdout.close()
    pdir = PartitionDir(path)
    pdir.lock()
    pdir.unlock()


# -- clean-shutdown marker -------------------------------------------------------------------------
def test_a_clean_unlock_writes_kafkas_marker_bytes_in_the_log_dir(tmp_path):
    pdir = PartitionDir.open(tmp_path / "orders-0", create=True)
    pdir.lock()
    assert not pdir.take_clean_shutdown_marker()
    pdir.unlock(clean=True)
    assert (tmp_path / ".kafka_cleanshutdown").read_bytes() == b'{"version":0,"brokerEpoch":-1}'
    assert not (tmp_path / "orders-0" / ".kafka_cleanshutdown").exists()


def test_taking_the_marker_removes_it(tmp_path):
    pdir = PartitionDir.open(tmp_path / "orders-0", create=True)
    pdir.lock()
    pdir.take_clean_shutdown_marker()
    pdir.unlock(clean=True)
    assert pdir.has_clean_shutdown_marker()
    pdir.lock()
    assert pdir.take_clean_shutdown_marker()
    assert not pdir.has_clean_shutdown_marker()
    assert not (tmp_path / ".kafka_cleanshutdown").exists()
    pdir.unlock()
    assert not pdir.has_clean_shutdown_marker()  # an unclean unlock leaves no marker


# -- checkpoint lines ------------------------------------------------------------------------------
def test_write_offsets_writes_this_partitions_line_in_the_log_dir(tmp_path):
    pdir = PartitionDir.open(tmp_path / "orders-0", create=True)
    pdir.write_offsets({RECOVERY_POINT_CHECKPOINT: 17212})
    assert (tmp_path / RECOVERY_POINT_CHECKPOINT).read_bytes() == b"0\n1\norders 0 17212\n"
    assert pdir.read_offsets() == {RECOVERY_POINT_CHECKPOINT: 17212, LOG_START_OFFSET_CHECKPOINT: None,
                                   REPLICATION_OFFSET_CHECKPOINT: None}


def test_partitions_of_one_log_dir_keep_each_others_lines(tmp_path):
    one = PartitionDir.open(tmp_path / "orders-1", create=True)
    zero = PartitionDir.open(tmp_path / "orders-0", create=True)
    one.write_offsets({RECOVERY_POINT_CHECKPOINT: 9954})
    zero.write_offsets({RECOVERY_POINT_CHECKPOINT: 17212})
    # the spec's worked example
    assert (tmp_path / RECOVERY_POINT_CHECKPOINT).read_bytes() == b"0\n2\norders 0 17212\norders 1 9954\n"
    zero.write_offsets({RECOVERY_POINT_CHECKPOINT: 17300})
    assert (tmp_path / RECOVERY_POINT_CHECKPOINT).read_bytes() == b"0\n2\norders 0 17300\norders 1 9954\n"
    assert one.read_offsets()[RECOVERY_POINT_CHECKPOINT] == 9954


def test_an_unreadable_checkpoint_reads_as_absent(tmp_path):
    pdir = PartitionDir.open(tmp_path / "orders-0", create=True)
    (tmp_path / LOG_START_OFFSET_CHECKPOINT).write_bytes(b"0\n2\norders 0 5\n")
    (tmp_path / RECOVERY_POINT_CHECKPOINT).write_bytes(b"\xff\xfe")
    offsets = pdir.read_offsets()
    assert offsets[LOG_START_OFFSET_CHECKPOINT] is None and offsets[RECOVERY_POINT_CHECKPOINT] is None


def test_kafkas_log_dir_checkpoints_are_read(tmp_path):
    from tests.conftest import SAMPLES
    if SAMPLES is None:
        pytest.skip("Kafka samples not found: set PYLOG_KAFKA_SAMPLES or put shared/kafka-samples beside the checkout")
    logdir = SAMPLES / "real" / "legacy-magic1-logdir"
    lines = (logdir / RECOVERY_POINT_CHECKPOINT).read_text().splitlines()
    expected = {(t, int(p)): int(o) for t, p, o in (line.split() for line in lines[2:])}
    assert ("foo", 0) in expected
    pdir = PartitionDir(logdir / "foo-0")
    assert pdir.read_offsets()[RECOVERY_POINT_CHECKPOINT] == expected[("foo", 0)]
