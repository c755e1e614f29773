"""``OffsetIndex`` (pylog/index/offset_index.py): the ``.index`` file, byte for byte as
docs/format/index.md specifies, and its lookup, truncation and sanity-check rules."""

from __future__ import annotations

import struct

import pytest

from pylog.errors import CorruptIndexError, InvalidOffsetError, ReadOnlyError
from pylog.index import OffsetIndex
from pylog.segment import LogFile
from tests.conftest import SAMPLES, needs_samples


def entry_bytes(*entries) -> bytes:
    return b"".join(struct.pack(">ii", rel, pos) for rel, pos in entries)


@pytest.fixture
def path(tmp_path):
    return tmp_path / "00000000000000000100.index"


def index_with(path, *entries, base=100, max_bytes=1024) -> OffsetIndex:
    idx = OffsetIndex(path, base_offset=base, max_bytes=max_bytes)
    for offset, position in entries:
        idx.append(offset, position)
    return idx


# -- bytes on disk ---------------------------------------------------------------------------
def test_spec_worked_example_bytes(path):
    idx = index_with(path, (150, 4096))
    idx.trim()
    assert path.read_bytes() == bytes.fromhex("00000032 00001000")


def test_entries_are_relative_offset_then_position_big_endian(path):
    idx = index_with(path, (101, 0x10), (200, 0x01020304), (100 + 2**31 - 1, 2**31 - 1))
    idx.trim()
    assert path.read_bytes() == entry_bytes((1, 0x10), (100, 0x01020304), (2**31 - 1, 2**31 - 1))


def test_trim_cuts_a_file_of_many_entries_to_its_entries(path):
    entries = [(100 + 10 * i, 4096 * i) for i in range(1, 21)]
    idx = index_with(path, *entries, max_bytes=8 * 64)
    idx.trim()
    assert path.read_bytes() == entry_bytes(*[(o - 100, p) for o, p in entries])


def test_reopen_reads_the_entries_written(path):
    index_with(path, (150, 4096), (180, 8192)).trim()
    again = OffsetIndex(path, base_offset=100, writable=False)
    assert again.entries() == [(150, 4096), (180, 8192)]
    assert len(again) == 2 and again.last_entry == (180, 8192)


def test_reopen_ignores_an_untrimmed_zero_tail(path):
    path.write_bytes(entry_bytes((50, 4096), (80, 8192)) + bytes(8 * 6))
    idx = OffsetIndex(path, base_offset=100, writable=False)
    assert idx.entries() == [(150, 4096), (180, 8192)]
    idx.sanity_check()


def test_a_missing_file_is_an_empty_index(path):
    idx = OffsetIndex(path, base_offset=100, writable=False)
    assert len(idx) == 0 and idx.entries() == [] and idx.last_entry is None
    assert not path.exists()


# -- lookup ------------------------------------------------------------------------------------
@pytest.mark.parametrize("target, expected", [
    (150, (150, 4096)),   # at an entry
    (170, (150, 4096)),   # between entries
    (180, (180, 8192)),
    (10**9, (180, 8192)),  # past the last
    (149, (100, 0)),      # below the first: the segment start
    (100, (100, 0)),
])
def test_lookup_is_the_largest_entry_at_or_below(path, target, expected):
    assert index_with(path, (150, 4096), (180, 8192)).lookup(target) == expected


def test_lookup_in_an_empty_index_is_the_segment_start(path):
    assert OffsetIndex(path, base_offset=100).lookup(12345) == (100, 0)


# -- appends ------------------------------------------------------------------------------------
def test_append_refuses_an_offset_not_above_the_last(path):
    idx = index_with(path, (150, 4096))
    with pytest.raises(InvalidOffsetError):
        idx.append(150, 8192)
    assert idx.entries() == [(150, 4096)]


def test_append_refuses_an_offset_below_the_base(path):
    with pytest.raises(InvalidOffsetError):
        index_with(path, (99, 0))


def test_append_refuses_a_relative_offset_past_int32(path):
    with pytest.raises(InvalidOffsetError):
        index_with(path, (100 + 2**31, 0))


def test_append_refuses_a_position_past_int32(path):
    with pytest.raises(InvalidOffsetError):
        index_with(path, (101, 2**31))


def test_full_index_refuses_more_entries(path):
    idx = index_with(path, (101, 10), (102, 20), max_bytes=16)
    assert idx.is_full()
    with pytest.raises(InvalidOffsetError):
        idx.append(103, 30)
    idx.trim()
    assert path.read_bytes() == entry_bytes((1, 10), (2, 20))


