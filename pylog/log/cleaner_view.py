"""``LogCleanerView``: a ``Log`` as retention and compaction see it, the
:class:`~pylog.retention.view.CleanerView` protocol (Kafka's log cleaner and retention task
reach ``UnifiedLog`` through a few of its methods; here they are this one object). It holds
the cleaner-only operations that are not part of ``Log``'s public API: deleting whole
segments, and swapping cleaned segments in.
"""

from __future__ import annotations

import os

from pylog import failpoints
from pylog.checkpoint import OffsetCheckpoint
from pylog.layout import CLEANER_OFFSET_CHECKPOINT, SWAP_SUFFIX
from pylog.log.segments import delete_segment


class LogCleanerView:
    """The :class:`CleanerView` of one ``Log`` (one per log, so that ``delete_horizon_ms``
    lasts from one pass to the next). Every member expects ``lock`` to be held."""

    def __init__(self, log):
        self._log = log
        self.lock = log._lock
        self.config = log.config
        self.delete_horizon_ms: int | None = None

    closed = property(lambda self: self._log._closed)
    read_only = property(lambda self: self._log.read_only)
    segments = property(lambda self: self._log.segments)
    active_segment = property(lambda self: self._log.active_segment)
    size_bytes = property(lambda self: self._log.size_bytes)
    log_start_offset = property(lambda self: self._log.log_start_offset)
    log_end_offset = property(lambda self: self._log.log_end_offset)
    high_watermark = property(lambda self: self._log.high_watermark)
    last_stable_offset = property(lambda self: self._log.last_stable_offset)

    @property
    def first_dirty_offset(self) -> int:
        """From ``cleaner-offset-checkpoint`` (the log start when absent or unreadable)."""
        pdir, start = self._log._dir, self.log_start_offset
        try:
            cp = OffsetCheckpoint(os.path.join(pdir.log_dir, CLEANER_OFFSET_CHECKPOINT)).read()
        except Exception:
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
        return self._log._trusted_txn_index(segment)

    def roll(self):
        return self._log.roll()

    def delete_segments(self, segments: list) -> list[int]:
        """Remove whole inactive segments (oldest first): they are renamed ``.deleted`` at
        once and their files removed after ``file_delete_delay_ms``; a fetch that holds one
        still reads it. Moves the log start offset past them. Returns their base offsets."""
        log = self._log
        log._check_writable()
        removed = []
        with log._lock:
            active = log.active_segment
            for seg in segments:
                if seg is active or not log._segments.holds(seg):
                    continue
                log._segments.remove(seg.base_offset)
                delete_segment(seg, delay_ms=self.config.file_delete_delay_ms)
                removed.append(seg.base_offset)
            if removed:
                first = log._segments.first_base_offset
                log._offsets.advance_log_start(first, log.log_end_offset)
                if log._producers is not None:
                    log._producers.delete_snapshots_below(first)
                log._write_checkpoints()
        return removed

    def new_cleaned_segment(self, base_offset: int):
        """An empty segment written with the ``.cleaned`` suffix (input to ``replace_segments``)."""
        return self._log._factory.cleaned(base_offset)

    def replace_segments(self, new_segments: list, old_segments: list) -> None:
        """Swap cleaned segments in for ``old_segments`` (Kafka's replace protocol).

        ``new_segments`` were written with the ``.cleaned`` suffix and flushed. Each is renamed
        ``.swap`` (from here a crash completes the swap on the next open), the old segments
        are renamed ``.deleted`` and dropped from the map, and the new ones lose their suffix.
        A crash at any step leaves a log that opens with nothing lost.
        """
        log = self._log
        log._check_writable()
        with log._lock:
            for seg in new_segments:
                seg.change_suffix(SWAP_SUFFIX)
            log.io.fsync_dir(log.path)
            failpoints.hit("swap.renamed")
            for seg in old_segments:
                if log._segments.holds(seg):
                    log._segments.remove(seg.base_offset)
                delete_segment(seg, delay_ms=self.config.file_delete_delay_ms)
            failpoints.hit("swap.old-deleted")
            for seg in new_segments:
                seg.change_suffix("")
                log._segments.add(seg)
            log.io.fsync_dir(log.path)
