"""Opening a partition directory (pylog/log/loader.py through ``Log.open``): directories
built by hand as Kafka's LogLoaderTest builds them: ``.swap`` files, orphan indexes,
``.cleaned``/``.deleted`` leftovers, a torn tail, a log start offset past the end,
missing indexes. Each is opened writable (which repairs) and read-only (which changes
nothing on disk), and ``Log.check()`` finds nothing wrong after a writable open."""

from __future__ import annotations

import os
import shutil

import pytest

from pylog import Log, Record, encode_batch
from pylog.errors import CorruptRecordError
from pylog.layout import CLEAN_SHUTDOWN_FILE, LOG_START_OFFSET_CHECKPOINT
from pylog.segment import LogFile

T0 = 1_700_000_000_000
CONFIG = dict(segment_bytes=1400, index_interval_bytes=200)
RECORDS_PER_BATCH = 2


def name(base: int, suffix: str) -> str:
    return f"{base:020d}{suffix}"


@pytest.fixture
def part(tmp_path):
    """A closed log of several segments, 2 records per batch, values b"value-<offset>"."""
    path = tmp_path / "orders-0"
    with Log.open(path, **CONFIG) as log:
        for i in range(0, 120, RECORDS_PER_BATCH):
            log.append([Record(b"value-%d" % (i + j), key=b"k", timestamp=T0 + i + j)
                        for j in range(RECORDS_PER_BATCH)])
        assert len(log.segments) >= 4
    return path


def bases(path) -> list[int]:
    return sorted(int(n[:20]) for n in os.listdir(path) if n.endswith(".log"))


def values(log) -> list[bytes]:
    return [r.value for r in log.records()]


def snapshot_dir(path) -> dict[str, bytes]:
    return {n: (path / n).read_bytes() for n in sorted(os.listdir(path))}


def expected_values(start: int = 0, end: int = 120) -> list[bytes]:
    return [b"value-%d" % i for i in range(start, end)]


def open_read_only_unchanged(path):
    """Open read-only, check that nothing on disk changes, return what it reads."""
    before = snapshot_dir(path)
    with Log.open(path, read_only=True, **CONFIG) as log:
        read = values(log), log.log_start_offset, log.log_end_offset
    assert snapshot_dir(path) == before
    return read


def open_writable(path, **kwargs):
    log = Log.open(path, **CONFIG, **kwargs)
    assert log.check() == []
    return log


def unclean(path) -> None:
    os.remove(path.parent / CLEAN_SHUTDOWN_FILE)  # the marker belongs to the log dir


# -- .swap files ---------------------------------------------------------------------------------
def merge_into_swap(path, first: int, second: int) -> None:
    """Leave the directory as a crash in the middle of a swap does: the two segments
    merged into one ``.swap`` segment, not yet renamed over them."""
    data = (path / name(first, ".log")).read_bytes() + (path / name(second, ".log")).read_bytes()
    (path / name(first, ".log.swap")).write_bytes(data)


def test_a_swap_file_replaces_the_segments_it_covers(part):
    segments = bases(part)
    merge_into_swap(part, segments[0], segments[1])
    assert open_read_only_unchanged(part) == (expected_values(), 0, 120)
    with open_writable(part) as log:
        assert log.load_report.swapped_segments == [segments[0]]
        assert [s.base_offset for s in log.segments] == [segments[0], *segments[2:]]
        assert values(log) == expected_values()
    assert not any(n.endswith(".swap") for n in os.listdir(part))


def test_a_read_only_open_lists_again_when_the_writer_finishes_a_swap_under_it(part, monkeypatch):
    """The writer renames the ``.swap`` over the segments it replaces between the reader's
    listing and its first read of the ``.swap`` file: the open lists again (it used to fail
    with "cannot open ...log.swap: No such file or directory")."""
    import pylog.log.loader as loader
    segments = bases(part)
    merge_into_swap(part, segments[0], segments[1])
    swap_end = loader._swap_end

    def writer_finishes_the_swap_first(directory, base):
        if (part / name(base, ".log.swap")).exists():
            for old in segments[:2]:
                (part / name(old, ".log")).rename(part / name(old, ".log.deleted"))
            (part / name(base, ".log.swap")).rename(part / name(base, ".log"))
        return swap_end(directory, base)
    monkeypatch.setattr(loader, "_swap_end", writer_finishes_the_swap_first)
    with Log.open(part, read_only=True) as log:
        assert [s.base_offset for s in log.segments] == [segments[0], *segments[2:]]
        assert values(log) == expected_values() and log.check() == []


def test_a_swap_file_after_an_unclean_stop(part):
    segments = bases(part)
    merge_into_swap(part, segments[0], segments[1])
    unclean(part)
    with open_writable(part) as log:
        assert [s.base_offset for s in log.segments] == [segments[0], *segments[2:]]
        assert values(log) == expected_values()


