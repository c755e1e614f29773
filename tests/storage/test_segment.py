"""``Segment`` (pylog/segment/segment.py): append, the sparse index rule, reads,
translate_offset, find_offset_by_timestamp, size and next offset, truncation, becoming
inactive and the recovery of a torn tail (docs/format/segment.md, index.md, timeindex.md)."""

from __future__ import annotations

import os
import struct

import pytest

from pylog.errors import InvalidOffsetError
from pylog.record.encode import encode_batch
from pylog.record.record import Record
from pylog.segment import Segment

BASE = 100
T0 = 1_700_000_000_000


def open_segment(directory, *, interval=0, writable=True, index_bytes=4096) -> Segment:
    return Segment(str(directory), BASE, index_bytes=index_bytes, index_interval_bytes=interval,
                   writable=writable)


def new_segment(directory, **kwargs) -> Segment:
    return Segment.create(str(directory), BASE, index_bytes=kwargs.get("index_bytes", 4096),
                          index_interval_bytes=kwargs.get("interval", 0))


def batch(base_offset: int, timestamps: list[int]) -> bytes:
    return encode_batch([Record(b"v%d" % (base_offset + i), timestamp=ts) for i, ts in enumerate(timestamps)],
                        base_offset=base_offset)


def fill(seg: Segment, specs) -> list[tuple[int, int, int, bytes]]:
    """Append one batch per (base offset, timestamps), as ``Log`` does: the offset of the max
    timestamp is the last offset of the batch holding it. Returns (position, base, last, bytes)."""
    out = []
    for base, timestamps in specs:
        data = batch(base, timestamps)
        last = base + len(timestamps) - 1
        position = seg.append(last, max(timestamps), last, data)
        out.append((position, base, last, data))
    return out


SPECS = [(100, [T0, T0 + 5]), (102, [T0 + 3]), (103, [T0 + 9, T0 + 1, T0 + 2]), (106, [T0 + 4])]


def index_file(seg: Segment, suffix: str) -> bytes:
    with open(os.path.join(seg.directory, f"{BASE:020d}{suffix}"), "rb") as f:
        return f.read()


# -- creation and appends ----------------------------------------------------------------------
def test_create_makes_the_log_and_both_index_files_empty(tmp_path):
    seg = new_segment(tmp_path)
    names = sorted(os.listdir(tmp_path))
    assert names == [f"{BASE:020d}.index", f"{BASE:020d}.log", f"{BASE:020d}.timeindex"]
    assert all(os.path.getsize(tmp_path / n) == 0 for n in names)
    assert seg.next_offset == BASE and seg.size_bytes == 0 and seg.max_timestamp == -1


def test_append_writes_the_batches_back_to_back(tmp_path):
    seg = new_segment(tmp_path)
    written = fill(seg, SPECS)
    data = b"".join(d for _, _, _, d in written)
    assert (tmp_path / f"{BASE:020d}.log").read_bytes() == data
    assert [p for p, *_ in written] == [0, *[sum(len(d) for *_, d in written[:i]) for i in range(1, 4)]]
    assert seg.size_bytes == len(data)
    assert seg.next_offset == 107
    assert seg.max_timestamp_and_offset == (T0 + 9, 105)


def test_append_refuses_an_offset_past_the_relative_range(tmp_path):
    seg = new_segment(tmp_path)
    with pytest.raises(InvalidOffsetError):
        seg.append(BASE + 2**31, T0, BASE, batch(BASE, [T0]))
    assert seg.size_bytes == 0


def test_first_append_is_never_indexed_and_later_ones_are_past_the_interval(tmp_path):
    # interval 0: every append but the first adds (its last offset, its position)
    seg = new_segment(tmp_path, interval=0)
    written = fill(seg, SPECS)
    seg.on_become_inactive()
    expected = b"".join(struct.pack(">ii", last - BASE, pos) for pos, _, last, _ in written[1:])
    assert index_file(seg, ".index") == expected
    # the time index: (max timestamp so far, offset holding it) when it grows, then the final entry
    assert index_file(seg, ".timeindex") == b"".join(
        struct.pack(">qi", ts, off - BASE) for ts, off in [(T0 + 5, 101), (T0 + 9, 105)])


