"""``TransactionCoordinator``: Kafka's transaction coordinator for the producers of one
log dir, keeping each transactional id's state as ``__transaction_state`` records
(TransactionLogKey/Value, pylog/coordinator/txn_records.py) in partition
``partition_for_transactional_id(id)``.

Protocol (Kafka's): ``init_producer_id`` gives a transactional id a stable producer id and
bumps its epoch, first finishing a transaction the previous instance left (``Ongoing`` or
``PrepareAbort``: aborted; ``PrepareCommit``: committed), with markers written at the new
epoch, so the previous instance is fenced everywhere. ``add_partitions`` records
(``Ongoing``) every partition before the transaction's first write to it.
``end_transaction`` writes ``PrepareCommit``/``PrepareAbort`` (the decision: once it is
in the log, a crash is followed by the same outcome), a COMMIT/ABORT marker in each
partition, then ``CompleteCommit``/``CompleteAbort``. Every step runs under a lock of
the transactional id (a byte of ``.pylog-clients.lock``) and first checks the epoch
recorded, so a fenced instance gets :class:`ProducerFencedError` and writes nothing.

A transaction left open past its ``transaction_timeout_ms`` (its producer died or hung) is
aborted by ``abort_expired``, which ``read_committed`` consumers call while they wait at
an open transaction (pylog/clients/fetcher.py), and by the next instance of its
transactional id at the latest.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field

from pylog.closing import close_all
from pylog.coordinator.partitioning import DEFAULT_PARTITIONS, partition_for_transactional_id
from pylog.coordinator.tail import TailReader
from pylog.coordinator.txn_records import TRANSACTION_LOG, TRANSACTION_STATES, TXN_RECORDS
from pylog.errors import InvalidProducerIdMappingError, InvalidTxnStateError, ProducerFencedError
from pylog.layout import CLIENTS_LOCK_FILE, TRANSACTION_STATE_TOPIC
from pylog.locks import ByteLockFile, ByteMutex, name_byte
from pylog.logdir.metadata import LogDirMetadata
from pylog.logdir.producer_ids import allocate_producer_id
from pylog.logdir.writers import WriterPool
from pylog.partition_dir import partition_dir_name
from pylog.record.encode import now_ms as clock_ms

TXN_TOPIC = TRANSACTION_STATE_TOPIC
#: TransactionLogValue version written (classic transactions: markers at the producer's epoch)
TXN_VALUE_VERSION = 0
STATUS = {name: code for code, name in TRANSACTION_STATES.items()}
MAX_EPOCH = 32767


@dataclass
class TxnMetadata:
    """A transactional id's state as its last ``__transaction_state`` record says."""
    producer_id: int
    producer_epoch: int
    timeout_ms: int
    state: str = "Empty"
    partitions: set = field(default_factory=set)
    start_ms: int = -1
    last_update_ms: int = -1

    def to_value(self) -> dict:
        by_topic: dict[str, list] = {}
        for topic, p in sorted(self.partitions):
            by_topic.setdefault(topic, []).append(p)
        return {"producerId": self.producer_id, "previousProducerId": -1, "nextProducerId": -1,
                "producerEpoch": self.producer_epoch, "transactionTimeoutMs": self.timeout_ms,
                "transactionStatus": STATUS[self.state],
                # null in the Empty state, as Kafka's TransactionLog writes it
                "transactionPartitions": None if self.state == "Empty" else
                [{"topic": t, "partitionIds": ps} for t, ps in by_topic.items()],
                "transactionLastUpdateTimestampMs": self.last_update_ms,
                "transactionStartTimestampMs": self.start_ms, "clientTransactionVersion": 0}

    @classmethod
    def from_value(cls, v: dict) -> "TxnMetadata":
        parts = {(t["topic"], p) for t in (v["transactionPartitions"] or ()) for p in t["partitionIds"]}
        return cls(v["producerId"], v["producerEpoch"], v["transactionTimeoutMs"],
                   TRANSACTION_STATES[v["transactionStatus"]], parts, v["transactionStartTimestampMs"],
                   v["transactionLastUpdateTimestampMs"])


def apply_txn_records(states: dict, records) -> None:
    """Replay ``__transaction_state`` records into ``states`` (``{transactional id:
    TxnMetadata}``), as a coordinator reloads them: the latest record of an id wins, a
    tombstone removes it. O(records)."""
    for r in records:
        rec = TXN_RECORDS.decode(r.key, r.value)
        tid = rec.key["transactionalId"]
        if rec.value is None:
            states.pop(tid, None)
        else:
            states[tid] = TxnMetadata.from_value(rec.value)