def interrupted_split(path) -> None:
    """Leave the directory as a crash in the middle of a segment split does: the first
    part still ``.cleaned``, a later part already ``.swap``, the original still there."""
    base = bases(path)[1]
    data = (path / name(base, ".log")).read_bytes()
    middle = list(LogFile(path / name(base, ".log"), writable=False).headers())[3]
    (path / name(base, ".log.cleaned")).write_bytes(data[: middle.position])
    (path / name(middle.base_offset, ".log.swap")).write_bytes(data[middle.position:])


def test_a_swap_at_or_above_a_cleaned_file_is_an_interrupted_split_and_is_dropped(part):
    segments = bases(part)
    interrupted_split(part)
    with open_writable(part) as log:
        assert [s.base_offset for s in log.segments] == segments
        assert values(log) == expected_values()
    assert not any(n.endswith((".swap", ".cleaned")) for n in os.listdir(part))


def test_read_only_open_ignores_a_swap_of_an_interrupted_split(part):
    segments = bases(part)
    interrupted_split(part)
    assert open_read_only_unchanged(part) == (expected_values(), 0, 120)
    with Log.open(part, read_only=True) as log:
        assert [s.base_offset for s in log.segments] == segments
        assert log.check() == []


# -- leftovers ---------------------------------------------------------------------------------
def test_orphan_indexes_are_removed(part):
    for suffix in (".index", ".timeindex", ".txnindex"):
        (part / name(500, suffix)).write_bytes(b"\x00" * 24)
    assert open_read_only_unchanged(part) == (expected_values(), 0, 120)
    with open_writable(part) as log:
        assert sorted(log.load_report.removed_files) == sorted(
            name(500, s) for s in (".index", ".timeindex", ".txnindex"))
        assert values(log) == expected_values()
    assert not any(n.startswith(name(500, "")) for n in os.listdir(part))


def test_cleaned_and_deleted_leftovers_are_removed(part):
    segments = bases(part)
    shutil.copy(part / name(segments[1], ".log"), part / name(segments[0], ".log.cleaned"))
    shutil.copy(part / name(segments[0], ".log"), part / name(segments[0], ".log.deleted"))
    shutil.copy(part / name(segments[0], ".index"), part / name(segments[0], ".index.deleted"))
    (part / name(10_000, ".log.deleted")).write_bytes(b"garbage")
    assert open_read_only_unchanged(part) == (expected_values(), 0, 120)
    with open_writable(part) as log:
        assert [s.base_offset for s in log.segments] == segments
        assert values(log) == expected_values()
    assert not any(n.endswith((".cleaned", ".deleted")) for n in os.listdir(part))


def test_an_index_rewrite_left_by_a_crash_before_its_rename_is_removed(part):
    """An index cut that may drop a mapped page writes the kept entries to ``<index>.tmp``
    and renames it over (docs/format/index.md); a crash between the two leaves the copy."""
    segments = bases(part)
    shutil.copy(part / name(segments[0], ".index"), part / name(segments[0], ".index.tmp"))
    shutil.copy(part / name(segments[1], ".timeindex"), part / name(segments[1], ".timeindex.tmp"))
    assert open_read_only_unchanged(part) == (expected_values(), 0, 120)
    with open_writable(part) as log:
        assert [s.base_offset for s in log.segments] == segments
        assert values(log) == expected_values()
        assert sorted(log.load_report.removed_files) == sorted(
            [name(segments[0], ".index.tmp"), name(segments[1], ".timeindex.tmp")])
    assert not any(n.endswith(".tmp") for n in os.listdir(part))


# -- a torn tail ----------------------------------------------------------------------------------
@pytest.mark.parametrize("torn_bytes", [1, 30, 70])
def test_a_torn_tail_is_cut_and_read_only_stops_before_it(part, torn_bytes):
    last = part / name(bases(part)[-1], ".log")
    whole = last.read_bytes()
    with open(last, "ab") as f:  # the start of one more batch: a writer died mid-append
        f.write(whole[:torn_bytes])
    unclean(part)
    assert open_read_only_unchanged(part) == (expected_values(), 0, 120)
    with open_writable(part) as log:
        assert log.load_report.truncated_bytes == torn_bytes
        assert values(log) == expected_values()
        log.append([Record(b"value-120", timestamp=T0 + 120)])
    assert last.read_bytes()[: len(whole)] == whole


def append_zeros(path, zero_bytes: int) -> None:
    with open(path, "ab") as f:
        f.write(bytes(zero_bytes))  # what a power loss can leave where the file grew


@pytest.mark.parametrize("zero_bytes", [10, 40, 5000, 200_000])
def test_a_zero_filled_tail_after_an_unclean_stop_is_left_unread_by_a_read_only_open(part, zero_bytes):
    append_zeros(part / name(bases(part)[-1], ".log"), zero_bytes)
    unclean(part)
    assert open_read_only_unchanged(part) == (expected_values(), 0, 120)
    with Log.open(part, read_only=True, **CONFIG) as log:
        assert log.check() == []
        assert log.offset_for_timestamp(T0 + 119) == 119
        assert [b.last_offset for b in log.read(118).batches()] == [119]


