"""``Fetcher``: a consumer's reads, as Kafka's ``Fetcher``: it reads each fetchable
partition of a :class:`~pylog.clients.subscription_state.SubscriptionState` from its position
through a read-only :class:`~pylog.log.Log`, decodes the records (:class:`ConsumerRecord`,
through the deserializers) or columns, and moves the positions. It owns the isolation rule
(``read_committed`` reads stop at the last stable offset; a partition waiting at an open
transaction has expired transactions aborted, the broker's periodic job). The logs it reads
are its :class:`~pylog.clients.partition_logs.PartitionLogs`, shared with its
:class:`~pylog.clients.offset_fetcher.OffsetFetcher` (``offsets``), which resets a position
out of range (``auto_offset_reset``) and answers the offset look-ups.

Records read past ``max_records`` are kept for the next fetch, undecoded
(:class:`~pylog.clients.completed_fetch.CompletedFetch`), valid while the partition's
position is where they start (a seek, a rebalance or a pause drops them). Reads cost one
``Log.read`` of up to ``fetch_max_bytes`` per partition with data; nothing is written,
except by the aborting of expired transactions.
"""

from __future__ import annotations

import collections
import time

from pylog.clients.completed_fetch import CompletedFetch
from pylog.clients.consumer_record import DeserializedRecord, consumer_record_class
from pylog.clients.offset_fetcher import OffsetFetcher
from pylog.clients.partition_logs import PartitionLogs
from pylog.clients.subscription_state import SubscriptionState, TopicPartition
from pylog.logdir.writers import WriterPool
from pylog.coordinator.txn_coordinator import TransactionCoordinator
from pylog.errors import OffsetOutOfRangeError, RecordDeserializationError, UnknownTopicError

#: How often a read_committed consumer waiting at an open transaction looks for expired ones.
TXN_CHECK_INTERVAL_MS = 1000