def test_index_interval_counts_bytes_since_the_last_entry(tmp_path):
    size = len(batch(BASE, [T0]))
    seg = new_segment(tmp_path, interval=2 * size)
    written = fill(seg, [(BASE + i, [T0 + i]) for i in range(8)])
    seg.on_become_inactive()
    # bytes since the last entry must exceed 2 batches: entries at the 4th and 7th appends
    entries = [(written[i][2] - BASE, written[i][0]) for i in (3, 6)]
    assert index_file(seg, ".index") == b"".join(struct.pack(">ii", *e) for e in entries)


def test_on_become_inactive_writes_the_max_timestamp_entry_and_trims(tmp_path):
    seg = new_segment(tmp_path, interval=10**6)
    fill(seg, SPECS)
    assert index_file(seg, ".timeindex") == b""
    seg.on_become_inactive()
    assert index_file(seg, ".timeindex") == struct.pack(">qi", T0 + 9, 105 - BASE)
    assert index_file(seg, ".index") == b""


# -- reads -----------------------------------------------------------------------------------------
@pytest.mark.parametrize("offset, batch_index", [(100, 0), (101, 0), (102, 1), (104, 2), (105, 2), (106, 3)])
def test_translate_offset_finds_the_batch_holding_it(tmp_path, offset, batch_index):
    seg = new_segment(tmp_path)
    written = fill(seg, SPECS)
    position, base, last, data = written[batch_index]
    header = seg.translate_offset(offset)
    assert (header.position, header.base_offset, header.last_offset, header.size) == (position, base, last, len(data))


def test_translate_offset_past_the_end_is_none(tmp_path):
    seg = new_segment(tmp_path)
    fill(seg, SPECS)
    assert seg.translate_offset(107) is None
    assert seg.find_position(107) is None


def test_translate_offset_below_the_base_is_the_first_batch(tmp_path):
    seg = new_segment(tmp_path)
    fill(seg, SPECS)
    assert seg.translate_offset(0).position == 0


def test_read_slice_is_the_file_bytes(tmp_path):
    seg = new_segment(tmp_path)
    written = fill(seg, SPECS)
    position, *_, data = written[2]
    assert seg.read_slice(position, len(data)) == data
    assert seg.read_slice(position, 10**6) == b"".join(d for *_, d in written[2:])


@pytest.mark.parametrize("timestamp, starting_offset, expected", [
    (T0, BASE, (100, T0)),
    (T0 + 1, BASE, (101, T0 + 5)),      # log order: the first record at or above, not the closest
    (T0 + 6, BASE, (103, T0 + 9)),
    (T0 + 1, 104, (104, T0 + 1)),        # nothing before the starting offset
    (T0 + 3, 104, (106, T0 + 4)),
    (T0 + 10, BASE, None),
])
def test_find_offset_by_timestamp(tmp_path, timestamp, starting_offset, expected):
    seg = new_segment(tmp_path)
    fill(seg, SPECS)
    assert seg.find_offset_by_timestamp(timestamp, starting_offset) == expected


def test_reads_after_reopen_match(tmp_path):
    seg = new_segment(tmp_path)
    written = fill(seg, SPECS)
    seg.on_become_inactive()
    seg.flush()
    seg.close()
    again = open_segment(tmp_path, writable=False)
    assert again.next_offset == 107 and again.size_bytes == sum(len(d) for *_, d in written)
    assert again.max_timestamp_and_offset == (T0 + 9, 105)
    assert again.translate_offset(104).position == written[2][0]
    assert again.find_offset_by_timestamp(T0 + 6, BASE) == (103, T0 + 9)