def test_a_zero_filled_tail_of_a_segment_before_the_last_is_corruption(part):
    segments = bases(part)
    path = part / name(segments[-2], ".log")
    append_zeros(path, 40)
    unclean(part)
    end_of_data = path.stat().st_size - 40
    with Log.open(part, read_only=True, **CONFIG) as log:
        with pytest.raises(CorruptRecordError) as e:
            values(log)
    assert (e.value.path, e.value.position) == (str(path), end_of_data)


def test_a_non_zero_damaged_tail_of_the_last_segment_is_left_unread_and_told_with_file_and_position(part):
    """No writer alive and no marker: the last writer crashed. The read-only open stops at
    the last valid batch, changes nothing, and its load report names file and position."""
    path = part / name(bases(part)[-1], ".log")
    end_of_data = path.stat().st_size
    append_zeros(path, 40)
    with open(path, "r+b") as f:  # a size field too small to be a batch, then zeros
        f.seek(end_of_data + 11)
        f.write(b"\x05")
    unclean(part)
    assert open_read_only_unchanged(part) == (expected_values(), 0, 120)
    with Log.open(part, read_only=True, **CONFIG) as log:
        assert [(t.path, t.position, t.bytes) for t in log.load_report.truncations] == [(str(path), end_of_data, 40)]


@pytest.mark.parametrize("written_over", ["less", "exactly", "more"])
def test_a_live_reader_takes_in_what_a_writer_writes_over_a_zero_filled_tail(part, written_over):
    """A writer's recovery cuts the zeros and appends over them: a reader that opened the
    crashed log still sees every new record, whether the file ends up shorter than, as
    long as, or longer than it was with the zeros."""
    path = part / name(bases(part)[-1], ".log")
    new = [Record(b"value-%d" % (120 + i), key=b"k", timestamp=T0 + 120 + i) for i in range(RECORDS_PER_BATCH)]
    batch_bytes = len(encode_batch(new))
    zero_bytes = {"less": batch_bytes + 1, "exactly": batch_bytes, "more": batch_bytes - 1}[written_over]
    append_zeros(path, zero_bytes)
    unclean(part)
    size_with_zeros = path.stat().st_size
    with Log.open(part, read_only=True, **CONFIG) as reader:
        assert values(reader) == expected_values()
        with Log.open(part, **CONFIG) as writer:
            assert writer.load_report.truncated_bytes == zero_bytes
            writer.append(new)
        assert (path.stat().st_size > size_with_zeros) == (written_over == "more")
        assert values(reader) == expected_values(0, 122)
        assert reader.log_end_offset == 122


def test_a_zero_filled_tail_after_an_unclean_stop_is_cut_by_a_writable_open(part):
    last = part / name(bases(part)[-1], ".log")
    whole = last.read_bytes()
    with open(last, "ab") as f:
        f.write(bytes(40))
    unclean(part)
    with open_writable(part) as log:
        assert log.load_report.truncated_bytes == 40
        assert values(log) == expected_values()
    assert last.read_bytes() == whole


# -- offsets ---------------------------------------------------------------------------------------
def test_a_log_start_offset_past_the_end_leaves_one_empty_segment_there(part, tmp_path):
    (tmp_path / LOG_START_OFFSET_CHECKPOINT).write_bytes(b"0\n1\norders 0 1000\n")
    values_read, start, end = open_read_only_unchanged(part)
    assert start <= end and values_read == expected_values(start, end)
    with open_writable(part) as log:
        assert (log.log_start_offset, log.log_end_offset) == (1000, 1000)
        assert [s.base_offset for s in log.segments] == [1000]
        assert values(log) == []
        log.append([Record(b"value-1000", timestamp=T0)])
    with Log.open(part, read_only=True) as log:
        assert [(r.offset, r.value) for r in log.records()] == [(1000, b"value-1000")]
    assert bases(part) == [1000]


def test_a_log_start_offset_inside_the_log_hides_what_is_below(part, tmp_path):
    (tmp_path / LOG_START_OFFSET_CHECKPOINT).write_bytes(b"0\n1\norders 0 31\n")
    assert open_read_only_unchanged(part) == (expected_values(31), 31, 120)
    with open_writable(part) as log:
        assert log.log_start_offset == 31
        assert values(log) == expected_values(31)


# -- missing indexes -------------------------------------------------------------------------------
@pytest.mark.parametrize("missing", [(".index",), (".timeindex",), (".index", ".timeindex")])
def test_missing_indexes_are_rebuilt_as_they_were(part, missing):
    segments = bases(part)
    originals = {(b, s): (part / name(b, s)).read_bytes() for b in segments for s in missing}
    assert any(originals.values())
    for b, s in originals:
        os.remove(part / name(b, s))
    values_read, _, _ = open_read_only_unchanged(part)
    assert values_read == expected_values()
    with open_writable(part) as log:
        assert values(log) == expected_values()
        assert [log.read(o).records()[0].offset for o in range(0, 120, 7)] == list(range(0, 120, 7))
        assert log.offset_for_timestamp(T0 + 77) == 77
    rebuilt = {key: (part / name(*key)).read_bytes() for key in originals}
    assert rebuilt == originals
