"""StatWatch: a change is never missed, even within one tick of the file system's clock."""

from __future__ import annotations

import os
import time

from pylog.stat_watch import StatWatch, stamp_granularity_ns

HOUR_NS = 3600 * 10**9


def _set_mtime(path, mtime_ns: int) -> None:
    os.utime(path, ns=(mtime_ns, mtime_ns))


def test_a_settled_listing_reports_nothing_until_a_file_comes(tmp_path):
    _set_mtime(tmp_path, time.time_ns() - HOUR_NS + 123)
    watch = StatWatch([str(tmp_path)])
    watch.mark()
    assert not watch.changed()
    (tmp_path / "00000000000000000010.log").write_bytes(b"")
    assert watch.changed()


def test_a_listing_in_the_same_tick_as_the_last_change_is_never_trusted(tmp_path):
    """A second change within the tick of the first would leave the same mtime: so
    until the stamp is a tick old, every check says 'list again'."""
    recent = time.time_ns() + 10**9 + 7  # the change's tick has not passed yet
    _set_mtime(tmp_path, recent)
    watch = StatWatch([str(tmp_path)])
    watch.mark()
    (tmp_path / "new").write_bytes(b"")
    _set_mtime(tmp_path, recent)  # the same stamp, as a coarse clock would give
    assert watch.changed()


def test_whole_second_stamps_count_as_two_second_ticks():
    assert stamp_granularity_ns(1_700_000_000_000_000_000) == 2 * 10**9
    assert stamp_granularity_ns(1_700_000_000_123_456_789) == 1
    assert stamp_granularity_ns(1_700_000_000_123_000_000) == 10**6


def test_a_replaced_checkpoint_is_a_change(tmp_path):
    cp = tmp_path / "log-start-offset-checkpoint"
    cp.write_text("0\n0\n")
    old = time.time_ns() - HOUR_NS + 1
    _set_mtime(cp, old)
    part = tmp_path / "t-0"
    part.mkdir()
    _set_mtime(part, old)
    watch = StatWatch([str(part), str(cp)])
    watch.mark()
    assert not watch.changed()
    tmp = tmp_path / "tmp"
    tmp.write_text("0\n0\n")
    _set_mtime(tmp, old)
    os.replace(tmp, cp)  # same size, same mtime: only the inode tells
    assert watch.changed()
