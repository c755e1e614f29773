"""Transactions on the wire, as Kafka's ``KafkaApis`` hands them to its transaction
coordinator: InitProducerId of a transactional id, AddPartitionsToTxn (v0-3, and the
batched v4 form with ``verify_only``), AddOffsetsToTxn, TxnOffsetCommit and EndTxn, all
driven through pylog's :class:`~pylog.coordinator.txn_coordinator.TransactionCoordinator`
(the one that pylog's own transactional ``Producer`` uses: the same ``__transaction_state``
records, epochs, fencing and markers) and, for offsets, its
:class:`~pylog.coordinator.group_coordinator.GroupCoordinator`.

A transactional Produce is checked against the coordinator's state first
(:func:`pylog.serve.produce.verify_transactional_batches`): a batch
to a partition not added to the ongoing transaction is ``INVALID_TXN_STATE`` (as a Kafka
broker that verifies transactions answers it). An unknown transactional id or another
producer id is ``INVALID_PRODUCER_ID_MAPPING``; an older epoch is ``PRODUCER_FENCED`` to
the coordinator's APIs from the versions that know it (InitProducerId 4, AddPartitionsToTxn,
AddOffsetsToTxn and EndTxn 2), ``INVALID_PRODUCER_EPOCH`` before them and to Produce and
TxnOffsetCommit, as Kafka answers; an EndTxn without a transaction is ``INVALID_TXN_STATE``;
nothing is written then.

Durability: every coordinator step is appended (to the operating system) before the
answer, as Kafka's coordinator waits for its log append. Cost: each request is one or
a few small appends in the disk thread pool; EndTxn one marker per partition of the
transaction.
"""

from __future__ import annotations

from contextlib import contextmanager

from kafka.protocol.producer import (
    AddOffsetsToTxnResponse, AddPartitionsToTxnResponse, EndTxnResponse, InitProducerIdResponse,
    TxnOffsetCommitResponse,
)

from pylog.clients.consumer_coordinator import OffsetAndMetadata
from pylog.errors import InvalidTxnStateError, PylogError
from pylog.record.batch import increment_sequence
from pylog.serve.consumer_groups import fits_a_record
from pylog.serve.error_codes import (
    INVALID_GROUP_ID, INVALID_PRODUCER_ID_MAPPING, INVALID_REQUEST, INVALID_TRANSACTION_TIMEOUT, INVALID_TXN_STATE, NONE,
    error_code, txn_error_code,
)

#: Kafka's ``transaction.max.timeout.ms`` default: the longest transaction timeout a producer may ask for
MAX_TRANSACTION_TIMEOUT_MS = 900_000
#: the first AddPartitionsToTxn version with several transactions per request
_BATCHED_VERSION = 4

_TopicResult = AddPartitionsToTxnResponse.AddPartitionsToTxnTopicResult
_PartitionResult = _TopicResult.AddPartitionsToTxnPartitionResult
_TxnResult = AddPartitionsToTxnResponse.AddPartitionsToTxnResult
_CommitTopic = TxnOffsetCommitResponse.TxnOffsetCommitResponseTopic
_CommitPartition = _CommitTopic.TxnOffsetCommitResponsePartition


class ServerWriters:
    """The transaction coordinator's writers inside the server (the ``pool`` it appends
    through): the server's partitions (``replicas``, a
    :class:`~pylog.serve.replica_manager.ReplicaManager`), each held for the write through
    the log dir's writer pool, as the server's produces hold it; a partition is never
    created by a marker (:class:`~pylog.errors.UnknownTopicError`)."""

    def __init__(self, replicas):
        self._replicas = replicas

    @contextmanager
    def writer(self, topic: str, partition: int, *, max_block_ms: int = 60_000):
        with self._replicas.writer(topic, partition, max_block_ms=max_block_ms) as log:
            yield log