class Fetcher:
    """Reads the fetchable partitions of ``subscriptions`` in the log dir ``root`` (see the
    module's doc). ``watch`` (a :class:`~pylog.logdir.wakeup.DirWatch`) is told of each
    partition directory opened, so the consumer's wait wakes on its appends.
    ``isolation``: ``"uncommitted"`` or ``"committed"``."""

    def __init__(self, root: str, subscriptions: SubscriptionState, watch, *, isolation: str, fetch_max_bytes: int,
                 auto_offset_reset: str, key_deserializer=None, value_deserializer=None,
                 max_open_files: int | None = None):
        self.root, self._subscriptions = root, subscriptions
        self.isolation, self.fetch_max_bytes = isolation, fetch_max_bytes
        self.key_deserializer, self.value_deserializer = key_deserializer, value_deserializer
        self.logs = PartitionLogs(root, subscriptions, watch, max_open_files=max_open_files)
        self.offsets = OffsetFetcher(self.logs, subscriptions, isolation=isolation,
                                     auto_offset_reset=auto_offset_reset)
        self._buffered: dict[TopicPartition, CompletedFetch] = {}  # records read, not yet returned
        self._iterated: collections.deque = collections.deque()  # (tp, record) fetched for an iteration, not yielded
        self._deserialization_error: RecordDeserializationError | None = None  # raised by the next fetch
        self._txn_coordinator = None
        self._next_txn_check = 0.0

    def sync_assignment(self) -> None:
        """Close the logs and drop the records of partitions no longer assigned. O(open logs)."""
        self.logs.sync_assignment()
        for tp in [tp for tp in self._buffered if not self._subscriptions.is_assigned(tp)]:
            del self._buffered[tp]
        if self._iterated:
            self._iterated = collections.deque(i for i in self._iterated if self._subscriptions.is_assigned(i[0]))

    def assign(self, partitions: set) -> None:
        """Read exactly ``partitions`` (Kafka's ``assignFromUser``): each is opened first, so
        one that does not exist raises :class:`UnknownTopicError` before the assignment
        changes; what was fetched from partitions no longer assigned is dropped."""
        for tp in sorted(partitions):
            self.logs.log(tp)
        self._subscriptions.assign_from_user(partitions)
        self.sync_assignment()

    def partition_deleted(self, tp: TopicPartition) -> None:
        """``tp``'s topic was deleted: its records fetched are dropped, it is not fetched
        (:meth:`PartitionLogs.partition_deleted
        <pylog.clients.partition_logs.PartitionLogs.partition_deleted>`)."""
        self._buffered.pop(tp, None)
        self.logs.partition_deleted(tp)

    # -- fetching ---------------------------------------------------------------------------
    def seek(self, tp: TopicPartition, offset) -> None:
        """Move ``tp``'s position to ``offset`` (an offset, or ``"earliest"``/``"latest"``
        looked up by the :class:`OffsetFetcher`), dropping what was fetched before."""
        if isinstance(offset, str):
            self.offsets.seek_to(tp, offset)
        else:
            self._subscriptions.seek(tp, offset)
        self.forget(tp, seeked=True)

    def pause(self, tp: TopicPartition) -> None:
        """Fetch nothing more from ``tp`` until it is resumed; what was fetched is dropped."""
        self._subscriptions.pause(tp)
        self.forget(tp)

    def forget(self, tp: TopicPartition, *, seeked: bool = False) -> None:
        """Drop ``tp``'s records fetched and not returned or not yet iterated (its position
        moved, or it was paused); after a seek (``seeked``), also the error of a record of
        ``tp`` that failed to deserialize (it is read again, or passed)."""
        self._buffered.pop(tp, None)
        if self._iterated:
            self._iterated = collections.deque(item for item in self._iterated if item[0] != tp)
        error = self._deserialization_error
        if seeked and error is not None and (error.topic, error.partition) == tuple(tp):
            self._deserialization_error = None

    # -- iteration, as kafka-python's iterator -------------------------------------------------
    def iterate(self, fetched: dict) -> None:
        """Hand ``fetched`` (``{tp: records}``, from ``fetched_records``) out one record at a
        time (:meth:`next_iterated`): each partition's position is taken back to its first
        record, and moves past each as it is yielded, so a commit covers what was yielded."""
        for tp, records in fetched.items():
            self._subscriptions.seek(tp, records[0].offset)
            self._iterated.extend((tp, r) for r in records)

    def next_iterated(self):
        """The next record :meth:`iterate` holds, its position moved past it; None when none is left."""
        if not self._iterated:
            return None
        tp, record = self._iterated.popleft()
        self._subscriptions.consumed(tp, record)
        return record

    def stop_iteration(self) -> None:
        """A direct poll ends an iteration: records fetched for it and not yielded are read
        again from the positions."""
        if self._iterated:
            partitions = {tp for tp, _ in self._iterated}
            self._iterated.clear()
            for tp in partitions:
                self._buffered.pop(tp, None)

    def _read(self, tp: TopicPartition, position: int):
        """The FetchData at ``position`` of ``tp``, resetting a position out of range."""
        log = self.logs.log(tp)
        with self.logs.deleted_as_unknown(log):
            try:
                return log.read(position, self.fetch_max_bytes, isolation=self.isolation)
            except OffsetOutOfRangeError:
                log.refresh()
                if log.log_start_offset <= position <= log.log_end_offset:
                    raise
                self.offsets.reset_position(tp, position)
                return log.read(self._subscriptions.position(tp), self.fetch_max_bytes, isolation=self.isolation)

    def _raise_deserialization_error(self) -> None:
        error, self._deserialization_error = self._deserialization_error, None
        if error is not None:
            raise error

    def _take_records(self, tp: TopicPartition, state, max_records: int) -> list | None:
        """Up to ``max_records`` of ``tp``'s next records from its position: those kept
        from the last read, else a read's. None when there are none (the position moved
        past what it read: control records, aborted ones)."""
        kept = self._buffered.get(tp)
        if kept is not None and kept.position == state.position:
            records = self._take(tp, kept, max_records)
            if records:
                return records
        try:
            fetch = self._read(tp, state.position)
        except UnknownTopicError:
            self.partition_deleted(tp)
            return None
        if not fetch.size_bytes:
            self._buffered.pop(tp, None)
            return None
        kept = self._buffered[tp] = CompletedFetch(state.position, fetch.record_lists(consumer_record_class))
        records = self._take(tp, kept, max_records)
        if not records:
            del self._buffered[tp]
            state.position = max(state.position, fetch.next_offset)
            return None
        return records

    def _take(self, tp: TopicPartition, kept: CompletedFetch, max_records: int) -> list:
        """``kept.take(max_records)``; a batch that fails to decode drops ``kept`` (the
        next fetch reads it again, and fails again)."""
        try:
            return kept.take(max_records)
        except BaseException:
            self._buffered.pop(tp, None)
            raise

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
            records = self._take_records(tp, state, left)
            if records is None:
                continue
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
        from pylog.record.columns_scratch import decode_fetch_columns  # numpy, loaded on first use
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
            cols, epoch = decode_fetch_columns(fetch, position, position + left)
            if cols.num_rows:
                out[tp] = cols
                self._subscriptions.seek(tp, int(cols.offsets[-1]) + 1, epoch)
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
        ``TXN_CHECK_INTERVAL_MS``. Returns the seconds until the next look (inf for
        ``read_uncommitted``, which never looks)."""
        if self.isolation != "committed":
            return float("inf")
        now = time.monotonic()
        if now < self._next_txn_check:
            return self._next_txn_check - now
        self._next_txn_check = now + TXN_CHECK_INTERVAL_MS / 1000
        if any(log.last_stable_offset < log.log_end_offset for log in self.logs.assigned()):
            if self._txn_coordinator is None:
                self._txn_coordinator = TransactionCoordinator(self.root, WriterPool.for_root(self.root))
            self._txn_coordinator.abort_expired()
        return TXN_CHECK_INTERVAL_MS / 1000

    def close_steps(self) -> list:
        """What closing releases, as steps for ``close_all``: every log, the transaction coordinator."""
        steps = self.logs.close_steps()
        txn_coordinator, self._txn_coordinator = self._txn_coordinator, None
        if txn_coordinator is not None:
            steps += [txn_coordinator.close, txn_coordinator.pool.release]
        return steps
