"""``Fetcher``: a consumer's reads, as Kafka's ``Fetcher`` and ``OffsetFetcher``: it reads
each fetchable partition of a :class:`~pylog.clients.subscription_state.SubscriptionState`
from its position through a read-only :class:`~pylog.log.Log`, decodes the records
(:class:`ConsumerRecord`, through the deserializers) or columns, and moves the positions.
It owns the isolation rule (``read_committed`` reads stop at the last stable offset; a
partition waiting at an open transaction has expired transactions aborted, the broker's
periodic job), the reset of a position out of range (``auto_offset_reset``), and the
offset look-ups (beginning, end, by timestamp).

Records read past ``max_records`` are kept for the next fetch, valid while the partition's
position is where they start (a seek, a rebalance or a pause drops them). Reads cost one
``Log.read`` of up to ``fetch_max_bytes`` per partition with data; nothing is written,
except by the aborting of expired transactions.
"""

from __future__ import annotations

import contextlib
import logging
import os
import time
from collections.abc import Mapping
from typing import NamedTuple

from pylog.arguments import check_int, check_topic_partition
from pylog.clients.consumer_record import DeserializedRecord, as_consumer_records
from pylog.clients.subscription_state import SubscriptionState, TopicPartition
from pylog.logdir.writers import WriterPool
from pylog.coordinator.txn_coordinator import TransactionCoordinator
from pylog.errors import InvalidArgumentError, OffsetOutOfRangeError, RecordDeserializationError, UnknownTopicError
from pylog.layout import INT64_MAX
from pylog.log import Log
from pylog.log.offsets import latest_offset
from pylog.partition_dir import partition_dir_name
from pylog.segment.open_files import OpenFiles

_log = logging.getLogger("pylog.consumer")

#: How often a read_committed consumer waiting at an open transaction looks for expired ones.
TXN_CHECK_INTERVAL_MS = 1000


def as_topic_partition(value) -> TopicPartition:
    """``value`` (a pair) as a TopicPartition; InvalidArgumentError when it is not one."""
    return TopicPartition(*check_topic_partition(value))


def partition_list(partitions) -> list[TopicPartition]:
    """``partitions`` (an iterable of (topic, partition) pairs) as TopicPartitions, or
    :class:`InvalidArgumentError`."""
    if isinstance(partitions, (str, bytes)) or not hasattr(partitions, "__iter__"):
        raise InvalidArgumentError(f"partitions must be a list of TopicPartition, not {partitions!r}")
    return [as_topic_partition(tp) for tp in partitions]


class OffsetAndTimestamp(NamedTuple):
    offset: int
    timestamp: int