class _OffsetsSender:
    """What the group coordinator appends a transaction's offsets through
    (``append_atomic``): one transactional batch of the producer, its sequence following
    the producer's last in the partition (0 in a new epoch)."""

    def __init__(self, writers: ServerWriters, producer_id: int, producer_epoch: int):
        self._writers, self.producer_id, self.producer_epoch = writers, producer_id, producer_epoch

    def append_atomic(self, tp, records) -> None:
        with self._writers.writer(*tp) as log:
            known = [p for p in log.active_producers()
                     if p.producer_id == self.producer_id and p.producer_epoch == self.producer_epoch]
            sequence = increment_sequence(known[0].last_sequence, 1) if known else 0
            log.append(records, producer_id=self.producer_id, producer_epoch=self.producer_epoch,
                       base_sequence=sequence, is_transactional=True)


async def handle_init_transactional_producer_id(apis, request) -> InitProducerIdResponse:
    """The transactional id's producer id at its next epoch (the previous instance is
    fenced, the transaction it left open aborted, or committed if it had decided so)."""
    body = request.body
    if not body.transactional_id or not fits_a_record(body.transactional_id):
        return _init_answer(INVALID_REQUEST)  # as Kafka's coordinator answers an empty one
    if not 0 < body.transaction_timeout_ms <= MAX_TRANSACTION_TIMEOUT_MS:
        return _init_answer(INVALID_TRANSACTION_TIMEOUT)
    coordinator = await apis.txn_coordinator()
    try:
        pid, epoch = await apis.run_blocking(lambda: coordinator.init_producer_id(
            body.transactional_id, body.transaction_timeout_ms, current=_current(request)))
    except PylogError as e:
        return _init_answer(txn_error_code(e, request.api_version, 4))
    return InitProducerIdResponse(throttle_time_ms=0, error_code=NONE, producer_id=pid, producer_epoch=epoch)


def _current(request) -> tuple[int, int] | None:
    """The (producer id, epoch) a producer re-initialising itself sends (v3+), or None."""
    if request.api_version < 3 or request.body.producer_id < 0:
        return None
    return request.body.producer_id, request.body.producer_epoch


def _init_answer(error: int) -> InitProducerIdResponse:
    return InitProducerIdResponse(throttle_time_ms=0, error_code=error, producer_id=-1, producer_epoch=-1)


async def handle_add_partitions_to_txn(apis, request) -> AddPartitionsToTxnResponse:
    """Record the partitions in the transaction (or, ``verify_only``, check they are);
    every partition of a transaction gets the same answer."""
    body = request.body
    if request.api_version < _BATCHED_VERSION:
        results = await _add_partitions(apis, body.v3_and_below_transactional_id, body.v3_and_below_producer_id,
                                        body.v3_and_below_producer_epoch, body.v3_and_below_topics, False,
                                        request.api_version)
        return AddPartitionsToTxnResponse(throttle_time_ms=0, results_by_topic_v3_and_below=results)
    answers = [_TxnResult(transactional_id=t.transactional_id, topic_results=await _add_partitions(
        apis, t.transactional_id, t.producer_id, t.producer_epoch, t.topics, t.verify_only, request.api_version))
        for t in body.transactions or ()]
    return AddPartitionsToTxnResponse(throttle_time_ms=0, error_code=NONE, results_by_transaction=answers)


async def _add_partitions(apis, transactional_id, producer_id, producer_epoch, topics, verify_only,
                          api_version: int) -> list:
    """One transaction's answers, topic by topic: the request's error for every partition,
    or (``verify_only``) ``INVALID_TXN_STATE`` for those not in the transaction."""
    partitions = [(t.name, p) for t in topics or () for p in t.partitions or ()]
    error, missing = await _added(apis, transactional_id, producer_id, producer_epoch, partitions, verify_only,
                                  api_version)
    return [_TopicResult(name=t.name, results_by_partition=[_PartitionResult(
        partition_index=p, partition_error_code=error or (INVALID_TXN_STATE if (t.name, p) in missing else NONE))
        for p in t.partitions or ()]) for t in topics or ()]


async def _added(apis, transactional_id, producer_id, producer_epoch, partitions, verify_only,
                 api_version: int) -> tuple[int, set]:
    coordinator = await apis.txn_coordinator(create=False)
    if coordinator is None:
        return INVALID_PRODUCER_ID_MAPPING, set()
    try:
        if verify_only:
            return NONE, set(await apis.run_blocking(coordinator.verify_partitions, transactional_id, producer_id,
                                                     producer_epoch, partitions))
        await apis.run_blocking(_add_existing, apis.replicas, coordinator, transactional_id, producer_id,
                                producer_epoch, partitions)
        return NONE, set()
    except PylogError as e:
        return txn_error_code(e, api_version, 2), set()


