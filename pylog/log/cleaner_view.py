"""``LogCleanerView``: a ``Log`` as retention and compaction see it, the
:class:`~pylog.retention.view.CleanerView` protocol (Kafka's log cleaner and retention task
reach ``UnifiedLog`` through a few of its methods; here they are this one object). It holds
the cleaner-only operations that are not part of ``Log``'s public API: deleting whole
segments, and swapping cleaned segments in.
"""

from __future__ import annotations

import os
import weakref

from pylog.checkpoint import OffsetCheckpoint
from pylog.errors import CorruptCheckpointError
from pylog.layout import CLEANER_OFFSET_CHECKPOINT


class LogCleanerView:
    """The :class:`pylog.retention.view.CleanerView` of one ``Log`` (one per log, so that ``delete_horizon_ms``
    lasts from one pass to the next). Every member expects ``lock`` to be held."""

    def __init__(self, log):
        self._log = weakref.proxy(log)  # no cycle: a dropped Log is released at once
        self._local = log._local
        self.lock = log._lock
        self.delete_horizon_ms: int | None = None

    config = property(lambda self: self._log.config)  # the log's, as ``update_config`` last set it
    closed = property(lambda self: self._local.closed)
    read_only = property(lambda self: self._log.read_only)
    segments = property(lambda self: self._log.segments)
    active_segment = property(lambda self: self._local.active)
    size_bytes = property(lambda self: self._log.size_bytes)
    log_start_offset = property(lambda self: self._log.log_start_offset)
    log_end_offset = property(lambda self: self._local.log_end_offset)
    high_watermark = property(lambda self: self._log.high_watermark)
    last_stable_offset = property(lambda self: self._log.last_stable_offset)

    @property
    def first_dirty_offset(self) -> int:
        """From ``cleaner-offset-checkpoint`` (the log start when absent or unreadable)."""
        pdir, start = self._log._dir, self.log_start_offset
        try:
            cp = OffsetCheckpoint(os.path.join(pdir.log_dir, CLEANER_OFFSET_CHECKPOINT)).read()
        except (CorruptCheckpointError, OSError):
            cp = {}
        return max(cp.get(pdir.key, start), start)

    @first_dirty_offset.setter
    def first_dirty_offset(self, offset: int) -> None:
        self._log._dir.write_offsets({CLEANER_OFFSET_CHECKPOINT: offset})

    def producer_last_offsets(self) -> dict[int, tuple[int | None, int]]:
        """Producer id -> (last offset of its last data batch, or None; its epoch): the batch a
        pass keeps, emptied if need be, so that the producer's sequence and epoch survive."""
        producers = self._log._producers
        entries = producers.entries() if producers else {}
        return {pid: (e.last_offset if e.last_offset >= 0 else None, e.epoch) for pid, e in entries.items()}

    def trusted_txn_index(self, segment):
        return self._local.trusted_txn_index(segment, self.log_start_offset)

    def roll(self):
        return self._log.roll()

    def delete_segments(self, segments: list) -> list[int]:
        """Remove whole inactive segments, oldest first (see ``LocalLog.delete_segments``),
        move the log start offset past them, drop the producer snapshots below it and
        checkpoint. Returns their base offsets."""
        log = self._log
        self._local.check_writable()
        with self.lock:
            removed = self._local.delete_segments(segments)
            if removed:
                first = self._local.segments.first_base_offset
                log._offsets.advance_log_start(first, self.log_end_offset)
                log._epochs.truncate_from_start(self.log_start_offset)
                log._producers.delete_snapshots_below(first)
                log._offsets.checkpoint(log._dir)
        return removed

    def expire_producers(self, now_ms: int | None = None) -> list[int]:
        """Forget producers idle for ``producer_id_expiration_ms`` (by their last batch's
        timestamp) with no open transaction, as Kafka's periodic check does; returns their
        ids. A later batch of one starts afresh (sequence 0 accepted, duplicates no longer
        recognised). In memory until the next snapshot."""
        self._local.check_writable()
        with self.lock:
            return self._log._producers.remove_expired(now_ms)

    def new_cleaned_segment(self, base_offset: int):
        return self._local.new_cleaned_segment(base_offset)

    def replace_segments(self, new_segments: list, old_segments: list) -> None:
        """Swap flushed ``.cleaned`` segments in (see ``LocalLog.replace_segments``)."""
        self._local.check_writable()
        with self.lock:
            self._local.replace_segments(new_segments, old_segments)
