"""``TimeIndex`` (pylog/index/time_index.py): the ``.timeindex`` file, byte for byte as
docs/format/timeindex.md specifies, and its lookup, reserved slot, truncation and
sanity-check rules."""

from __future__ import annotations

import struct

import pytest

from pylog.errors import CorruptIndexError, InvalidOffsetError, ReadOnlyError
from pylog.index import TimeIndex
from tests.conftest import SAMPLES, needs_samples

T0 = 1_700_000_000_000


def entry_bytes(*entries) -> bytes:
    return b"".join(struct.pack(">qi", ts, rel) for ts, rel in entries)


@pytest.fixture
def path(tmp_path):
    return tmp_path / "00000000000000000100.timeindex"


def index_with(path, *entries, base=100, max_bytes=1200) -> TimeIndex:
    idx = TimeIndex(path, base_offset=base, max_bytes=max_bytes)
    for timestamp, offset in entries:
        idx.maybe_append(timestamp, offset)
    return idx


# -- bytes on disk ---------------------------------------------------------------------------
def test_spec_worked_example_bytes(path):
    idx = index_with(path, (1_700_000_000_000, 120))
    idx.trim()
    assert path.read_bytes() == bytes.fromhex("0000018bcfe56800 00000014")


def test_entries_are_timestamp_then_relative_offset_big_endian(path):
    idx = index_with(path, (T0, 101), (T0 + 1, 150), (2**63 - 1, 100 + 2**31 - 1))
    idx.trim()
    assert path.read_bytes() == entry_bytes((T0, 1), (T0 + 1, 50), (2**63 - 1, 2**31 - 1))


def test_trim_cuts_a_file_of_many_entries_to_its_entries(path):
    entries = [(T0 + i, 100 + 3 * i) for i in range(1, 21)]
    idx = index_with(path, *entries, max_bytes=12 * 64)
    idx.trim()
    assert path.read_bytes() == entry_bytes(*[(t, o - 100) for t, o in entries])


def test_reopen_reads_the_entries_written(path):
    index_with(path, (T0, 110), (T0 + 5, 120)).trim()
    again = TimeIndex(path, base_offset=100, writable=False)
    assert again.entries() == [(T0, 110), (T0 + 5, 120)]
    assert again.last_entry == (T0 + 5, 120)


def test_reopen_ignores_an_untrimmed_zero_tail(path):
    # a zero entry after real ones would make the last timestamp 0 (KAFKA-10207)
    path.write_bytes(entry_bytes((T0, 10), (T0 + 5, 20)) + bytes(12 * 4))
    idx = TimeIndex(path, base_offset=100, writable=False)
    assert idx.entries() == [(T0, 110), (T0 + 5, 120)]
    assert idx.last_entry == (T0 + 5, 120)
    idx.sanity_check()


def test_offsets_going_backwards_at_the_end_fail_the_sanity_check(path):
    path.write_bytes(entry_bytes((T0, 10), (T0 + 5, 20), (T0 + 9, 15)))
    with pytest.raises(CorruptIndexError) as e:
        TimeIndex(path, base_offset=100, writable=False).sanity_check()
    assert e.value.path == str(path)


def test_a_lookup_that_reads_entries_out_of_order_raises(path):
    """Opening reads no more than the ends (O(1)); an entry between that goes backwards is
    found by the search that reads it, never returned."""
    good = [(T0 + 10 * i, 10 * i) for i in range(64)]
    bad = good[:31] + [(T0 + 305, 5)] + good[32:]
    path.write_bytes(entry_bytes(*bad))
    idx = TimeIndex(path, base_offset=100, writable=False)
    idx.sanity_check()
    with pytest.raises(CorruptIndexError) as e:
        idx.lookup(T0 + 315)
    assert e.value.path == str(path)


# -- lookup ------------------------------------------------------------------------------------
@pytest.mark.parametrize("target, expected", [
    (T0, (T0, 110)),           # at an entry
    (T0 + 3, (T0, 110)),       # between entries
    (T0 + 5, (T0 + 5, 120)),
    (2**62, (T0 + 5, 120)),    # past the last
    (T0 - 1, (-1, 100)),       # below the first: no timestamp, the segment start
    (-1, (-1, 100)),
])
def test_lookup_is_the_largest_entry_at_or_below(path, target, expected):
    assert index_with(path, (T0, 110), (T0 + 5, 120)).lookup(target) == expected


def test_lookup_in_an_empty_index_is_no_timestamp_at_the_segment_start(path):
    assert TimeIndex(path, base_offset=100).lookup(T0) == (-1, 100)