def _add_existing(replicas, coordinator, transactional_id, producer_id, producer_epoch, partitions) -> None:
    """In the disk pool: each partition must exist (else ``UnknownTopicError``, nothing
    recorded), then all are recorded in one write."""
    for topic, partition in partitions:
        replicas.log(topic, partition)
    coordinator.add_partitions(transactional_id, producer_id, producer_epoch, partitions)


async def handle_add_offsets_to_txn(apis, request) -> AddOffsetsToTxnResponse:
    """Add the group's ``__consumer_offsets`` partition to the transaction, so that the
    offsets TxnOffsetCommit writes there get the transaction's marker."""
    body = request.body
    if not body.group_id or not fits_a_record(body.group_id):
        return AddOffsetsToTxnResponse(throttle_time_ms=0, error_code=INVALID_GROUP_ID)
    coordinator = await apis.txn_coordinator(create=False)
    if coordinator is None:
        return AddOffsetsToTxnResponse(throttle_time_ms=0, error_code=INVALID_PRODUCER_ID_MAPPING)
    groups = await apis.group_coordinator()
    try:
        await apis.run_blocking(coordinator.add_partitions, body.transactional_id, body.producer_id,
                                body.producer_epoch, [groups.offsets_partition(body.group_id)])
        error = NONE
    except PylogError as e:
        error = txn_error_code(e, request.api_version, 2)
    return AddOffsetsToTxnResponse(throttle_time_ms=0, error_code=error)


async def handle_txn_offset_commit(apis, request) -> TxnOffsetCommitResponse:
    """The group's offsets as one batch of the producer's transaction (checked against
    the group's generation when the request names one): visible once it commits, never
    if it aborts. The group's offsets partition must have been added (AddOffsetsToTxn)."""
    body = request.body
    offsets = {(t.name, p.partition_index): OffsetAndMetadata(
        p.committed_offset, p.committed_metadata or "",
        p.committed_leader_epoch if p.committed_leader_epoch >= 0 else None)
        for t in body.topics or () for p in t.partitions or ()}
    coordinator = await apis.txn_coordinator(create=False)
    if not body.group_id or not fits_a_record(body.group_id):
        error = INVALID_GROUP_ID
    elif coordinator is None:
        error = INVALID_PRODUCER_ID_MAPPING
    else:
        groups = await apis.group_coordinator()
        generation = body.generation_id if request.api_version >= 3 else -1
        member_id = body.member_id if request.api_version >= 3 else ""
        try:
            await apis.run_blocking(_commit_in_transaction, coordinator, groups, apis.txn_writers, body, offsets,
                                    generation, member_id)
            error = NONE
        except PylogError as e:
            error = error_code(e)
    return TxnOffsetCommitResponse(throttle_time_ms=0, topics=[_CommitTopic(name=t.name, partitions=[
        _CommitPartition(partition_index=p.partition_index, error_code=error) for p in t.partitions or ()])
        for t in body.topics or ()])


def _commit_in_transaction(coordinator, groups, writers, body, offsets, generation, member_id) -> None:
    tp = groups.offsets_partition(body.group_id)
    if coordinator.verify_partitions(body.transactional_id, body.producer_id, body.producer_epoch, [tp]):
        raise InvalidTxnStateError(f"group {body.group_id!r}'s offsets were not added to the transaction of "
                                   f"{body.transactional_id!r} (AddOffsetsToTxn first)")
    groups.commit_offsets(body.group_id, offsets, generation=generation, member_id=member_id,
                          sender=_OffsetsSender(writers, body.producer_id, body.producer_epoch))


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
        error = txn_error_code(e, request.api_version, 2)
    apis.appends.notify()  # the markers move the last stable offsets: read_committed fetches may go on
    return EndTxnResponse(throttle_time_ms=0, error_code=error)
