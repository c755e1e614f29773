"""``LogOffsets``: the log start offset, high watermark and recovery point of one
partition, and the only code that moves them (Kafka's ``LoadedLogOffsets`` plus the
update paths of ``UnifiedLog`` and ``LocalLog``).

Each move is a named transition given the log end offset (which the segments own), and
each ends in the same check of the invariant
``log_start <= high_watermark <= log_end`` and ``recovery_point <= log_end``.
Not thread-safe: the ``Log``'s lock guards it.
"""

from __future__ import annotations

from pylog.errors import InvalidOffsetError, OffsetOutOfRangeError
from pylog.layout import LOG_START_OFFSET_CHECKPOINT, RECOVERY_POINT_CHECKPOINT, REPLICATION_OFFSET_CHECKPOINT


class LogOffsets:
    """The three offsets a partition checkpoints. ``auto_high_watermark`` keeps the high
    watermark at the log end (a single-node log).

    >>> offsets = LogOffsets(auto_high_watermark=True)
    >>> offsets.appended(log_end_offset=5)
    >>> offsets.advance_log_start(3, log_end_offset=5)
    >>> offsets.log_start_offset, offsets.high_watermark, offsets.recovery_point
    (3, 5, 3)
    """

    def __init__(self, *, auto_high_watermark: bool):
        self.auto_high_watermark = auto_high_watermark
        self._log_start = 0
        self._high_watermark = 0
        self._recovery_point = 0

    @property
    def log_start_offset(self) -> int:
        """The first readable offset."""
        return self._log_start

    @property
    def high_watermark(self) -> int:
        """Last committed offset + 1."""
        return self._high_watermark

    @property
    def recovery_point(self) -> int:
        """Everything below it is flushed: recovery after a crash starts at its segment."""
        return self._recovery_point

    def __repr__(self) -> str:
        return (f"LogOffsets(log_start_offset={self._log_start}, high_watermark={self._high_watermark}, "
                f"recovery_point={self._recovery_point})")

    # -- transitions ------------------------------------------------------------------------------
    def loaded(self, *, log_start_offset: int | None, recovery_point: int | None, high_watermark: int | None,
               first_base_offset: int, log_end_offset: int) -> None:
        """Take checkpointed values (None where absent) within the segments found: the log
        start is at least the first segment's base offset, nothing passes the log end, and
        the high watermark is at least the log start (the log end when automatic; the log
        start when managed by hand and absent, as a Kafka replica takes 0: nothing of its log
        is known to be committed)."""
        self._log_start = min(max(log_start_offset or 0, first_base_offset), log_end_offset)
        self._recovery_point = min(recovery_point or 0, log_end_offset)
        if self.auto_high_watermark:
            self._high_watermark = log_end_offset
        else:
            self._high_watermark = min(max(high_watermark or 0, self._log_start), log_end_offset)
        self._check(log_end_offset)

    def started_at(self, offset: int) -> None:
        """The log was emptied and starts again at ``offset`` (its new log end)."""
        self._log_start = self._high_watermark = self._recovery_point = offset
        self._check(offset)

    def appended(self, log_end_offset: int) -> None:
        """The log end grew (an append, or a reader saw one): the high watermark follows
        when automatic."""
        if self.auto_high_watermark:
            self._high_watermark = log_end_offset
        self._check(log_end_offset)

    def restored(self, *, high_watermark: int, recovery_point: int, log_end_offset: int) -> None:
        """An append was taken back: the high watermark and recovery point it found return."""
        self._high_watermark, self._recovery_point = high_watermark, recovery_point
        self._check(log_end_offset)

    def set_high_watermark(self, offset: int, log_end_offset: int) -> None:
        """Move the high watermark (a replica's commit); :class:`InvalidOffsetError` outside
        ``[log start, log end]``, and nothing changes."""
        if not self._log_start <= offset <= log_end_offset:
            raise InvalidOffsetError(f"high watermark {offset} is outside [{self._log_start}, {log_end_offset}]")
        self._high_watermark = offset
        self._check(log_end_offset)

    def flushed_to(self, offset: int, log_end_offset: int) -> None:
        """Everything below ``offset`` is durable: the recovery point moves up to it."""
        self._recovery_point = max(self._recovery_point, offset)
        self._check(log_end_offset)

    def truncated(self, log_end_offset: int) -> None:
        """The log was cut back to ``log_end_offset``: every offset comes down with it (the
        high watermark to the log end when automatic)."""
        self._log_start = min(self._log_start, log_end_offset)
        self._recovery_point = min(self._recovery_point, log_end_offset)
        if self.auto_high_watermark:
            self._high_watermark = log_end_offset
        else:
            self._high_watermark = min(self._high_watermark, log_end_offset)
        self._check(log_end_offset)

    def delete_records_before(self, offset: int, log_end_offset: int) -> bool:
        """Kafka's DeleteRecords: the log start moves up to ``offset``; False when it is
        there already. Past the high watermark: :class:`OffsetOutOfRangeError`, nothing moves."""
        if offset > self._high_watermark:
            raise OffsetOutOfRangeError(
                f"cannot delete records before {offset}: past the high watermark {self._high_watermark}")
        if offset <= self._log_start:
            return False
        self._log_start = offset
        self._check(log_end_offset)
        return True

    def advance_log_start(self, offset: int, log_end_offset: int) -> None:
        """Segments below ``offset`` are gone: the log start moves up to it if lower, and the
        high watermark and recovery point up to the log start."""
        self._log_start = max(self._log_start, offset)
        self._high_watermark = max(self._high_watermark, self._log_start)
        self._recovery_point = max(self._recovery_point, self._log_start)
        self._check(log_end_offset)

    # -- checkpoints ---------------------------------------------------------------------------
    def checkpoint(self, pdir) -> None:
        """Write all three to the log dir's checkpoint files (each: tmp, fsync, rename)."""
        pdir.write_offsets({
            RECOVERY_POINT_CHECKPOINT: self._recovery_point,
            LOG_START_OFFSET_CHECKPOINT: self._log_start,
            REPLICATION_OFFSET_CHECKPOINT: self._high_watermark,
        })

    def checkpoint_high_watermark(self, pdir) -> None:
        """Write the high watermark alone (replication-offset-checkpoint)."""
        pdir.write_offsets({REPLICATION_OFFSET_CHECKPOINT: self._high_watermark})

    def _check(self, log_end_offset: int) -> None:
        assert self._log_start <= self._high_watermark <= log_end_offset, (self, log_end_offset)
        assert self._recovery_point <= log_end_offset, (self, log_end_offset)