# -- appends ------------------------------------------------------------------------------------
def test_maybe_append_skips_a_timestamp_not_above_the_last(path):
    idx = index_with(path, (T0, 110), (T0, 115), (T0 - 1, 118), (T0 + 1, 120))
    assert idx.entries() == [(T0, 110), (T0 + 1, 120)]


def test_maybe_append_refuses_an_offset_going_backwards(path):
    idx = index_with(path, (T0, 110))
    with pytest.raises(InvalidOffsetError):
        idx.maybe_append(T0 + 1, 105)
    assert idx.entries() == [(T0, 110)]


def test_maybe_append_refuses_an_offset_below_the_base(path):
    with pytest.raises(InvalidOffsetError):
        index_with(path, (T0, 99))


def test_append_refuses_a_timestamp_not_above_the_last(path):
    idx = index_with(path, (T0, 110))
    with pytest.raises(InvalidOffsetError):
        idx.append(T0, 120)


def test_full_index_keeps_one_slot_for_the_final_entry(path):
    idx = index_with(path, (T0, 101), (T0 + 1, 102), max_bytes=36)
    assert idx.is_full()
    with pytest.raises(InvalidOffsetError):
        idx.maybe_append(T0 + 2, 103)
    idx.maybe_append(T0 + 2, 103, skip_full_check=True)
    with pytest.raises(InvalidOffsetError):
        idx.maybe_append(T0 + 3, 104, skip_full_check=True)
    idx.trim()
    assert path.read_bytes() == entry_bytes((T0, 1), (T0 + 1, 2), (T0 + 2, 3))


def test_read_only_index_refuses_appends(path):
    index_with(path, (T0, 110)).trim()
    with pytest.raises(ReadOnlyError):
        TimeIndex(path, base_offset=100, writable=False).maybe_append(T0 + 1, 120)
    assert path.read_bytes() == entry_bytes((T0, 10))


# -- truncation -----------------------------------------------------------------------------------
def test_truncate_to_removes_entries_at_and_above_the_offset(path):
    idx = index_with(path, (T0, 110), (T0 + 5, 120), (T0 + 9, 130))
    idx.truncate_to(120)
    assert idx.entries() == [(T0, 110)]
    assert idx.lookup(T0 + 9) == (T0, 110)
    idx.trim()
    assert path.read_bytes() == entry_bytes((T0, 10))


def test_truncate_to_below_the_first_empties_the_index(path):
    idx = index_with(path, (T0, 110))
    idx.truncate_to(100)
    idx.trim()
    assert idx.entries() == [] and path.read_bytes() == b""


def test_appends_continue_after_a_truncation(path):
    idx = index_with(path, (T0, 110), (T0 + 5, 120))
    idx.truncate_to(120)
    idx.maybe_append(T0 + 2, 115)
    idx.trim()
    assert path.read_bytes() == entry_bytes((T0, 10), (T0 + 2, 15))


# -- sanity check --------------------------------------------------------------------------------
def test_sanity_check_passes_a_good_index(path):
    index_with(path, (T0, 110), (T0 + 5, 120)).trim()
    TimeIndex(path, base_offset=100, writable=False).sanity_check()


def test_sanity_check_fails_a_size_not_a_multiple_of_12(path):
    path.write_bytes(entry_bytes((T0, 10)) + b"\x00" * 8)
    with pytest.raises(CorruptIndexError) as e:
        TimeIndex(path, base_offset=100, writable=False).sanity_check()
    assert e.value.path == str(path)


def test_sanity_check_fails_an_offset_below_the_base(path):
    path.write_bytes(entry_bytes((T0, -1)))
    with pytest.raises(CorruptIndexError) as e:
        TimeIndex(path, base_offset=100, writable=False).sanity_check()
    assert e.value.path == str(path)


# -- files written by Kafka -------------------------------------------------------------------------
def kafka_time_indexes() -> list:
    if SAMPLES is None:
        return []
    return sorted(p for p in (SAMPLES / "real").rglob("*.timeindex")
                  if p.stat().st_size and p.with_suffix(".log").exists())


@needs_samples
@pytest.mark.parametrize("index_path", kafka_time_indexes(), ids=lambda p: f"{p.parent.name}/{p.name}")
def test_reopen_a_time_index_written_by_kafka(index_path):
    base = int(index_path.name[:20])
    on_disk = [(ts, base + rel) for ts, rel in struct.iter_unpack(">qi", index_path.read_bytes())]
    idx = TimeIndex(index_path, base_offset=base, writable=False)
    idx.sanity_check()
    assert idx.entries() == on_disk
    for ts, offset in on_disk:
        assert idx.lookup(ts) == (ts, offset)
    assert idx.lookup(on_disk[0][0] - 1) == (-1, base)
