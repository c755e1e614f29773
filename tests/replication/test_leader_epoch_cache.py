"""LeaderEpochFileCache alone: Kafka's rules for assigning, truncating and answering
OffsetsForLeaderEpoch, and the checkpoint file it writes."""

from __future__ import annotations

import pytest

from pylog.checkpoint import LeaderEpochCheckpoint
from pylog.errors import CorruptCheckpointError, InvalidArgumentError
from pylog.log.leader_epoch import LeaderEpochFileCache


@pytest.fixture
def cache(tmp_path):
    return LeaderEpochFileCache(str(tmp_path / "leader-epoch-checkpoint"))


def on_disk(cache) -> list[tuple[int, int]]:
    return LeaderEpochCheckpoint(cache.path).read()


def test_assign_writes_the_file_in_kafkas_format(cache):
    cache.assign(2, 6)
    with open(cache.path) as f:
        assert f.read() == "0\n1\n2 6\n"


def test_the_same_epoch_at_a_later_offset_changes_nothing(cache):
    cache.assign(2, 6)
    cache.assign(2, 10)
    assert cache.entries == [(2, 6)] == on_disk(cache)


def test_the_same_epoch_at_an_earlier_offset_moves_its_start(cache):
    cache.assign(2, 6)
    cache.assign(2, 4)
    assert cache.entries == [(2, 4)]


def test_a_lower_epoch_removes_the_newer_entries_it_contradicts(cache):
    for e, s in [(1, 0), (2, 5), (3, 8)]:
        cache.assign(e, s)
    cache.assign(2, 9)
    assert cache.entries == [(1, 0), (2, 9)] == on_disk(cache)


def test_a_new_epoch_below_the_latest_start_removes_later_entries(cache):
    cache.assign(1, 5)
    cache.assign(2, 3)
    assert cache.entries == [(2, 3)]


def test_negative_entries_are_refused_and_change_nothing(cache):
    cache.assign(1, 5)
    with pytest.raises(InvalidArgumentError):
        cache.assign(-1, 6)
    assert cache.entries == [(1, 5)] == on_disk(cache)


def test_end_offset_for_the_latest_epoch_is_the_log_end(cache):
    cache.assign(2, 6)
    assert cache.end_offset_for(2, log_end_offset=11) == (2, 11)


def test_end_offset_for_an_older_epoch_is_the_next_epochs_start(cache):
    for e, s in [(1, 0), (3, 6), (5, 9)]:
        cache.assign(e, s)
    assert cache.end_offset_for(1, log_end_offset=20) == (1, 6)
    assert cache.end_offset_for(2, log_end_offset=20) == (1, 6)  # unknown epoch: the largest below it
    assert cache.end_offset_for(4, log_end_offset=20) == (3, 9)


def test_end_offset_for_an_epoch_older_than_all_is_the_first_start(cache):
    cache.assign(3, 6)
    cache.assign(4, 8)
    assert cache.end_offset_for(1, log_end_offset=20) == (1, 6)


def test_end_offset_for_undefined_newer_or_empty_is_undefined(cache):
    assert cache.end_offset_for(0, log_end_offset=5) == (-1, -1)
    cache.assign(3, 6)
    assert cache.end_offset_for(-1, log_end_offset=9) == (-1, -1)
    assert cache.end_offset_for(4, log_end_offset=9) == (-1, -1)


def test_truncate_from_end_removes_entries_starting_at_or_after(cache):
    for e, s in [(1, 0), (2, 5), (3, 8)]:
        cache.assign(e, s)
    cache.truncate_from_end(8)
    assert cache.entries == [(1, 0), (2, 5)] == on_disk(cache)
    cache.truncate_from_end(100)
    assert cache.entries == [(1, 0), (2, 5)]


def test_truncate_from_start_keeps_the_epoch_holding_the_new_start(cache):
    for e, s in [(1, 0), (2, 5), (3, 8)]:
        cache.assign(e, s)
    cache.truncate_from_start(6)
    assert cache.entries == [(2, 6), (3, 8)] == on_disk(cache)


def test_truncate_from_start_at_an_entry_keeps_it(cache):
    for e, s in [(1, 0), (2, 5)]:
        cache.assign(e, s)
    cache.truncate_from_start(5)
    assert cache.entries == [(2, 5)]


def test_truncate_from_start_before_every_entry_changes_nothing(cache):
    cache.assign(1, 5)
    cache.truncate_from_start(3)
    assert cache.entries == [(1, 5)]


def test_clear_empties_the_file(cache):
    cache.assign(1, 5)
    cache.clear()
    assert cache.entries == [] == on_disk(cache)


def test_load_reads_back_what_was_written(cache, tmp_path):
    for e, s in [(0, 0), (4, 7)]:
        cache.assign(e, s)
    assert LeaderEpochFileCache.load(str(tmp_path)).entries == [(0, 0), (4, 7)]


def test_load_refuses_entries_that_do_not_increase(tmp_path):
    LeaderEpochCheckpoint(tmp_path / "leader-epoch-checkpoint").write([(3, 5), (2, 7)])
    with pytest.raises(CorruptCheckpointError, match="leader-epoch-checkpoint"):
        LeaderEpochFileCache.load(str(tmp_path))


def test_epoch_for_offset(cache):
    for e, s in [(1, 2), (3, 6)]:
        cache.assign(e, s)
    assert [cache.epoch_for_offset(o) for o in (0, 2, 5, 6, 9)] == [-1, 1, 1, 3, 3]
