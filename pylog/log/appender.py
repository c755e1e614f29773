"""``LogAppender``: the steps of one append to a partition log, Kafka's ``UnifiedLog.append``
with ``LogValidator``'s checks: validate the batches (timestamps, offsets, size, producer
sequence), roll if due, write to the ``LocalLog``, then take the batches into the leader
epochs, producer state and ``LogOffsets``, and flush when the flush policy says so.

The ``Log`` calls it under its lock with batches whose offsets are final (pylog.log.appends
encodes and checks them before). Durability: none beyond the write unless the policy flushed.
"""

from __future__ import annotations

from pylog.config import LogConfig
from pylog.errors import InvalidOffsetError, RecordTooLargeError, StorageError
from pylog.layout import INT64_MAX
from pylog.log.appends import AppendInfo, AppendSummary, duplicate_info
from pylog.log.loader import lso_after
from pylog.log.validation import validate_timestamps
from pylog.record.batch import decode_batches
from pylog.record.encode import now_ms
from pylog.segment.segment import Segment


class LogAppender:
    """Writes, rolls and flushes a writable log's parts: its ``LocalLog``, ``LogOffsets``,
    ``ProducerStateManager`` and ``LeaderEpochFileCache``, checkpointing in its partition
    dir ``pdir``. The ``Log`` calls each step under its lock, once it checked it is writable."""

    def __init__(self, local, offsets, producers, epochs, pdir):
        self._local, self._offsets, self._producers, self._epochs, self._dir = local, offsets, producers, epochs, pdir
        #: when the log last flushed (ms): the flush policy's ``flush_ms`` counts from it
        self.last_flush_ms = now_ms()

    def append(self, data: bytes, config: LogConfig, *, from_client: bool, now: int, batches=None) -> AppendInfo:
        """Write whole batches (offsets final), rolling first if needed, between producer
        state's validation and its update. A failure after the write (``.txnindex``, flush)
        takes the append back (an unflushed cut: a crash may bring the batches back).
        ``batches``: ``data`` decoded, when the caller already did. Cost: O(bytes), one write."""
        batches = batches or list(decode_batches(data))
        summary = self._validated(data, batches, config, from_client=from_client, now=now)
        producers = self._producers  # a writer's, always loaded
        if summary.has_producer or len(batches) > 1:
            duplicate = producers.validate(batches, from_client=from_client)
            if duplicate is not None:
                return duplicate_info(duplicate)
        local, offsets = self._local, self._offsets
        if local.should_roll(append_bytes=len(data), max_timestamp=summary.max_timestamp,
                             last_offset=summary.last_offset, now=now):
            self.roll(max(summary.first_offset, local.log_end_offset))
        high_watermark, recovery_point = offsets.high_watermark, offsets.recovery_point
        local.append(data, last_offset=summary.last_offset, max_timestamp=summary.max_timestamp,
                     offset_of_max_timestamp=summary.offset_of_max_timestamp)
        try:
            self._epochs.assign_batches(batches)
            producers.replay(batches, lambda txn: local.index_aborted(txn._replace(
                last_stable_offset=lso_after(producers, offsets.high_watermark, txn.last_offset)),
                offsets.log_start_offset))
            offsets.appended(local.log_end_offset)
            if (local.log_end_offset - offsets.recovery_point >= config.flush_messages
                    or now - self.last_flush_ms >= config.flush_ms):
                self.flush()
        except StorageError:
            self._take_back(summary, high_watermark=high_watermark, recovery_point=recovery_point)
            raise
        return summary.info(len(data))

    def roll(self, new_base_offset: int | None) -> Segment:
        """``Log.roll``'s steps: a new active segment at the log end (or ``new_base_offset``
        above it), the old one finished, producer state snapshotted and everything flushed."""
        local = self._local
        old = local.active
        base = max(new_base_offset if new_base_offset is not None else 0, local.log_end_offset)
        if base == old.base_offset and old.size_bytes == 0:
            return old
        old.on_become_inactive()
        self._producers.take_snapshot(base)
        self.flush()  # a failure up to here leaves the old segment active
        new = local.roll(base)  # the old active segment is now one of the last two:
        self._producers.delete_snapshots_below(local.min_snapshot_offset_to_retain(self._offsets.recovery_point))
        return new

    def flush(self) -> None:
        """``Log.flush``'s steps: fsync above the recovery point, move it to the log end and
        checkpoint the offsets; producer snapshots below what recovery needs go."""
        local, offsets = self._local, self._offsets
        local.flush(offsets.recovery_point)
        offsets.flushed_to(local.log_end_offset, local.log_end_offset)
        self.last_flush_ms = now_ms()
        offsets.checkpoint(self._dir)
        self._producers.delete_snapshots_below(local.min_snapshot_offset_to_retain(offsets.recovery_point))

    @staticmethod
    def _validated(data: bytes, batches: list, config: LogConfig, *, from_client: bool, now: int) -> AppendSummary:
        """The batches' summary, once their timestamps, last offset and size pass."""
        validate_timestamps(batches, config, now, from_client=from_client)
        summary = AppendSummary.of(batches)
        if summary.last_offset >= INT64_MAX:
            raise InvalidOffsetError(f"append of offsets up to {summary.last_offset} refused: the log end offset "
                                     f"after it must fit an int64, so the last offset a log holds is {INT64_MAX - 1}")
        if len(data) > config.segment_bytes:
            raise RecordTooLargeError(f"append of {len(data)} bytes exceeds segment_bytes {config.segment_bytes}")
        return summary

    def _take_back(self, summary: AppendSummary, *, high_watermark: int, recovery_point: int) -> None:
        """Undo a written append whose follow-up failed: cut the active segment, restore the
        offsets, reload producer state if the batches carried a producer, cut the epochs."""
        local = self._local
        local.active.truncate_to(summary.first_offset)
        self._offsets.restored(high_watermark=high_watermark, recovery_point=recovery_point,
                               log_end_offset=local.log_end_offset)
        if summary.has_producer:
            local.reload_producers(self._producers, self._offsets.log_start_offset)
        self._epochs.truncate_from_end(summary.first_offset)  # last: a failed write leaves only the file stale
