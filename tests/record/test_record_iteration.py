"""Reading records batch by batch: ``FetchData.record_lists`` and ``Log.records`` keep one
batch's records alive at a time, with the same records as ``FetchData.records``."""

from __future__ import annotations

import pytest

from pylog import Log
from pylog.errors import CorruptRecordError


def _log(tmp_path, batches: int = 5, size: int = 10):
    log = Log.open(tmp_path / "t-0")
    for b in range(batches):
        log.append([(b"k%d" % (b * size + i), b"v%d" % (b * size + i)) for i in range(size)])
    return log


def test_record_lists_give_one_list_a_batch_whose_concatenation_is_records(tmp_path):
    with _log(tmp_path) as log:
        fetch = log.read(0, 1 << 20)
        lists = list(fetch.record_lists())
        assert [[r.offset for r in lst] for lst in lists] == [list(range(b * 10, b * 10 + 10)) for b in range(5)]
        assert [r for lst in lists for r in lst] == fetch.records()
        assert {(r.topic, r.partition, r.timestamp_type) for lst in lists for r in lst} == {("t", 0, "CreateTime")}


def test_record_lists_cut_the_batches_at_the_fetch_bounds(tmp_path):
    with _log(tmp_path) as log:
        fetch = log.read(13, 1 << 20, max_offset=27)
        assert [[r.offset for r in lst] for lst in fetch.record_lists()] == \
            [list(range(13, 20)), list(range(20, 27))]


def test_log_records_yield_the_batches_before_a_corrupt_one_then_raise(tmp_path):
    with _log(tmp_path) as log:
        path = log.segments[0].log_path
        third = log.read(20, 1).position
    with open(path, "r+b") as f:  # a byte of the third batch's records
        f.seek(third + 70)
        byte = f.read(1)
        f.seek(third + 70)
        f.write(bytes([byte[0] ^ 0xFF]))
    with Log.open(tmp_path / "t-0", read_only=True) as log:
        got = []
        with pytest.raises(CorruptRecordError):
            for r in log.records():
                got.append(r.offset)
        assert got == list(range(20))