class Fetcher:
    """Reads the fetchable partitions of ``subscriptions`` in the log dir ``root`` (see the
    module's doc). ``watch`` (a :class:`~pylog.logdir.wakeup.DirWatch`) is told of each
    partition directory opened, so the consumer's wait wakes on its appends.
    ``isolation``: ``"uncommitted"`` or ``"committed"``."""

    def __init__(self, root: str, subscriptions: SubscriptionState, watch, *, isolation: str, fetch_max_bytes: int,
                 auto_offset_reset: str, key_deserializer=None, value_deserializer=None,
                 max_open_files: int | None = None):
        self.root, self._subscriptions, self._watch = root, subscriptions, watch
        self.isolation, self.fetch_max_bytes, self.auto_offset_reset = isolation, fetch_max_bytes, auto_offset_reset
        self.key_deserializer, self.value_deserializer = key_deserializer, value_deserializer
        self._open_files = OpenFiles(max_open_files)  # shared by the segments of every partition read
        self._logs: dict[TopicPartition, Log] = {}  # the assigned partitions', watched
        self._queried: dict[TopicPartition, Log] = {}  # others', opened for an offset look-up
        self._buffered: dict[TopicPartition, tuple[int, list]] = {}  # (position they start at, records)
        self._deserialization_error: RecordDeserializationError | None = None  # raised by the next fetch
        self._txn_coordinator = None
        self._next_txn_check = 0.0

    # -- partitions' logs -------------------------------------------------------------------
    def log(self, tp: TopicPartition) -> Log:
        """The log of the assigned partition ``tp``, opened and watched on first use;
        :class:`UnknownTopicError` when it does not exist."""
        log = self._logs.get(tp)
        if log is None:
            log = self._logs[tp] = self._open_log(tp)
            self._watch.add(log.path)
        return log

    def _open_log(self, tp: TopicPartition) -> Log:
        """``tp``'s partition read-only, its segments' descriptors within the consumer's
        ``max_open_files``; :class:`UnknownTopicError` when it does not exist."""
        path = self._partition_path(tp)
        if not os.path.isdir(path):
            raise UnknownTopicError(f"no partition {tp.topic}-{tp.partition} in {self.root}")
        return Log.open(path, read_only=True, open_files=self._open_files)

    def _partition_path(self, tp: TopicPartition) -> str:
        return os.path.join(self.root, partition_dir_name(tp.topic, tp.partition))

    def sync_assignment(self) -> None:
        """Close the logs and drop the records of partitions no longer assigned. O(open logs)."""
        for tp in [tp for tp in self._logs if not self._subscriptions.is_assigned(tp)]:
            self.drop(tp)
        for tp in [tp for tp in self._buffered if not self._subscriptions.is_assigned(tp)]:
            del self._buffered[tp]

    def drop(self, tp: TopicPartition) -> None:
        """Forget ``tp``: its records fetched and not returned, its log (closed, unwatched)."""
        self._buffered.pop(tp, None)
        log = self._logs.pop(tp, None)
        if log is not None:
            self._watch.remove(log.path)
            log.close()

    def partition_deleted(self, tp: TopicPartition) -> None:
        """``tp``'s directory is gone: its topic was deleted. As Kafka's consumer, stop
        fetching it and warn (once); a group member asks for a new assignment. With
        ``assign()`` it stays assigned, and is read again, from where
        ``auto_offset_reset`` says, once a topic of that name has it again."""
        if self._subscriptions.mark_deleted(tp):
            _log.warning("partition %s-%d was deleted from %s (its topic is gone): not fetched", tp.topic,
                         tp.partition, self.root)
        self.drop(tp)

    def recreated(self) -> None:
        """Assigned partitions of a deleted topic that a new topic of the name has again
        take a new position (one stat each)."""
        for tp in self._subscriptions.deleted():
            if os.path.isdir(self._partition_path(tp)):
                self._subscriptions.recreated(tp)

    @contextlib.contextmanager
    def _deleted_as_unknown(self, log: Log):
        """Around a read of ``log``: its directory vanishing under it (the topic was
        deleted) is :class:`UnknownTopicError`, not the file system's error."""
        try:
            yield
        except OSError:
            if os.path.isdir(log.path):
                raise
            raise UnknownTopicError(f"partition {log.topic}-{log.partition} was deleted from {self.root} "
                                    f"(its topic is gone)") from None

    def refreshed(self, log: Log) -> Log:
        """``log`` caught up with its directory; :class:`UnknownTopicError` once deleted."""
        with self._deleted_as_unknown(log):
            log.refresh()
        return log

    def _any_log(self, tp) -> Log:
        """The log of any partition, assigned or not (kept open until ``close``), refreshed."""
        tp = as_topic_partition(tp)
        log = self._logs.get(tp) or self._queried.get(tp)
        if log is None:
            log = self._queried[tp] = self._open_log(tp)
        try:
            return self.refreshed(log)
        except UnknownTopicError:
            if self._queried.get(tp) is log:
                self._queried.pop(tp).close()  # a topic made again under the name is opened anew
            raise

    # -- offsets ----------------------------------------------------------------------------
    def end_offset(self, log: Log) -> int:
        """Where ``log`` ends for this consumer's isolation level (``latest_offset``)."""
        return latest_offset(self.refreshed(log), self.isolation)

    def beginning_offsets(self, partitions) -> dict:
        return {tp: self._any_log(tp).log_start_offset for tp in partition_list(partitions)}

    def end_offsets(self, partitions) -> dict:
        return {tp: self.end_offset(self._any_log(tp)) for tp in partition_list(partitions)}

    def offsets_for_times(self, timestamps: dict) -> dict:
        """``{tp: OffsetAndTimestamp | None}``: the earliest offset whose timestamp is >=
        the given one (Kafka's offsetsForTimes). O(segments + index interval) each."""
        if not isinstance(timestamps, Mapping):
            raise InvalidArgumentError(f"offsets_for_times() takes a dict {{TopicPartition: timestamp in ms}}, "
                                       f"not {timestamps!r}")
        for tp, ts in timestamps.items():
            check_int(ts, f"the timestamp to look up for {as_topic_partition(tp)}", (0, INT64_MAX))
        out = {}
        for tp, ts in timestamps.items():
            log = self._any_log(tp)
            with self._deleted_as_unknown(log):
                offset = log.offset_for_timestamp(ts)
                rec = None if offset is None else next(iter(log.read(offset, 1 << 16).records()), None)
            out[as_topic_partition(tp)] = None if offset is None else \
                OffsetAndTimestamp(offset, rec.timestamp if rec else ts)
        return out

    def reset_position(self, tp: TopicPartition, out_of_range: int | None = None) -> None:
        """Set ``tp``'s position where ``auto_offset_reset`` says (``out_of_range``: the
        position that was out of range, None: there was none): the log start, the end
        for this isolation level, or :class:`OffsetOutOfRangeError` for ``"none"``."""
        log = self.refreshed(self.log(tp))
        if self.auto_offset_reset == "none":
            what = "has no committed offset" if out_of_range is None else f"position {out_of_range} is out of range"
            raise OffsetOutOfRangeError(f"{tp.topic}-{tp.partition} {what} "
                                        f"[{log.log_start_offset}, {log.log_end_offset}] and auto_offset_reset "
                                        f"is 'none'")
        offset = log.log_start_offset if self.auto_offset_reset == "earliest" else self.end_offset(log)
        self._subscriptions.seek(tp, offset)

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
                self.partition_deleted(tp)

    # -- fetching ---------------------------------------------------------------------------
    def forget(self, tp: TopicPartition, *, seeked: bool = False) -> None:
        """Drop ``tp``'s records fetched and not returned; after a seek (``seeked``), also
        the error of a record of ``tp`` that failed to deserialize (it is read again, or
        passed)."""
        self._buffered.pop(tp, None)
        error = self._deserialization_error
        if seeked and error is not None and (error.topic, error.partition) == tuple(tp):
            self._deserialization_error = None

    def _read(self, tp: TopicPartition, position: int):
        """The FetchData at ``position`` of ``tp``, resetting a position out of range."""
        log = self.log(tp)
        with self._deleted_as_unknown(log):
            try:
                return log.read(position, self.fetch_max_bytes, isolation=self.isolation)
            except OffsetOutOfRangeError:
                log.refresh()
                if log.log_start_offset <= position <= log.log_end_offset:
                    raise
                self.reset_position(tp, position)
                return log.read(self._subscriptions.position(tp), self.fetch_max_bytes, isolation=self.isolation)

    def _raise_deserialization_error(self) -> None:
        error, self._deserialization_error = self._deserialization_error, None
        if error is not None:
            raise error

    def _take_records(self, tp: TopicPartition, state) -> list | None:
        """``tp``'s next records from its position: those kept from the last read, else a
        read. None when there are none (the position moved past what it read: control
        records, aborted ones)."""
        kept = self._buffered.pop(tp, None)
        if kept is not None and kept[0] == state.position:
            return kept[1]
        try:
            fetch = self._read(tp, state.position)
        except UnknownTopicError:
            self.partition_deleted(tp)
            return None
        if not fetch.size_bytes:
            return None
        position = state.position
        records = as_consumer_records(fetch.records(), fetch.batches())
        if records and records[0].offset < position:  # the batch began before the position
            records = [r for r in records if r.offset >= position]
        if not records:
            state.position = max(position, fetch.next_offset)
            return None
        return records

    def fetched_records(self, max_records: int) -> dict:
        """``{tp: [ConsumerRecord, ...]}``, up to ``max_records`` in all, from the positions
        of the fetchable partitions, which move past them. Raises a
        :class:`RecordDeserializationError` kept from an earlier fetch, or met in this one
        when it returns nothing else."""
        if self._deserialization_error is not None:
            self._raise_deserialization_error()
        out = {}
        left = max_records
        for tp in self._subscriptions.fetchable():
            state = self._subscriptions.state(tp)
            if state.position is None:
                continue
            records = self._take_records(tp, state)
            if records is None:
                continue
            if len(records) > left:
                self._buffered[tp] = (records[left].offset, records[left:])
                records = records[:left]
            if self.key_deserializer is not None or self.value_deserializer is not None:
                records = self._deserialized(tp, records)
            if records:
                out[tp] = records
                self._subscriptions.consumed(tp, records[-1])
                left -= len(records)
            if left <= 0 or self._deserialization_error is not None:
                break
        if not out and self._deserialization_error is not None:
            self._raise_deserialization_error()
        return out

    def _deserialized(self, tp: TopicPartition, records: list) -> list:
        """``records`` with keys and values through the deserializers (None stays None),
        up to the first that fails: its position is set there, what follows dropped (read
        again later), and the error kept for this or the next fetch to raise."""
        out = []
        key_deserializer, value_deserializer = self.key_deserializer, self.value_deserializer
        for record in records:
            try:
                key, value = record.key, record.value
                if key is not None and key_deserializer is not None:
                    key = key_deserializer(key)
                if value is not None and value_deserializer is not None:
                    value = value_deserializer(value)
            except Exception as e:
                self._buffered.pop(tp, None)
                self._subscriptions.seek(tp, record.offset, self._subscriptions.state(tp).epoch)
                self._deserialization_error = RecordDeserializationError(
                    f"deserializing the record at {tp.topic}-{tp.partition} offset {record.offset} failed: "
                    f"{type(e).__name__}: {e}; seek past it to go on", topic=tp.topic, partition=tp.partition,
                    offset=record.offset)
                self._deserialization_error.__cause__ = e
                return out
            # a new record: the decoded one is not tracked by the cycle collector (Record's doc),
            # and what a deserializer returns may hold anything
            copy = DeserializedRecord(value, key, record.timestamp, record.headers, record.offset)
            copy.topic, copy.partition, copy.timestamp_type = tp.topic, tp.partition, record.timestamp_type
            copy.leader_epoch = record.leader_epoch
            copy.serialized_key_size, copy.serialized_value_size = record.serialized_key_size, \
                record.serialized_value_size
            out.append(copy)
        return out

    def fetched_columns(self, max_records: int) -> dict:
        """Up to ``max_records`` rows in all, as :class:`~pylog.record.columnar.Columns`
        per partition, decoded from the positions (records an earlier fetch kept are read
        again, as columns)."""
        from pylog.record.columnar import decode_columns  # numpy, loaded on first use
        out = {}
        left = max_records
        for tp in self._subscriptions.fetchable():
            self._buffered.pop(tp, None)
            state = self._subscriptions.state(tp)
            if state.position is None:
                continue
            try:
                fetch = self._read(tp, state.position)
            except UnknownTopicError:
                self.partition_deleted(tp)
                continue
            if not fetch.size_bytes:
                continue
            position = state.position
            cols = decode_columns(fetch.raw(), min_offset=position, max_offset=position + left)
            if cols.num_rows:
                out[tp] = cols
                last = int(cols.offsets[-1]) + 1
                self._subscriptions.seek(tp, last, next(b.partition_leader_epoch for b in fetch.batches()
                                                        if b.last_offset >= last - 1 and not b.is_control))
                left -= cols.num_rows
                if left <= 0:
                    break
            else:  # nothing in [position, position + left): the next rows lie further on
                state.position = max(position, min(fetch.next_offset, position + left))
        return out

    # -- open transactions --------------------------------------------------------------------
    def abort_expired_transactions(self) -> float:
        """When a partition waits at an open transaction (``read_committed``), abort the
        transactions past their timeout (the broker's periodic task; a dead producer's
        transaction must not hold readers back forever), at most every
        ``TXN_CHECK_INTERVAL_MS``. Returns the seconds until the next look."""
        now = time.monotonic()
        if now < self._next_txn_check:
            return self._next_txn_check - now
        self._next_txn_check = now + TXN_CHECK_INTERVAL_MS / 1000
        if any(log.last_stable_offset < log.log_end_offset for log in self._logs.values()):
            if self._txn_coordinator is None:
                self._txn_coordinator = TransactionCoordinator(self.root, WriterPool.for_root(self.root))
            self._txn_coordinator.abort_expired()
        return TXN_CHECK_INTERVAL_MS / 1000

    def close_steps(self) -> list:
        """What closing releases, as steps for ``close_all``: every log, the transaction coordinator."""
        steps = [log.close for log in [*self._logs.values(), *self._queried.values()]]
        txn_coordinator, self._txn_coordinator = self._txn_coordinator, None
        if txn_coordinator is not None:
            steps += [txn_coordinator.close, txn_coordinator.pool.release]
        return steps
