"""``LogReplicaView``: a ``Log`` as replication sees it (Kafka's ``Partition`` reaches
``UnifiedLog`` through a few calls that no client makes; here they are this one object,
as retention's are ``LogCleanerView``): the leader epoch stamped on appends, where an epoch
ends (OffsetsForLeaderEpoch), the high watermark moved without an immediate checkpoint,
and starting the log over at an offset. pylog/replication/replica.py is its user.
"""

from __future__ import annotations

import weakref

from pylog.arguments import check_int
from pylog.layout import INT32_MAX
from pylog.log.appends import check_offset
from pylog.record.encode import now_ms


class LogReplicaView:
    """The replication operations of one ``Log`` (one per log, ``log.replica_view``)."""

    def __init__(self, log):
        self._log = weakref.proxy(log)  # no cycle: a dropped Log is released at once
        self._leader_epoch = 0

    @property
    def leader_epoch(self) -> int:
        """The epoch stamped into leader appends: the one set, never below the latest in
        ``leader-epoch-checkpoint``."""
        return max(self._leader_epoch, self._log._epochs.latest_epoch)

    @leader_epoch.setter
    def leader_epoch(self, epoch: int) -> None:
        check_int(epoch, "leader_epoch", (0, INT32_MAX))
        self._leader_epoch = epoch

    def end_offset_for_epoch(self, epoch: int) -> tuple[int, int]:
        """Kafka's OffsetsForLeaderEpoch: ``(the largest epoch <= epoch this log knows, its
        end offset)``: the start of the next epoch, or the log end for the latest; ``(-1, -1)``
        when unknown (:mod:`pylog.log.leader_epoch`); a read-only log first refreshes. O(epochs)."""
        log = self._log
        log._local.check_open()
        check_int(epoch, "epoch", (-1, INT32_MAX))
        log.refresh()
        with log._lock:
            return log._epochs.end_offset_for(epoch, log_end_offset=log.log_end_offset)

    def update_high_watermark(self, offset: int, *, checkpoint: bool = True) -> None:
        """Move the high watermark (within the log). ``checkpoint=False`` leaves its
        checkpoint to the next flush or close, as Kafka's replication does on every fetch;
        ``log.high_watermark = offset`` checkpoints at once."""
        log = self._log
        log._local.check_writable()
        check_offset(offset, "high_watermark")
        with log._lock:
            log._offsets.set_high_watermark(offset, log.log_end_offset)
            log._producers.first_unstable_offset(offset)  # transactions completed below it are replicated now
            if checkpoint:
                log._offsets.checkpoint_high_watermark(log._dir)

    def truncate_fully_and_start_at(self, offset: int) -> None:
        """Empty the log and start it again at ``offset``, its new log start, high watermark
        and log end (Kafka's ``truncateFullyAndStartAt``: a follower whose log end fell below
        its leader's log start). Every segment file is deleted; durable on return. O(segments)."""
        log = self._log
        log._local.check_writable()
        check_offset(offset, "offset")
        with log._lock:
            log._local.truncate_fully_and_start_at(offset)
            log._offsets.started_at(offset)
            log._epochs.clear()
            log._producers.truncate_and_reload(offset, offset, log._local.batches_between, now_ms())
            log.flush()
