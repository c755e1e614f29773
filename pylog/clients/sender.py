"""``Sender``: appends a producer's sealed batches, as Kafka's ``Sender`` sends them: each
batch is one ``Log.append`` through the log dir's writer pool (the log this process holds,
or a round trip to the process holding it), with the producer's id, epoch and the
partition's next sequence from the
:class:`~pylog.clients.transaction_manager.TransactionManager`; then its futures are done.

Which thread appends: a partition's queued batches are appended, oldest first, by the
thread that sealed them (the caller of ``send``, ``send_batch``, ``flush`` or ``close``)
or, for batches sealed because ``linger_ms`` passed, by the linger thread, which sleeps
until the oldest open batch is due. One lock per partition keeps its batches in order
whichever thread appends.

Durability: a batch's futures are done once the append reached the operating system; with
``acks="all"`` once the log was flushed (fsynced).
"""

from __future__ import annotations

import threading
import time

from pylog.clients.accumulator import RecordAccumulator
from pylog.clients.producer_batch import ProducerBatch
from pylog.clients.transaction_manager import TransactionManager
from pylog.errors import RecordTooLargeError

#: ``acks="all"`` (or -1): a batch's futures are done once it is flushed to disk.
ACKS_ALL = -1


class Sender:
    """Appends the batches of ``accumulator`` through ``pool`` (see the module's doc)."""

    def __init__(self, accumulator: RecordAccumulator, pool, transactions: TransactionManager, *, acks: int,
                 compression_type: str | None, max_block_ms: int):
        self._accumulator, self._pool, self._transactions = accumulator, pool, transactions
        self.acks, self.compression_type, self.max_block_ms = acks, compression_type, max_block_ms
        self._wake = threading.Event()  # set when the linger thread has a new deadline to wait for
        self._thread: threading.Thread | None = None
        self._closed = False

    # -- the linger thread ----------------------------------------------------------------------
    def wake(self) -> None:
        """A batch was opened while lingering: start the linger thread, or tell it of the
        new deadline."""
        if self._thread is None:
            self._thread = threading.Thread(target=self._run, name="pylog-producer", daemon=True)
            self._thread.start()
        else:
            self._wake.set()

    def _run(self) -> None:
        while not self._closed:
            self._wake.clear()
            now = time.monotonic()
            ready, due = self._accumulator.ready(now)
            for tp in ready:
                self.drain(tp)
            if not ready:
                self._wake.wait(None if due is None else due - now)

    # -- appending ------------------------------------------------------------------------------
    def drain(self, tp, deadline: float | None = None) -> None:
        """Append ``tp``'s queued batches, oldest first, in this thread; returns once every
        batch queued before the call is appended, by this thread or another.
        ``deadline``: monotonic seconds by which a log held by another process must be
        had, else the batch fails."""
        queue = self._accumulator.queue(tp)
        if queue is None:
            return
        with queue.appending:
            while queue.batches:
                self._append(tp, queue.batches.popleft(), deadline)

    def flush(self, deadline: float | None = None) -> None:
        """Seal every open batch and append all that are queued."""
        for tp in self._accumulator.seal():
            self.drain(tp, deadline)

    def append_atomic(self, tp, records) -> None:
        """Append ``records`` to ``tp`` as one batch of this producer (its id, epoch, next
        sequence, transaction), all or none, now; raises its error. The group coordinator
        writes a transaction's offsets this way."""
        batch = self._accumulator.append_atomic(tp, records)
        self.drain(tp)
        error = batch.error_in(0, len(batch.records))
        if error is not None:
            raise error

    def _append(self, tp, batch: ProducerBatch, deadline: float | None = None) -> None:
        """One ``Log.append`` of the batch, waiting for the partition's log up to
        ``max_block_ms`` or until ``deadline`` (monotonic s). A failure is the batch's
        futures' error, and the transaction manager's to judge."""
        error = None
        try:
            max_block_ms = self.max_block_ms
            if deadline is not None:
                max_block_ms = min(max_block_ms, max(0, int((deadline - time.monotonic()) * 1000)))
            with self._pool.writer(*tp, max_block_ms=max_block_ms) as log:
                self._append_records(log, tp, batch, 0, len(batch.records), batch.create_times())
                if self.acks == ACKS_ALL:
                    log.flush()  # acknowledged once on disk: what "all" can mean with one copy
            refused = batch.error_in(0, len(batch.records))
            if refused is not None:
                self._transactions.fail(refused)
        except Exception as e:  # the future carries it to whoever waits
            error = e
            self._transactions.fail(e)
        finally:
            batch.finish(error)

    def _append_records(self, log, tp, batch: ProducerBatch, lo: int, hi: int, create_times) -> None:
        """Append ``batch.records[lo:hi]`` with the partition's next sequence. When the
        log refuses them as too large (a record that does not fit ``max_message_bytes``
        alone), append each half on its own, as Kafka's producer splits a batch the broker
        refuses as too large: only such a record fails, the others go in, in order."""
        records = batch.records if hi - lo == len(batch.records) else batch.records[lo:hi]
        transactions = self._transactions
        try:
            info = log.append(records, producer_id=transactions.producer_id,
                              producer_epoch=transactions.producer_epoch, base_sequence=transactions.sequence(tp),
                              is_transactional=transactions.transactional, compression=self.compression_type,
                              timestamp=create_times if type(create_times) is int else create_times[lo:hi])
        except RecordTooLargeError as e:
            if batch.atomic:
                raise
            if hi - lo == 1:
                batch.refused(lo, e)
                return
            mid = (lo + hi) // 2
            self._append_records(log, tp, batch, lo, mid, create_times)
            self._append_records(log, tp, batch, mid, hi, create_times)
            return
        transactions.advance(tp, len(records))
        batch.placed(lo, hi, info.first_offset, info.log_append_time)

    def close(self) -> None:
        """Stop the linger thread (after its current append)."""
        self._closed = True
        self._wake.set()
        if self._thread is not None:
            self._thread.join()
