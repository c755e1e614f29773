"""``RecordAccumulator``: a producer's batches per partition, as Kafka's
``RecordAccumulator``: each partition has one open batch that records join, and a queue of
sealed batches waiting for the :class:`~pylog.clients.sender.Sender` in the order they
were filled. A batch is sealed when it holds ``batch_size`` bytes, when ``linger_ms`` has
passed since it was opened (:meth:`RecordAccumulator.ready`), on ``flush`` and on
``close``; with ``linger_ms=0`` it is sealed as soon as a call has added its records.

Thread safety: one lock guards the open batches and the queues (callers from any thread,
the linger thread); the records of one ``send`` are added under it in O(1), those of a
``send_batch`` run in O(records) at C speed (list slices). Memory only.
"""

from __future__ import annotations

import collections
import threading

from pylog.clients.producer_batch import FutureRecordMetadata, ProducerBatch


class PartitionQueue:
    """A partition's sealed batches in the order they were filled, and the lock of the
    thread appending them."""
    __slots__ = ("batches", "appending")

    def __init__(self):
        self.batches: collections.deque[ProducerBatch] = collections.deque()
        self.appending = threading.Lock()


class RecordAccumulator:
    """The open and sealed batches of one producer (see the module's doc).
    ``on_new_batch(tp, sticky)`` is called (under the lock) when a batch is opened,
    ``sticky`` when it was opened for records without a key or partition: the partitioner
    moves its sticky partition on, the linger thread learns a new deadline."""

    def __init__(self, batch_size: int, linger_ms: int, on_new_batch=lambda tp, sticky: None):
        self.batch_size, self.linger_ms = batch_size, linger_ms
        self._on_new_batch = on_new_batch
        self._lock = threading.Lock()
        self._open: dict[tuple[str, int], ProducerBatch] = {}
        self._queues: dict[tuple[str, int], PartitionQueue] = {}

    def _new_batch(self, tp, sticky: bool) -> ProducerBatch:
        batch = self._open[tp] = ProducerBatch(*tp)
        self._on_new_batch(tp, sticky)
        return batch

    def _seal(self, tp) -> None:
        """Close ``tp``'s open batch to new records and queue it (the caller holds the
        lock, so batches are queued in the order they were filled)."""
        queue = self._queues.get(tp)
        if queue is None:
            queue = self._queues[tp] = PartitionQueue()
        queue.batches.append(self._open.pop(tp))

    def append(self, tp, item, size: int, sticky: bool, sent_ms: int | None) -> tuple[FutureRecordMetadata, bool]:
        """Add one record (``Log.append``'s item of ``size`` bytes) to ``tp``'s open
        batch; ``sent_ms``: its create time when lingering (None: the batch's). Returns its
        future and whether the batch was sealed (full, or not lingering). O(1)."""
        with self._lock:
            batch = self._open.get(tp) or self._new_batch(tp, sticky)
            if sent_ms != batch.last_ms and sent_ms is not None:
                batch.sent_at(sent_ms)
            records = batch.records
            future = FutureRecordMetadata(batch, len(records))
            records.append(item)
            batch.size_bytes += size
            if self.linger_ms and batch.size_bytes < self.batch_size:
                return future, False
            self._seal(tp)
        return future, True

    def append_run(self, tp, positions, sizes, lo: int, parts: list, *, sticky: bool, sent_ms: int | None) -> int:
        """Add the items ``lo:`` of a run (``sizes``: a ``bulk`` sizes object) to ``tp``'s
        batches, sealing each that reaches ``batch_size``, as ``send`` would one by one;
        ``parts`` gets (batch, first index in it, positions in the call) for each batch
        joined. A sticky run stops after the first batch it seals (the next one goes to
        another partition). Returns where it stopped."""
        n = len(positions)
        with self._lock:
            while lo < n:
                batch = self._open.get(tp) or self._new_batch(tp, sticky)
                hi, size = sizes.fill(lo, self.batch_size - batch.size_bytes)
                parts.append((batch, len(batch.records), positions[lo:hi]))
                if sent_ms != batch.last_ms and sent_ms is not None:
                    batch.sent_at(sent_ms)
                if batch.records:
                    batch.records += sizes.items[lo:hi]
                else:
                    batch.records = sizes.items[lo:hi]  # a copy: the caller's list is not kept
                batch.size_bytes += size
                lo = hi
                if batch.size_bytes >= self.batch_size:
                    self._seal(tp)
                    if sticky:
                        break
        return lo

    def append_atomic(self, tp, records) -> ProducerBatch:
        """Queue ``records`` for ``tp`` as one batch of their own, appended whole or not
        at all (after any batch opened before it)."""
        batch = ProducerBatch(*tp)
        batch.records, batch.atomic = list(records), True
        with self._lock:
            if tp in self._open:
                self._seal(tp)
            self._open[tp] = batch
            self._seal(tp)
        return batch

    def seal(self, partitions=None) -> list:
        """Seal the open batches of ``partitions`` (all by default); returns the
        partitions that have queued batches."""
        with self._lock:
            for tp in list(self._open) if partitions is None else [tp for tp in partitions if tp in self._open]:
                self._seal(tp)
            return list(self._queues) if partitions is None else [tp for tp in partitions if tp in self._queues]

    def ready(self, now: float) -> tuple[list, float | None]:
        """Seal the batches open for ``linger_ms`` by ``now`` (monotonic s); returns
        their partitions and when the oldest batch still open is due (None: none open)."""
        linger = self.linger_ms / 1000
        with self._lock:
            ready = [tp for tp, batch in self._open.items() if now - batch.created >= linger]
            for tp in ready:
                self._seal(tp)
            oldest = min((batch.created for batch in self._open.values()), default=None)
        return ready, None if oldest is None else oldest + linger

    def queue(self, tp) -> PartitionQueue | None:
        return self._queues.get(tp)

    def abort_incomplete(self, reason: BaseException) -> None:
        """Fail every batch not appended, open or queued, with ``reason``, so no future
        waits for ever (a producer closing)."""
        with self._lock:
            pending = list(self._open.values()) + [b for queue in self._queues.values() for b in queue.batches]
            self._open.clear()
            for queue in self._queues.values():
                queue.batches.clear()
        for batch in pending:
            batch.finish(reason)
