"""``LogOffsets``: every transition keeps ``log_start <= high_watermark <= log_end`` and
``recovery_point <= log_end``; the checkpoint files round-trip; ``Log`` exposes the log
start and recovery point read-only."""

from __future__ import annotations

import pytest

from pylog import Log
from pylog.errors import InvalidOffsetError, OffsetOutOfRangeError
from pylog.layout import LOG_START_OFFSET_CHECKPOINT, RECOVERY_POINT_CHECKPOINT, REPLICATION_OFFSET_CHECKPOINT
from pylog.log.offsets import LogOffsets
from pylog.partition_dir import PartitionDir


def _offsets(log_start: int, high_watermark: int, recovery_point: int, log_end: int, *, auto: bool) -> LogOffsets:
    offsets = LogOffsets(auto_high_watermark=auto)
    offsets.loaded(log_start_offset=log_start, recovery_point=recovery_point, high_watermark=high_watermark,
                   first_base_offset=0, log_end_offset=log_end)
    return offsets


def _holds(offsets: LogOffsets, log_end: int) -> bool:
    return (offsets.log_start_offset <= offsets.high_watermark <= log_end
            and offsets.recovery_point <= log_end)


def _state(offsets: LogOffsets) -> tuple[int, int, int]:
    return offsets.log_start_offset, offsets.high_watermark, offsets.recovery_point


@pytest.mark.parametrize("auto", [True, False])
@pytest.mark.parametrize("log_start, hw, rp, log_end", [(0, 0, 0, 0), (3, 7, 5, 10), (10, 10, 10, 10), (2, 9, 0, 9)])
def test_every_transition_keeps_the_invariant(auto, log_start, hw, rp, log_end):
    transitions = [
        ("appended", lambda o: o.appended(log_end + 5), log_end + 5),
        ("truncated", lambda o: o.truncated(log_start), log_start),
        ("truncated below the log start", lambda o: o.truncated(max(log_start - 1, 0)), max(log_start - 1, 0)),
        ("started_at", lambda o: o.started_at(log_end + 100), log_end + 100),
        ("flushed_to", lambda o: o.flushed_to(log_end, log_end), log_end),
        ("advance_log_start", lambda o: o.advance_log_start(log_end, log_end), log_end),
        ("delete_records_before", lambda o: o.delete_records_before(o.high_watermark, log_end), log_end),
        ("set_high_watermark", lambda o: o.set_high_watermark(o.log_start_offset, log_end), log_end),
        ("restored", lambda o: o.restored(high_watermark=o.high_watermark, recovery_point=0, log_end_offset=log_end),
         log_end),
    ]
    for name, move, new_log_end in transitions:
        offsets = _offsets(log_start, hw, rp, log_end, auto=auto)
        assert _holds(offsets, log_end), name
        move(offsets)
        assert _holds(offsets, new_log_end), (name, offsets)


def test_loaded_clamps_checkpointed_values_into_the_segments_found():
    offsets = LogOffsets(auto_high_watermark=False)
    offsets.loaded(log_start_offset=None, recovery_point=50, high_watermark=1, first_base_offset=4, log_end_offset=20)
    assert _state(offsets) == (4, 4, 20)
    offsets.loaded(log_start_offset=30, recovery_point=None, high_watermark=None, first_base_offset=0,
                   log_end_offset=20)
    assert _state(offsets) == (20, 20, 0)


def test_the_high_watermark_follows_the_log_end_only_when_automatic():
    auto, manual = _offsets(0, 5, 5, 5, auto=True), _offsets(0, 5, 5, 5, auto=False)
    for offsets in (auto, manual):
        offsets.appended(9)
    assert auto.high_watermark == 9 and manual.high_watermark == 5
    for offsets in (auto, manual):
        offsets.truncated(7)
    assert auto.high_watermark == 7 and manual.high_watermark == 5


def test_advance_log_start_pulls_the_high_watermark_and_recovery_point_up_but_never_moves_back():
    offsets = _offsets(0, 2, 1, 10, auto=False)
    offsets.advance_log_start(6, 10)
    assert _state(offsets) == (6, 6, 6)
    offsets.advance_log_start(3, 10)
    assert _state(offsets) == (6, 6, 6)


def test_delete_records_before_moves_only_the_log_start():
    offsets = _offsets(0, 8, 2, 10, auto=False)
    offsets.delete_records_before(5, 10)
    assert _state(offsets) == (5, 8, 2)


@pytest.mark.parametrize("offset", [1, 11])
def test_a_high_watermark_outside_the_log_is_refused_and_changes_nothing(offset):
    offsets = _offsets(2, 6, 3, 10, auto=False)
    with pytest.raises(InvalidOffsetError, match=f"high watermark {offset} is outside \\[2, 10\\]"):
        offsets.set_high_watermark(offset, 10)
    assert _state(offsets) == (2, 6, 3)


def test_a_move_that_breaks_the_invariant_is_caught():
    offsets = _offsets(0, 5, 5, 5, auto=False)
    with pytest.raises(AssertionError):
        offsets.flushed_to(9, 5)


def test_a_high_watermark_managed_by_hand_and_never_checkpointed_starts_at_the_log_start():
    offsets = LogOffsets(auto_high_watermark=False)
    offsets.loaded(log_start_offset=3, recovery_point=None, high_watermark=None, first_base_offset=0,
                   log_end_offset=10)
    assert offsets.high_watermark == 3  # not 10: nothing of the log is known to be committed


def test_checkpoint_round_trip(tmp_path):
    pdir = PartitionDir.open(tmp_path / "t-0", create=True)
    offsets = _offsets(3, 7, 5, 10, auto=False)
    offsets.checkpoint(pdir)
    again = LogOffsets(auto_high_watermark=False)
    read = pdir.read_offsets()
    again.loaded(log_start_offset=read[LOG_START_OFFSET_CHECKPOINT], recovery_point=read[RECOVERY_POINT_CHECKPOINT],
                 high_watermark=read[REPLICATION_OFFSET_CHECKPOINT], first_base_offset=0, log_end_offset=10)
    assert _state(again) == (3, 7, 5)
    offsets.set_high_watermark(9, 10)
    offsets.checkpoint_high_watermark(pdir)
    assert pdir.read_offsets()[REPLICATION_OFFSET_CHECKPOINT] == 9


def test_log_start_and_recovery_point_are_read_only_on_the_log(tmp_path):
    with Log.open(tmp_path / "t-0") as log:
        log.append([b"a", b"b"])
        before = (log.log_start_offset, log.recovery_point)
        for name in ("log_start_offset", "recovery_point"):
            with pytest.raises(AttributeError):
                setattr(log, name, 1)
        assert (log.log_start_offset, log.recovery_point) == before


def test_delete_records_past_the_high_watermark_is_refused_and_below_the_log_start_moves_nothing():
    offsets = _offsets(2, 6, 3, 10, auto=False)
    with pytest.raises(OffsetOutOfRangeError, match="before 7: past the high watermark 6"):
        offsets.delete_records_before(7, 10)
    assert offsets.delete_records_before(2, 10) is False
    assert _state(offsets) == (2, 6, 3)
    assert offsets.delete_records_before(6, 10) is True
    assert _state(offsets) == (6, 6, 3)
