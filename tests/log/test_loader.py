"""``LogLoader`` on its own: ``load()`` on a directory returns the parts a ``Log`` is
built from, and a read-only load writes nothing. (Hand-made directories opened through
``Log.open`` are in tests/storage/test_log_loader.py.)"""

from __future__ import annotations

import os
import threading

from pylog import Log
from pylog.config import LogConfig
from pylog.io import DEFAULT_IO
from pylog.layout import CLEAN_SHUTDOWN_FILE
from pylog.log.loader import LogLoader
from pylog.partition_dir import PartitionDir
from pylog.segment.open_files import OpenFiles

CONFIG = dict(segment_bytes=1000)


def _written(path, records: int) -> None:
    with Log.open(path, **CONFIG) as log:
        for i in range(records):
            log.append([b"value-%d" % i])


def _load(path, *, read_only: bool):
    pdir = PartitionDir.open(path, create=not read_only)
    if not read_only:
        pdir.lock()
    files = OpenFiles(64).for_owner(threading.RLock())
    loaded = LogLoader(pdir, LogConfig(**CONFIG), read_only=read_only, io=DEFAULT_IO, files=files,
                       auto_high_watermark=True).load()
    return pdir, loaded


def _release(pdir, loaded) -> None:
    loaded.segments.close_all()
    pdir.unlock()


def test_a_writable_load_cuts_a_torn_tail_and_returns_segments_offsets_and_producers(tmp_path):
    path = tmp_path / "t-0"
    _written(path, 40)
    last_log = sorted(n for n in os.listdir(path) if n.endswith(".log"))[-1]
    with open(path / last_log, "ab") as f:
        f.write(b"\x00\x01torn")
    (tmp_path / CLEAN_SHUTDOWN_FILE).unlink()  # an unclean stop
    pdir, loaded = _load(path, read_only=False)
    try:
        assert not loaded.report.clean and loaded.report.truncated_bytes == 6
        assert len(loaded.segments) > 1 and loaded.segments.active.next_offset == 40
        offsets = loaded.offsets
        assert (offsets.log_start_offset, offsets.high_watermark) == (0, 40) and offsets.recovery_point <= 40
        assert loaded.producers is not None and loaded.dir_watch is None
    finally:
        _release(pdir, loaded)


def test_a_read_only_load_writes_nothing_and_leaves_producer_state_for_later(tmp_path):
    path = tmp_path / "t-0"
    _written(path, 25)
    before = {n: (path / n).read_bytes() for n in os.listdir(path)}
    pdir, loaded = _load(path, read_only=True)
    try:
        assert loaded.segments.active.next_offset == 25 and loaded.offsets.high_watermark == 25
        assert loaded.producers is None and loaded.dir_watch is not None
    finally:
        _release(pdir, loaded)
    assert {n: (path / n).read_bytes() for n in os.listdir(path)} == before
