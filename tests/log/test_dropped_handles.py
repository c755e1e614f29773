"""A ``Log`` or ``LogManager`` dropped without ``close()`` gives its writer locks and file
descriptors back when it is garbage-collected, with a ``ResourceWarning`` (as Python does
for a file); creating a topic keeps nothing open."""

from __future__ import annotations

import gc
import os
import warnings

import pytest

import pylog
from pylog import Log, LogManager
from pylog.clients import Producer


@pytest.fixture
def no_cycle_collector():
    """Reference counting alone must release a dropped handle: the cycle collector stays off."""
    gc.collect()
    gc.disable()
    try:
        yield
    finally:
        gc.enable()


def _open_files_under(path) -> list[str]:
    """The files under ``path`` this process holds descriptors of (other threads' sockets
    and pipes, opened and closed meanwhile, do not count)."""
    root, out = os.path.realpath(path) + os.sep, []
    for fd in os.listdir("/proc/self/fd"):
        try:
            target = os.readlink(f"/proc/self/fd/{fd}")
        except OSError:  # closed since the listing
            continue
        if target.startswith(root):
            out.append(target)
    return sorted(out)


def test_create_topic_leaves_no_partition_open(tmp_path, no_cycle_collector):
    m = LogManager(tmp_path)
    with warnings.catch_warnings():
        warnings.simplefilter("error", ResourceWarning)  # nothing left to warn about
        m.create_topic("t", 2)
        del m
    for p in range(2):
        Log.open(tmp_path / f"t-{p}").close()


def test_producer_after_create_topic_on_a_dropped_manager_does_not_block(tmp_path):
    LogManager(tmp_path).create_topic("t", 6)
    with Producer(str(tmp_path), max_block_ms=5_000) as producer:
        futures = [producer.send("t", b"v", partition=p) for p in range(6)]
        assert [f.get(30).offset for f in futures] == [0] * 6


def test_dropped_log_releases_its_lock_and_files_with_a_resource_warning(tmp_path, no_cycle_collector):
    log = Log.open(tmp_path / "t-0")
    log.append([b"a", b"b"])
    assert _open_files_under(tmp_path)  # the segment, its indexes, the dir's lock
    with pytest.warns(ResourceWarning, match="t-0"):
        del log
    assert _open_files_under(tmp_path) == []
    with Log.open(tmp_path / "t-0") as again:
        assert [r.value for r in again.records()] == [b"a", b"b"]


def test_dropped_read_only_log_closes_its_files(tmp_path, no_cycle_collector):
    with Log.open(tmp_path / "t-0") as log:
        log.append([b"a"])
    reader = Log.open(tmp_path / "t-0", read_only=True)
    assert [r.value for r in reader.records()] == [b"a"]
    assert _open_files_under(tmp_path)
    with pytest.warns(ResourceWarning):
        del reader
    assert _open_files_under(tmp_path) == []


def test_dropped_manager_releases_every_lock_with_one_warning(tmp_path, no_cycle_collector):
    m = LogManager(tmp_path)
    t = m.create_topic("t", 3)
    t.append([b"x"], partition=1)
    m.log("t", 0)
    del t
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        del m
    assert [str(w.message) for w in caught if w.category is ResourceWarning] == [
        f"unclosed LogManager of {tmp_path} (its 2 open logs are released unflushed)"]
    for p in range(3):
        Log.open(tmp_path / f"t-{p}").close()
    with Log.open(tmp_path / "t-1") as log:
        assert [r.value for r in log.records()] == [b"x"]


def test_a_closed_log_is_not_warned_about(tmp_path, no_cycle_collector):
    with warnings.catch_warnings():
        warnings.simplefilter("error", ResourceWarning)
        log = Log.open(tmp_path / "t-0")
        log.close()
        del log
        with LogManager(tmp_path) as m:
            m.log("t", 0)
        del m


def test_a_manager_reused_after_close_is_released_when_dropped(tmp_path, no_cycle_collector):
    m = LogManager(tmp_path)
    m.create_topic("t", 1)
    m.close()
    m.log("t", 0).append([b"x"])
    with pytest.warns(ResourceWarning):
        del m
    Log.open(tmp_path / "t-0").close()


def test_the_error_for_a_second_writer_is_unchanged_while_the_first_lives(tmp_path):
    with Log.open(tmp_path / "t-0"):
        with pytest.raises(pylog.LogLockedError):
            Log.open(tmp_path / "t-0")
