"""``OffsetFetcher``: a consumer's offset look-ups, as Kafka's ``OffsetFetcher``: the
beginning, end and by-timestamp offsets of any partition, and the reset of assigned
partitions' positions (``auto_offset_reset``, ``seek_to_beginning``, ``seek_to_end``).

Each answer is the partition's ListOffsets (:meth:`Log.list_offset
<pylog.log.reading.RecordReads.list_offset>`) at the consumer's isolation level: "latest" is
the high watermark for ``read_uncommitted``, as Kafka's consumer has it (on a replica's log
below its end, what the leader committed; on a single-node log, the log end), and the last
stable offset for ``read_committed``. Costs: O(1) a partition for earliest and latest, plus a
catch-up with the writer; by timestamp, O(segments + index interval). Nothing is written.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import NamedTuple

from pylog.arguments import check_int
from pylog.clients.partition_logs import PartitionLogs, as_topic_partition, partition_list
from pylog.clients.subscription_state import SubscriptionState, TopicPartition
from pylog.errors import InvalidArgumentError, OffsetOutOfRangeError, UnknownTopicError
from pylog.layout import INT64_MAX
from pylog.log import Log


class OffsetAndTimestamp(NamedTuple):
    offset: int
    timestamp: int


class OffsetFetcher:
    """Offset look-ups over ``logs`` for the positions of ``subscriptions`` (see the
    module's doc). ``isolation``: ``"uncommitted"`` or ``"committed"``;
    ``auto_offset_reset``: ``"earliest"``, ``"latest"`` or ``"none"``."""

    def __init__(self, logs: PartitionLogs, subscriptions: SubscriptionState, *, isolation: str,
                 auto_offset_reset: str):
        self._logs, self._subscriptions = logs, subscriptions
        self.isolation, self.auto_offset_reset = isolation, auto_offset_reset

    def list_offset(self, log: Log, spec) -> int | None:
        """``log``'s ListOffsets answer for ``spec`` at the consumer's isolation level;
        :class:`UnknownTopicError` once its partition was deleted."""
        with self._logs.deleted_as_unknown(log):
            return log.list_offset(spec, isolation=self.isolation)

    def beginning_offsets(self, partitions) -> dict:
        return {tp: self.list_offset(self._logs.any_log(tp), "earliest") for tp in partition_list(partitions)}

    def end_offsets(self, partitions) -> dict:
        return {tp: self.list_offset(self._logs.any_log(tp), "latest") for tp in partition_list(partitions)}

    def offsets_for_times(self, timestamps: dict) -> dict:
        """``{tp: OffsetAndTimestamp | None}``: the earliest offset whose timestamp is >=
        the given one (Kafka's offsetsForTimes), None when no readable record is that late.
        O(segments + index interval) each."""
        if not isinstance(timestamps, Mapping):
            raise InvalidArgumentError(f"offsets_for_times() takes a dict {{TopicPartition: timestamp in ms}}, "
                                       f"not {timestamps!r}")
        for tp, ts in timestamps.items():
            check_int(ts, f"the timestamp to look up for {as_topic_partition(tp)}", (0, INT64_MAX))
        out = {}
        for tp, ts in timestamps.items():
            log = self._logs.any_log(tp)
            offset = self.list_offset(log, ts)
            with self._logs.deleted_as_unknown(log):
                rec = None if offset is None else next(iter(log.read(offset, 1 << 16).records()), None)
            out[as_topic_partition(tp)] = None if offset is None else \
                OffsetAndTimestamp(offset, rec.timestamp if rec else ts)
        return out

    def high_watermark(self, tp: TopicPartition) -> int:
        """The assigned ``tp``'s high watermark now (whatever the isolation level)."""
        return self._logs.refreshed(self._logs.log(tp)).high_watermark

    def seek_to(self, tp: TopicPartition, spec: str) -> None:
        """Move the assigned ``tp``'s position to ``spec`` (``"earliest"`` or ``"latest"``)."""
        self._subscriptions.seek(tp, self.list_offset(self._logs.refreshed(self._logs.log(tp)), spec))

    def reset_position(self, tp: TopicPartition, out_of_range: int | None = None) -> None:
        """Set ``tp``'s position where ``auto_offset_reset`` says (``out_of_range``: the
        position that was out of range, None: there was none), or raise
        :class:`OffsetOutOfRangeError` for ``"none"``."""
        if self.auto_offset_reset == "none":
            log = self._logs.refreshed(self._logs.log(tp))
            what = "has no committed offset" if out_of_range is None else f"position {out_of_range} is out of range"
            raise OffsetOutOfRangeError(f"{tp.topic}-{tp.partition} {what} "
                                        f"[{log.log_start_offset}, {log.log_end_offset}] and auto_offset_reset "
                                        f"is 'none'")
        self.seek_to(tp, self.auto_offset_reset)

    def update_fetch_positions(self, coordinator, partitions=None, *, deleted_ok: bool = True) -> None:
        """Kafka's ``updateFetchPositions``, before each fetch: every assigned partition (or
        each of ``partitions``) without a position takes the group's committed offset (with a
        ``coordinator``, the group's
        :class:`~pylog.clients.consumer_coordinator.ConsumerCoordinator`), else where
        ``auto_offset_reset`` says (:meth:`reset_positions`), so the next commit covers all of them."""
        if coordinator is not None:
            coordinator.refresh_committed_offsets(partitions)
        self.reset_positions(partitions, deleted_ok=deleted_ok)

    def reset_positions(self, partitions=None, *, deleted_ok: bool = True) -> None:
        """Kafka's ``resetPositionsIfNeeded``: each of ``partitions`` (by default every
        assigned one) still without a position takes the one ``auto_offset_reset`` says; a
        partition found deleted is marked so, or, without ``deleted_ok``, raises
        :class:`UnknownTopicError`."""
        for tp in self._subscriptions.missing_positions() if partitions is None else partitions:
            if self._subscriptions.position(tp) is not None:
                continue
            try:
                self.reset_position(tp)
            except UnknownTopicError:
                if not deleted_ok:
                    raise
                self._logs.partition_deleted(tp)