def ensure_internal_topic(root: str, topic: str, partitions: int) -> None:
    """Create the partition directories of an internal topic (empty directories are empty
    partitions; a writer creates the files) and record it as compacted, once."""
    if os.path.isdir(os.path.join(root, partition_dir_name(topic, partitions - 1))):
        return
    metadata = LogDirMetadata.for_root(root)
    metadata.alter_topic_config(topic, {"cleanup_policy": "compact"})  # settings given to the topic before are kept
    metadata.create_partitions(topic, partitions)


class TransactionCoordinator:
    """The transactional ids of one log dir, as seen from this process."""

    def __init__(self, root: str, pool: WriterPool, *, partitions: int = DEFAULT_PARTITIONS):
        self.root = root
        self.pool = pool
        self.partitions = partitions
        self._locks = ByteLockFile(os.path.join(root, CLIENTS_LOCK_FILE))
        self._mutexes: dict[int, ByteMutex] = {}  # one per byte: its thread lock excludes this process's threads
        self._readers: dict[int, TailReader] = {}
        self._states: dict[int, dict[str, TxnMetadata]] = {}
        ensure_internal_topic(root, TXN_TOPIC, partitions)

    @staticmethod
    def has_state(root: str, partitions: int = DEFAULT_PARTITIONS) -> bool:
        """Whether ``root`` has ``__transaction_state`` (a coordinator was made there): without
        it no transactional id is known, and a server answers so without creating it."""
        return os.path.isdir(os.path.join(root, partition_dir_name(TXN_TOPIC, partitions - 1)))

    def close(self) -> None:
        """Close the ``__transaction_state`` readers and the lock file (``close_all``)."""
        close_all([r.close for r in self._readers.values()] + [self._locks.close])

    # -- state --------------------------------------------------------------------------------
    def _partition(self, transactional_id: str) -> int:
        return partition_for_transactional_id(transactional_id, self.partitions)

    def current(self, transactional_id: str) -> TxnMetadata | None:
        """The id's state as last written (by any process). O(new records)."""
        return self._caught_up(self._partition(transactional_id)).get(transactional_id)

    def _caught_up(self, p: int) -> dict[str, TxnMetadata]:
        """``{transactional id: state}`` of partition ``p``, replayed to its end."""
        reader = self._readers.get(p)
        if reader is None:
            reader = self._readers[p] = TailReader(os.path.join(self.root, partition_dir_name(TXN_TOPIC, p)))
        records, reset = reader.new_records()
        states = self._states.setdefault(p, {})
        if reset:
            states.clear()
        apply_txn_records(states, records)
        return states

    def transactions(self) -> dict[str, TxnMetadata]:
        """Every transactional id's state as last written, as Kafka's ListTransactions
        sees them. Cost: a replay of the new records of every written partition."""
        out: dict[str, TxnMetadata] = {}
        for p in range(self.partitions):
            if os.listdir(os.path.join(self.root, partition_dir_name(TXN_TOPIC, p))):
                out.update(self._caught_up(p))
        return out

    def abort_expired(self, now_ms: int | None = None) -> list[str]:
        """Abort every transaction open longer than its ``transaction_timeout_ms``, as
        Kafka's coordinator does periodically: the epoch is bumped (the producer, if still
        alive, is fenced) and ABORT markers written. Returns the transactional ids aborted.
        Cost: a replay of the new records of every ``__transaction_state`` partition."""
        now_ms = clock_ms() if now_ms is None else now_ms
        aborted = []
        for p in range(self.partitions):
            if not os.listdir(os.path.join(self.root, partition_dir_name(TXN_TOPIC, p))):
                continue  # never written
            for tid, meta in list(self._caught_up(p).items()):
                if meta.state == "Ongoing" and meta.start_ms + meta.timeout_ms < now_ms:
                    with self._mutex(tid):
                        meta = self.current(tid)
                        if meta.state == "Ongoing" and meta.start_ms + meta.timeout_ms < now_ms:
                            meta.producer_epoch += 1
                            self._complete(tid, meta, commit=False)
                            aborted.append(tid)
        return aborted

    def _write(self, transactional_id: str, meta: TxnMetadata) -> None:
        meta.last_update_ms = clock_ms()
        key = TXN_RECORDS.encode_key(TRANSACTION_LOG, {"transactionalId": transactional_id})
        value = TXN_RECORDS.encode_value(TRANSACTION_LOG, TXN_VALUE_VERSION, meta.to_value())
        with self.pool.writer(TXN_TOPIC, self._partition(transactional_id)) as log:
            log.append([(key, value)])

    def _mutex(self, transactional_id: str) -> ByteMutex:
        byte = name_byte("txn:" + transactional_id)
        return self._mutexes.setdefault(byte, ByteMutex(self._locks, byte))

    def _checked(self, transactional_id: str, producer_id: int, producer_epoch: int) -> TxnMetadata:
        meta = self.current(transactional_id)
        if meta is None or meta.producer_id != producer_id:
            raise InvalidProducerIdMappingError(
                f"transactional id {transactional_id!r} " + ("is unknown" if meta is None else
                                                             f"has producer id {meta.producer_id}, not {producer_id}"))
        if meta.producer_epoch != producer_epoch:
            raise ProducerFencedError(f"transactional id {transactional_id!r}: producer {producer_id} epoch "
                                      f"{producer_epoch} was fenced by a newer instance (now epoch "
                                      f"{meta.producer_epoch})")
        return meta

    # -- protocol -----------------------------------------------------------------------------
    def init_producer_id(self, transactional_id: str, timeout_ms: int, *,
                         current: tuple[int, int] | None = None) -> tuple[int, int]:
        """``(producer_id, epoch)`` for a new instance of ``transactional_id``, after
        finishing what the previous instance left open. Durable before it returns.
        ``current``: the (producer id, epoch) a running producer re-initialising itself
        has (KIP-360); another than the id's is fenced (:meth:`_checked`'s errors)."""
        with self._mutex(transactional_id):
            if current is not None:
                self._checked(transactional_id, *current)
            meta = self.current(transactional_id)
            if meta is not None:
                # fences the previous instance, the markers carry it; MAX_EPOCH is the last
                # (a restart between the abort and the new id finds it there)
                meta.producer_epoch = min(meta.producer_epoch + 1, MAX_EPOCH)
                if meta.state in ("Ongoing", "PrepareAbort", "PrepareCommit"):
                    self._complete(transactional_id, meta, commit=meta.state == "PrepareCommit")
            if meta is None or meta.producer_epoch >= MAX_EPOCH:  # the id's epochs ran out
                meta = TxnMetadata(allocate_producer_id(self.root), 0, timeout_ms)
            meta.timeout_ms = timeout_ms
            meta.state, meta.partitions, meta.start_ms = "Empty", set(), -1
            self._write(transactional_id, meta)
            return meta.producer_id, meta.producer_epoch

    def add_partitions(self, transactional_id: str, producer_id: int, producer_epoch: int, partitions) -> None:
        """Record ``partitions`` ((topic, partition) pairs) in the ongoing transaction
        before anything is written to them."""
        with self._mutex(transactional_id):
            meta = self._checked(transactional_id, producer_id, producer_epoch)
            if meta.state in ("PrepareCommit", "PrepareAbort"):
                raise InvalidTxnStateError(f"transactional id {transactional_id!r} is ending a transaction")
            if meta.state != "Ongoing":
                meta.state, meta.partitions, meta.start_ms = "Ongoing", set(), clock_ms()
            meta.partitions |= set(partitions)
            self._write(transactional_id, meta)

    def verify_partitions(self, transactional_id: str, producer_id: int, producer_epoch: int, partitions) -> list:
        """Those of ``partitions`` that are not part of the ongoing transaction (all when
        none is ongoing), as Kafka's verify-only AddPartitionsToTxn answers; a fenced or
        unknown producer raises as :meth:`add_partitions` does. Writes nothing."""
        meta = self._checked(transactional_id, producer_id, producer_epoch)
        return [tp for tp in partitions if meta.state != "Ongoing" or tp not in meta.partitions]

    def end_transaction(self, transactional_id: str, producer_id: int, producer_epoch: int, commit: bool, *,
                        require_ongoing: bool = False) -> None:
        """Commit or abort the ongoing transaction: decision, markers, completion. Without
        one, nothing happens, but with ``require_ongoing`` (a Kafka client's EndTxn), which
        raises :class:`InvalidTxnStateError` unless the last transaction ended the same way
        (a retry)."""
        with self._mutex(transactional_id):
            meta = self._checked(transactional_id, producer_id, producer_epoch)
            if meta.state != "Ongoing":
                if require_ongoing and meta.state != ("CompleteCommit" if commit else "CompleteAbort"):
                    raise InvalidTxnStateError(f"transactional id {transactional_id!r} has no transaction to "
                                               f"{'commit' if commit else 'abort'} (state {meta.state})")
                return  # nothing was written in it
            self._complete(transactional_id, meta, commit=commit)

    def _complete(self, transactional_id: str, meta: TxnMetadata, *, commit: bool) -> None:
        if meta.state == "Ongoing":
            meta.state = "PrepareCommit" if commit else "PrepareAbort"
            self._write(transactional_id, meta)
        for topic, p in sorted(meta.partitions):
            with self.pool.writer(topic, p) as log:
                log.append_txn_marker(meta.producer_id, meta.producer_epoch, commit)
        meta.state = "CompleteCommit" if commit else "CompleteAbort"
        meta.partitions = set()  # as Kafka's prepareComplete: the markers are written, nothing is pending
        self._write(transactional_id, meta)
