"""Transactions on the wire, as Kafka's ``KafkaApis`` hands them to its transaction
coordinator: InitProducerId of a transactional id, AddPartitionsToTxn (v0-3, and the
batched v4 form with ``verify_only``) and EndTxn, all
driven through pylog's :class:`~pylog.coordinator.txn_coordinator.TransactionCoordinator`
(the one that pylog's own transactional ``Producer`` uses: the same ``__transaction_state``
records, epochs, fencing and markers).

A transactional Produce is checked here against the coordinator's state first: a batch
to a partition not added to the ongoing transaction is ``INVALID_TXN_STATE`` (as a Kafka
broker that verifies transactions answers it). An unknown transactional id or another
producer id is ``INVALID_PRODUCER_ID_MAPPING``, an older epoch ``INVALID_PRODUCER_EPOCH``,
an EndTxn without a transaction ``INVALID_TXN_STATE``; nothing is written then.

Durability: every coordinator step is appended (to the operating system) before the
answer, as Kafka's coordinator waits for its log append. Cost: each request is one or
a few small appends in the disk thread pool; EndTxn one marker per partition of the
transaction.
"""

from __future__ import annotations

from contextlib import contextmanager

from kafka.protocol.producer import AddPartitionsToTxnResponse, EndTxnResponse, InitProducerIdResponse

from pylog.coordinator.offsets_reader import OFFSETS_TOPIC
from pylog.errors import InvalidTxnStateError, PylogError
from pylog.record.batch import decode_batches
from pylog.serve.error_codes import (
    INVALID_PRODUCER_ID_MAPPING, INVALID_TRANSACTION_TIMEOUT, INVALID_TXN_STATE, NONE, error_code,
)

#: Kafka's ``transaction.max.timeout.ms`` default: the longest transaction timeout a producer may ask for
MAX_TRANSACTION_TIMEOUT_MS = 900_000
#: the first AddPartitionsToTxn version with several transactions per request
_BATCHED_VERSION = 4

_TopicResult = AddPartitionsToTxnResponse.AddPartitionsToTxnTopicResult
_PartitionResult = _TopicResult.AddPartitionsToTxnPartitionResult
_TxnResult = AddPartitionsToTxnResponse.AddPartitionsToTxnResult


class ServerWriters:
    """The transaction coordinator's writers inside the server (the ``pool`` it appends
    through): the server's own open logs, but for ``__consumer_offsets``, which the group
    coordinator's writer pool holds (a log has one writer)."""

    def __init__(self, manager, groups_pool):
        self._manager, self._groups_pool = manager, groups_pool

    @contextmanager
    def writer(self, topic: str, partition: int, *, max_block_ms: int = 60_000):
        if topic == OFFSETS_TOPIC:
            with self._groups_pool.writer(topic, partition, max_block_ms=max_block_ms) as log:
                yield log
        else:
            yield self._manager.log(topic, partition)


async def handle_init_transactional_producer_id(apis, request) -> InitProducerIdResponse:
    """The transactional id's producer id at its next epoch (the previous instance is
    fenced, the transaction it left open aborted, or committed if it had decided so)."""
    body = request.body
    if not 0 < body.transaction_timeout_ms <= MAX_TRANSACTION_TIMEOUT_MS:
        return _init_answer(INVALID_TRANSACTION_TIMEOUT)
    coordinator = await apis.txn_coordinator()
    try:
        pid, epoch = await apis.run_blocking(coordinator.init_producer_id, body.transactional_id,
                                             body.transaction_timeout_ms)
    except PylogError as e:
        return _init_answer(error_code(e))
    return InitProducerIdResponse(throttle_time_ms=0, error_code=NONE, producer_id=pid, producer_epoch=epoch)


def _init_answer(error: int) -> InitProducerIdResponse:
    return InitProducerIdResponse(throttle_time_ms=0, error_code=error, producer_id=-1, producer_epoch=-1)


