"""``LogSegments`` (the sorted map of a log's segments) and ``SegmentFactory`` (building
segments from the config), on their own."""

from __future__ import annotations

import os
import threading

import pytest

from pylog.config import LogConfig
from pylog.io import DEFAULT_IO
from pylog.layout import CLEANED_SUFFIX
from pylog.log.segments import LogSegments, SegmentFactory
from pylog.record.encode import encode_batch
from pylog.segment.open_files import OpenFiles


class FakeSegment:
    def __init__(self, base_offset: int, size_bytes: int = 0):
        self.base_offset = base_offset
        self.size_bytes = size_bytes
        self.closed = False
        self.writable = False

    def close(self) -> None:
        self.closed = True


def _segments(*bases: int) -> LogSegments:
    segs = LogSegments()
    for base in bases:
        segs.add(FakeSegment(base))
    return segs


def _bases(segments) -> list[int]:
    return [s.base_offset for s in segments]


def test_segments_iterate_in_base_offset_order_whatever_the_insertion_order():
    segs = _segments(20, 0, 10)
    assert _bases(segs) == [0, 10, 20] and segs.bases() == [0, 10, 20]
    assert segs.active.base_offset == 20 and segs.first.base_offset == 0 and segs.first_base_offset == 0
    assert len(segs) == 3 and 10 in segs and 5 not in segs


def test_add_all_adds_in_order():
    segs = LogSegments()
    segs.add_all(FakeSegment(b) for b in (30, 0, 15))
    assert segs.bases() == [0, 15, 30]


@pytest.mark.parametrize("offset, floor", [(0, 0), (9, 0), (10, 10), (19, 10), (20, 20), (10**9, 20), (-1, None)])
def test_floor_is_the_segment_that_would_hold_the_offset(offset, floor):
    found = _segments(0, 10, 20).floor(offset)
    assert (None if found is None else found.base_offset) == floor


@pytest.mark.parametrize("offset, lower, higher", [(0, None, 10), (10, 0, 20), (15, 10, 20), (20, 10, None),
                                                    (25, 20, None)])
def test_lower_and_higher_exclude_the_offset_itself(offset, lower, higher):
    segs = _segments(0, 10, 20)
    assert (None if segs.lower(offset) is None else segs.lower(offset).base_offset) == lower
    assert (None if segs.higher(offset) is None else segs.higher(offset).base_offset) == higher


@pytest.mark.parametrize("offset, expected", [(0, [5, 10, 20]), (5, [5, 10, 20]), (12, [10, 20]), (20, [20]),
                                              (99, [20])])
def test_from_floor_starts_at_the_floor_or_the_first_segment(offset, expected):
    assert _bases(_segments(5, 10, 20).from_floor(offset)) == expected


def test_lists_are_copies_unaffected_by_later_changes():
    segs = _segments(0, 10, 20)
    listed, iterated = segs.from_floor(0), iter(segs)
    segs.remove(10)
    segs.add(FakeSegment(30))
    assert _bases(listed) == [0, 10, 20] and _bases(iterated) == [0, 10, 20]
    assert segs.bases() == [0, 20, 30]


def test_holds_tells_a_segment_from_its_replacement_at_the_same_base_offset():
    segs = LogSegments()
    old, new = FakeSegment(10), FakeSegment(10)
    segs.add(old)
    assert segs.holds(old) and not segs.holds(new)
    segs.add(new)
    assert segs.holds(new) and not segs.holds(old) and segs.get(10) is new and len(segs) == 1


def test_remove_returns_the_segment_and_get_misses_after():
    segs = _segments(0, 10)
    removed = segs.remove(10)
    assert removed.base_offset == 10 and segs.get(10) is None and segs.active.base_offset == 0
    with pytest.raises(KeyError):
        segs.remove(10)


def test_an_empty_map_has_no_floor_and_no_active_segment():
    segs = LogSegments()
    assert len(segs) == 0 and segs.floor(0) is None and segs.from_floor(0) == [] and segs.higher(0) is None
    with pytest.raises(IndexError):
        segs.active


def test_size_bytes_sums_the_segments_and_close_all_closes_each():
    segs = LogSegments()
    parts = [FakeSegment(0, 100), FakeSegment(10, 23)]
    segs.add_all(parts)
    assert segs.size_bytes() == 123
    segs.close_all()
    assert all(p.closed for p in parts) and len(segs) == 2


def test_touch_releases_the_least_recently_used_segment_beyond_the_budget():
    released = []

    class Tracked(FakeSegment):
        def release_files(self):
            released.append(self.base_offset)

    budget = OpenFiles(max_open_files=9)  # three segments: a .log and two index maps each
    segs = LogSegments(budget.for_owner(threading.RLock()))
    parts = [Tracked(b) for b in (0, 10, 20, 30)]
    segs.add_all(parts)
    for seg in parts[:3]:
        segs.touch(seg)
    segs.touch(parts[0])  # 0 is now the most recently used; 10 the least
    segs.touch(parts[3])
    assert released == [10] and budget.open_files == 9


def test_factory_creates_segments_with_the_configured_index_size(tmp_path):
    config = LogConfig(segment_index_bytes=4096, index_interval_bytes=100)
    factory = SegmentFactory(str(tmp_path), config, DEFAULT_IO, OpenFiles(64).for_owner(threading.RLock()), writable=True)
    seg = factory.create(42)
    seg.append(42, 0, 42, _one_batch(42))
    seg.flush()
    assert seg.offset_index.max_entries * seg.offset_index.entry_bytes == 4096
    assert seg.index_interval_bytes == 100 and seg.writable
    assert os.path.exists(tmp_path / "00000000000000000042.log")
    cleaned = factory.cleaned(50)
    assert cleaned.suffix == CLEANED_SUFFIX
    seg.close()
    cleaned.close()
    reopened = factory.open(42, writable=False)
    assert not reopened.writable and reopened.next_offset == 43
    reopened.close()


def test_factory_create_replaces_files_left_at_that_base_offset(tmp_path):
    factory = SegmentFactory(str(tmp_path), LogConfig(), DEFAULT_IO, OpenFiles(64).for_owner(threading.RLock()), writable=True)
    seg = factory.create(0)
    seg.append(0, 0, 0, _one_batch(0))
    seg.close()
    assert factory.create(0).size_bytes == 0


def _one_batch(base_offset: int) -> bytes:
    return encode_batch([b"v"], base_offset=base_offset, timestamp=0)
