"""``CleanerView``: all that retention and compaction may use of a log (in Kafka the log
cleaner and the retention task reach ``UnifiedLog`` through a handful of its methods; here
that handful is one declared protocol). ``Log.cleaner_view`` implements it; ``retention/``
touches nothing else of a log, so a change inside ``pylog/log/`` cannot break it unseen.

The segment-swapping methods (``new_cleaned_segment``, ``replace_segments``,
``delete_segments``) are not on ``Log``'s public surface: only this view offers them.
"""

from __future__ import annotations

from typing import ContextManager, Protocol


class CleanerView(Protocol):
    """One log as retention and compaction see it. Hold ``lock`` across a pass: every
    other member assumes it is held (it is reentrant)."""

    #: The log's lock (reentrant): appends, reads' lookups and other passes wait while held.
    lock: ContextManager
    #: The log's ``LogConfig``.
    config: object
    #: Compaction's tombstone schedule: the earliest delete horizon (ms) stamped on a batch
    #: kept by the last pass, None when it stamped none. In memory only, as in Kafka: after a
    #: restart the first pass finds the horizons in the batches again.
    delete_horizon_ms: int | None

    #: Read-only members, as ``Log``'s properties of the same names.
    closed: bool
    read_only: bool
    segments: list
    active_segment: object
    size_bytes: int
    log_start_offset: int
    log_end_offset: int
    high_watermark: int
    last_stable_offset: int

    @property
    def first_dirty_offset(self) -> int:
        """Where the next compaction's dirty range starts (``cleaner-offset-checkpoint``),
        at least the log start offset."""

    @first_dirty_offset.setter
    def first_dirty_offset(self, offset: int) -> None:
        """Checkpoint it (tmp, fsync, rename)."""

    def producer_last_offsets(self) -> dict[int, tuple[int | None, int]]:
        """Producer id -> (last offset of its last data batch, or None; its epoch)."""

    def trusted_txn_index(self, segment):
        """``segment``'s ``.txnindex``, checked against its markers first (O(segment bytes)
        once per segment per open)."""

    def roll(self):
        """Start a new active segment (``Log.roll``)."""

    def delete_segments(self, segments: list) -> list[int]:
        """Remove whole inactive segments, oldest first; returns their base offsets."""

    def expire_producers(self, now_ms: int | None = None) -> list[int]:
        """Forget producers idle past ``producer_id_expiration_ms`` with no open transaction;
        returns their ids."""

    def new_cleaned_segment(self, base_offset: int):
        """An empty segment with the ``.cleaned`` suffix, to fill and pass to ``replace_segments``."""

    def replace_segments(self, new_segments: list, old_segments: list) -> None:
        """Swap flushed ``.cleaned`` segments in for ``old_segments``, crash-safe at each step."""
