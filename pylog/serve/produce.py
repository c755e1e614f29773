"""Produce: each partition's record batches appended as they arrive, as Kafka's
``ReplicaManager.appendRecords`` does on a leader: offsets assigned from the log end,
CRCs, sizes and timestamps validated, and a producer's sequence and epoch checked by the
partition's producer state (an exact retry of an idempotent batch answers its first
offsets and writes nothing). The appends run in the server's disk thread pool, so a slow
disk never stalls the event loop.

Durability is pylog's flush policy, as it is Kafka's: ``acks`` 1 and -1 answer once the
batches are written to the segment file (this node is the only replica, so -1 waits for
nothing more); an fsync follows when the topic's ``flush_messages``/``flush_ms`` say so.
``acks=0`` gets no response at all. A transactional produce (a ``transactional_id``) is
first checked against the transaction coordinator: its partition must be in the producer's
ongoing transaction (:func:`verify_transactional_batches`).
Cost: O(bytes) per partition, one write each.
"""

from __future__ import annotations

from kafka.protocol.producer import ProduceResponse

from pylog.errors import InvalidTxnStateError, PylogError
from pylog.record.batch import decode_batches
from pylog.serve.error_codes import (
    INVALID_PRODUCER_ID_MAPPING, INVALID_REQUIRED_ACKS, NONE, UNKNOWN_SERVER_ERROR, error_code,
)

_Topic = ProduceResponse.TopicProduceResponse
_Partition = _Topic.PartitionProduceResponse
#: Kafka's ``acks`` values: none, the leader, all in-sync replicas
ACKS = (0, 1, -1)


async def handle_produce(apis, request) -> ProduceResponse | None:
    """Append every partition's batches (one partition after the other, each in the disk
    thread pool), then answer each partition's first offset or error; None for ``acks=0``."""
    body = request.body
    refused = INVALID_REQUIRED_ACKS if body.acks not in ACKS else NONE
    verify = None
    if body.transactional_id is not None and not refused:
        coordinator = await apis.txn_coordinator(create=False)
        refused = INVALID_PRODUCER_ID_MAPPING if coordinator is None else NONE
        verify = lambda topic, partition, raw: verify_transactional_batches(  # noqa: E731
            coordinator, body.transactional_id, topic, partition, raw)
    topics = []
    for topic in body.topic_data or ():  # a null array (a malformed request) is an empty one
        answers = []
        for partition in topic.partition_data or ():
            answer = (_Partition(index=partition.index, error_code=refused, base_offset=-1) if refused
                      else await _append(apis, topic.name, partition, verify, max(body.timeout_ms, 0)))
            answers.append(answer)
        topics.append(_Topic(name=topic.name, partition_responses=answers))
    apis.appends.notify()
    if body.acks == 0:
        return None
    return ProduceResponse(responses=topics, throttle_time_ms=0)


async def _append(apis, topic: str, partition, verify=None, timeout_ms: int = 30_000) -> _Partition:
    """One partition's append, answered: its base offset, log append time and log start,
    or the Kafka error code of what refused it (nothing written then)."""
    try:
        info, log_start_offset = await apis.run_blocking(_append_batches, apis.replicas, topic, partition, verify,
                                                         timeout_ms)
    except PylogError as e:
        return _Partition(index=partition.index, error_code=error_code(e), base_offset=-1,
                          error_message=str(e)[:500])
    except Exception as e:  # a bug: the client hears it, the server lives on
        apis.log_failure(f"append to {topic}-{partition.index}", e)
        return _Partition(index=partition.index, error_code=UNKNOWN_SERVER_ERROR, base_offset=-1)
    return _Partition(index=partition.index, error_code=NONE, base_offset=info.first_offset,
                      log_append_time_ms=info.log_append_time, log_start_offset=log_start_offset)


def _append_batches(replicas, topic: str, partition, verify=None, timeout_ms: int = 30_000):
    """In the disk pool: the transaction's check (``verify``), then the append, holding
    the partition's writer (taken from another process by the hand-off, waiting up to the
    request's ``timeout_ms``; opened, and recovered if it was not closed cleanly, on first
    use)."""
    if verify is not None:
        verify(topic, partition.index, partition.records)
    with replicas.writer(topic, partition.index, max_block_ms=timeout_ms) as log:
        return log.append_batches(partition.records or b""), log.log_start_offset


def verify_transactional_batches(coordinator, transactional_id: str, topic: str, partition: int, raw) -> None:
    """Before a transactional Produce's append (in the disk pool): each batch's producer
    must be the transactional id's current one (a batch without a producer is not) and
    the partition in its ongoing transaction, else :class:`InvalidTxnStateError` (or the
    fencing errors). The coordinator is asked once per producer the batches name. Cost:
    O(batches) header reads."""
    producers = dict.fromkeys((b.producer_id, b.producer_epoch) for b in decode_batches(raw or b""))
    for producer_id, producer_epoch in producers:
        if coordinator.verify_partitions(transactional_id, producer_id, producer_epoch, [(topic, partition)]):
            raise InvalidTxnStateError(f"{topic}-{partition} is not part of the ongoing transaction of "
                                       f"{transactional_id!r} (AddPartitionsToTxn first)")