async def handle_add_partitions_to_txn(apis, request) -> AddPartitionsToTxnResponse:
    """Record the partitions in the transaction (or, ``verify_only``, check they are);
    every partition of a transaction gets the same answer."""
    body = request.body
    if request.api_version < _BATCHED_VERSION:
        results = await _add_partitions(apis, body.v3_and_below_transactional_id, body.v3_and_below_producer_id,
                                        body.v3_and_below_producer_epoch, body.v3_and_below_topics, False)
        return AddPartitionsToTxnResponse(throttle_time_ms=0, results_by_topic_v3_and_below=results)
    answers = [_TxnResult(transactional_id=t.transactional_id, topic_results=await _add_partitions(
        apis, t.transactional_id, t.producer_id, t.producer_epoch, t.topics, t.verify_only))
        for t in body.transactions or ()]
    return AddPartitionsToTxnResponse(throttle_time_ms=0, error_code=NONE, results_by_transaction=answers)


async def _add_partitions(apis, transactional_id, producer_id, producer_epoch, topics, verify_only) -> list:
    """One transaction's answers, topic by topic: the request's error for every partition,
    or (``verify_only``) ``INVALID_TXN_STATE`` for those not in the transaction."""
    partitions = [(t.name, p) for t in topics or () for p in t.partitions or ()]
    error, missing = await _added(apis, transactional_id, producer_id, producer_epoch, partitions, verify_only)
    return [_TopicResult(name=t.name, results_by_partition=[_PartitionResult(
        partition_index=p, partition_error_code=error or (INVALID_TXN_STATE if (t.name, p) in missing else NONE))
        for p in t.partitions or ()]) for t in topics or ()]


async def _added(apis, transactional_id, producer_id, producer_epoch, partitions, verify_only) -> tuple[int, set]:
    coordinator = await apis.txn_coordinator(create=False)
    if coordinator is None:
        return INVALID_PRODUCER_ID_MAPPING, set()
    try:
        if verify_only:
            return NONE, set(await apis.run_blocking(coordinator.verify_partitions, transactional_id, producer_id,
                                                     producer_epoch, partitions))
        await apis.run_blocking(_add_existing, apis.manager, coordinator, transactional_id, producer_id,
                                producer_epoch, partitions)
        return NONE, set()
    except PylogError as e:
        return error_code(e), set()


def _add_existing(manager, coordinator, transactional_id, producer_id, producer_epoch, partitions) -> None:
    """In the disk pool: each partition must exist (else ``UnknownTopicError``, nothing
    recorded), then all are recorded in one write."""
    for topic, partition in partitions:
        manager.log(topic, partition)
    coordinator.add_partitions(transactional_id, producer_id, producer_epoch, partitions)


async def handle_end_txn(apis, request) -> EndTxnResponse:
    """Commit or abort the ongoing transaction: the decision, a marker in each of its
    partitions, the completion, each in ``__transaction_state`` or the partition."""
    body = request.body
    coordinator = await apis.txn_coordinator(create=False)
    if coordinator is None:
        return EndTxnResponse(throttle_time_ms=0, error_code=INVALID_PRODUCER_ID_MAPPING)
    try:
        await apis.run_blocking(lambda: coordinator.end_transaction(
            body.transactional_id, body.producer_id, body.producer_epoch, body.committed, require_ongoing=True))
        error = NONE
    except PylogError as e:
        error = error_code(e)
    apis.appends.notify()  # the markers move the last stable offsets: read_committed fetches may go on
    return EndTxnResponse(throttle_time_ms=0, error_code=error)


def verify_transactional_batches(coordinator, transactional_id: str, topic: str, partition: int, raw) -> None:
    """Before a transactional Produce's append (in the disk pool): each batch's producer
    must be the transactional id's current one (a batch without a producer is not) and
    the partition in its ongoing transaction, else :class:`InvalidTxnStateError` (or the
    fencing errors)."""
    for batch in decode_batches(raw or b""):
        if coordinator.verify_partitions(transactional_id, batch.producer_id, batch.producer_epoch,
                                         [(topic, partition)]):
            raise InvalidTxnStateError(f"{topic}-{partition} is not part of the ongoing transaction of "
                                       f"{transactional_id!r} (AddPartitionsToTxn first)")