def test_missing_indexes_are_rebuilt_from_the_log(tmp_path):
    seg = new_segment(tmp_path, interval=0)
    fill(seg, SPECS)
    seg.on_become_inactive()
    seg.close()
    index, timeindex = index_file(seg, ".index"), index_file(seg, ".timeindex")
    for suffix in (".index", ".timeindex"):
        os.remove(tmp_path / f"{BASE:020d}{suffix}")
    again = open_segment(tmp_path, interval=0)
    again.ensure_indexes()
    again.on_become_inactive()
    assert index_file(again, ".index") == index
    assert index_file(again, ".timeindex") == timeindex


# -- truncation -------------------------------------------------------------------------------------
def test_truncate_to_removes_the_whole_batch_holding_the_offset(tmp_path):
    seg = new_segment(tmp_path, interval=0)
    written = fill(seg, SPECS)
    removed = seg.truncate_to(104)
    assert removed == len(written[2][3]) + len(written[3][3])
    assert seg.size_bytes == written[2][0] and seg.next_offset == 103
    assert seg.max_timestamp_and_offset == (T0 + 5, 101)
    assert (tmp_path / f"{BASE:020d}.log").read_bytes() == written[0][3] + written[1][3]
    seg.on_become_inactive()
    assert index_file(seg, ".index") == struct.pack(">ii", 102 - BASE, written[1][0])


def test_truncate_to_past_the_end_removes_nothing(tmp_path):
    seg = new_segment(tmp_path)
    fill(seg, SPECS)
    size = seg.size_bytes
    assert seg.truncate_to(107) == 0 and seg.size_bytes == size


# -- recovery --------------------------------------------------------------------------------------------
def _written_segment(tmp_path):
    seg = new_segment(tmp_path, interval=0)
    written = fill(seg, SPECS)
    seg.on_become_inactive()
    seg.flush()
    seg.close()
    return written


def test_recover_of_a_whole_segment_truncates_nothing_and_rebuilds_the_same_indexes(tmp_path):
    written = _written_segment(tmp_path)
    index = index_file(open_segment(tmp_path), ".index")
    seg = open_segment(tmp_path, interval=0)
    seen = []
    assert seg.recover(on_batch=lambda b: seen.append(b.base_offset)) is None
    seg.on_become_inactive()
    assert seen == [base for _, base, _, _ in written]
    assert index_file(seg, ".index") == index
    assert seg.next_offset == 107


@pytest.mark.parametrize("cut", [1, 11, 12, 40, -1])
def test_recover_cuts_a_torn_tail(tmp_path, cut):
    written = _written_segment(tmp_path)
    log_path = tmp_path / f"{BASE:020d}.log"
    last = written[-1][3]
    whole = sum(len(d) for *_, d in written[:-1])
    with open(log_path, "r+b") as f:
        f.truncate(whole + (cut if cut > 0 else len(last) + cut))
    seg = open_segment(tmp_path, interval=0)
    assert seg.recover().bytes == (cut if cut > 0 else len(last) + cut)
    assert log_path.read_bytes() == b"".join(d for *_, d in written[:-1])
    assert seg.next_offset == 106 and seg.size_bytes == whole


def test_recover_cuts_at_a_batch_failing_its_crc(tmp_path):
    written = _written_segment(tmp_path)
    log_path = tmp_path / f"{BASE:020d}.log"
    raw = bytearray(log_path.read_bytes())
    raw[written[2][0] + 70] ^= 0xFF  # inside the records of the third batch
    log_path.write_bytes(bytes(raw))
    seg = open_segment(tmp_path, interval=0)
    assert seg.recover().bytes == len(written[2][3]) + len(written[3][3])
    assert seg.next_offset == 103
    seg.on_become_inactive()
    assert index_file(seg, ".index") == struct.pack(">ii", 102 - BASE, written[1][0])


def test_recover_cuts_zero_bytes_after_the_last_batch(tmp_path):
    written = _written_segment(tmp_path)
    with open(tmp_path / f"{BASE:020d}.log", "ab") as f:
        f.write(bytes(4096))  # a preallocated or torn tail
    seg = open_segment(tmp_path)
    assert seg.recover().bytes == 4096
    assert seg.size_bytes == sum(len(d) for *_, d in written)