def test_max_bytes_is_rounded_down_to_whole_entries(path):
    idx = index_with(path, (101, 10), max_bytes=23)
    assert not idx.is_full()
    idx.append(102, 20)
    assert idx.is_full()


def test_read_only_index_refuses_appends(path):
    index_with(path, (150, 4096)).trim()
    before = path.read_bytes()
    with pytest.raises(ReadOnlyError):
        OffsetIndex(path, base_offset=100, writable=False).append(180, 8192)
    assert path.read_bytes() == before


# -- truncation -----------------------------------------------------------------------------------
def test_truncate_to_removes_entries_at_and_above(path):
    idx = index_with(path, (150, 4096), (180, 8192), (200, 12288))
    idx.truncate_to(180)
    assert idx.entries() == [(150, 4096)]
    assert idx.lookup(190) == (150, 4096)
    idx.trim()
    assert path.read_bytes() == entry_bytes((50, 4096))


def test_truncate_to_between_entries_keeps_those_below(path):
    idx = index_with(path, (150, 4096), (180, 8192))
    idx.truncate_to(170)
    assert idx.entries() == [(150, 4096)]


def test_truncate_to_below_the_first_empties_the_index(path):
    idx = index_with(path, (150, 4096), (180, 8192))
    idx.truncate_to(100)
    idx.trim()
    assert idx.entries() == [] and path.read_bytes() == b""


def test_truncate_to_past_the_end_changes_nothing(path):
    idx = index_with(path, (150, 4096))
    idx.truncate_to(10**6)
    idx.trim()
    assert path.read_bytes() == entry_bytes((50, 4096))


def test_appends_continue_after_a_truncation(path):
    idx = index_with(path, (150, 4096), (180, 8192))
    idx.truncate_to(180)
    idx.append(170, 6000)
    idx.trim()
    assert path.read_bytes() == entry_bytes((50, 4096), (70, 6000))


def test_reset_empties_the_file(path):
    idx = index_with(path, (150, 4096))
    idx.reset()
    assert len(idx) == 0 and path.read_bytes() == b""


# -- sanity check --------------------------------------------------------------------------------
def test_sanity_check_passes_a_good_index(path):
    index_with(path, (150, 4096), (180, 8192)).trim()
    OffsetIndex(path, base_offset=100, writable=False).sanity_check()


def test_sanity_check_fails_a_size_not_a_multiple_of_8(path):
    path.write_bytes(entry_bytes((50, 4096)) + b"\x00\x00\x00")
    with pytest.raises(CorruptIndexError) as e:
        OffsetIndex(path, base_offset=100, writable=False).sanity_check()
    assert e.value.path == str(path)


def test_sanity_check_fails_an_offset_below_the_base(path):
    path.write_bytes(entry_bytes((-5, 4096)))
    with pytest.raises(CorruptIndexError) as e:
        OffsetIndex(path, base_offset=100, writable=False).sanity_check()
    assert e.value.path == str(path)


def test_sanity_check_fails_positions_going_backwards(path):
    path.write_bytes(entry_bytes((50, 8192), (80, 4096)))
    with pytest.raises(CorruptIndexError) as e:
        OffsetIndex(path, base_offset=100, writable=False).sanity_check()
    assert e.value.path == str(path)


# -- files written by Kafka -------------------------------------------------------------------------
def kafka_indexes() -> list:
    if SAMPLES is None:
        return []
    return sorted(p for p in (SAMPLES / "real").rglob("*.index")
                  if p.stat().st_size and p.with_suffix(".log").exists())


@needs_samples
@pytest.mark.parametrize("index_path", kafka_indexes(), ids=lambda p: f"{p.parent.name}/{p.name}")
def test_reopen_an_index_written_by_kafka(index_path):
    base = int(index_path.name[:20])
    raw = index_path.read_bytes()
    on_disk = [(base + rel, pos) for rel, pos in struct.iter_unpack(">ii", raw)]
    idx = OffsetIndex(index_path, base_offset=base, writable=False)
    idx.sanity_check()
    assert idx.entries() == on_disk
    log = LogFile(index_path.with_suffix(".log"), writable=False)
    starts = {h.position: h for h in log.headers()}
    for offset, position in on_disk:
        assert idx.lookup(offset) == (offset, position)
        # an entry names a batch start, and an offset at or after that batch's base
        assert position in starts and starts[position].base_offset <= offset
    assert idx.lookup(base) == (base, 0) or on_disk[0][0] == base


def test_kafka_index_samples_are_present():
    if SAMPLES is None:
        pytest.skip("Kafka samples not found: set PYLOG_KAFKA_SAMPLES or put shared/kafka-samples beside the checkout")
    assert len(kafka_indexes()) >= 4
