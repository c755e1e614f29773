"""The admin APIs of transactions, as Kafka's ``kafka-transactions.sh`` uses them:
DescribeProducers, each partition's active producers from its producer state
(``Log.active_producers``); ListTransactions, the transaction coordinator's
transactional ids with their producer ids and states; DescribeTransactions, the whole
state of each transactional id asked for (``TRANSACTIONAL_ID_NOT_FOUND`` for one the
coordinator never saw). Read only. Cost: DescribeProducers O(producers) per partition;
ListTransactions and DescribeTransactions a replay of the new ``__transaction_state``
records, in the disk thread pool."""

from __future__ import annotations

import re

from kafka.protocol.admin import DescribeProducersResponse, DescribeTransactionsResponse, ListTransactionsResponse

from pylog.coordinator.txn_records import TRANSACTION_STATES
from pylog.errors import PylogError
from pylog.record.encode import now_ms
from pylog.serve.error_codes import (
    INVALID_REGULAR_EXPRESSION, NONE, TRANSACTIONAL_ID_NOT_FOUND, UNKNOWN_SERVER_ERROR, error_code,
)

_Topic = DescribeProducersResponse.TopicResponse
_Partition = _Topic.PartitionResponse
_Producer = _Partition.ProducerState
_Txn = ListTransactionsResponse.TransactionState
_TxnState = DescribeTransactionsResponse.TransactionState
_TxnTopic = _TxnState.TopicData


async def handle_describe_producers(apis, request) -> DescribeProducersResponse:
    """Each partition's active producers, or why it has none to show."""
    topics = []
    for topic in request.body.topics or ():
        partitions = [await _describe(apis, topic.name, p) for p in topic.partition_indexes or ()]
        topics.append(_Topic(name=topic.name, partitions=partitions))
    return DescribeProducersResponse(throttle_time_ms=0, topics=topics)


async def _describe(apis, topic: str, partition: int) -> _Partition:
    try:
        producers = await apis.run_blocking(lambda: apis.replicas.refreshed(topic, partition).active_producers())
    except PylogError as e:
        return _Partition(partition_index=partition, error_code=error_code(e), error_message=str(e)[:500],
                          active_producers=[])
    except Exception as e:  # a bug: the client hears it, the server lives on
        apis.log_failure(f"describe producers of {topic}-{partition}", e)
        return _Partition(partition_index=partition, error_code=UNKNOWN_SERVER_ERROR, active_producers=[])
    return _Partition(partition_index=partition, error_code=NONE, error_message=None, active_producers=[
        _Producer(producer_id=p.producer_id, producer_epoch=p.producer_epoch, last_sequence=p.last_sequence,
                  last_timestamp=p.last_timestamp, coordinator_epoch=p.coordinator_epoch,
                  current_txn_start_offset=-1 if p.current_txn_start_offset is None else p.current_txn_start_offset)
        for p in producers])


async def handle_list_transactions(apis, request) -> ListTransactionsResponse:
    """The transactional ids matching the filters (all when a filter is empty): their
    states, producer ids, (v1) those running at least ``duration_filter`` ms, and (v2)
    those ``transactional_id_pattern`` matches whole (Python's ``re``, which reads the
    patterns people write as Java's does; one that does not compile is
    ``INVALID_REGULAR_EXPRESSION``)."""
    body = request.body
    states_asked = set(body.state_filters or ())
    unknown = sorted(states_asked - set(TRANSACTION_STATES.values()))
    producers_asked = set(body.producer_id_filters or ())
    min_duration_ms = body.duration_filter if request.api_version >= 1 else -1
    try:
        pattern = re.compile(body.transactional_id_pattern) if request.api_version >= 2 and \
            body.transactional_id_pattern else None
    except re.error:
        return ListTransactionsResponse(throttle_time_ms=0, error_code=INVALID_REGULAR_EXPRESSION,
                                        unknown_state_filters=[], transaction_states=[])
    coordinator = await apis.txn_coordinator(create=False)
    found = {} if coordinator is None else await apis.run_blocking(coordinator.transactions)
    now = now_ms()
    answers = [_Txn(transactional_id=tid, producer_id=meta.producer_id, transaction_state=meta.state)
               for tid, meta in sorted(found.items())
               if (not states_asked or meta.state in states_asked)
               and (not producers_asked or meta.producer_id in producers_asked)
               and (min_duration_ms < 0 or now - meta.start_ms >= min_duration_ms)
               and (pattern is None or pattern.fullmatch(tid))]
    return ListTransactionsResponse(throttle_time_ms=0, error_code=NONE, unknown_state_filters=unknown,
                                    transaction_states=answers)


async def handle_describe_transactions(apis, request) -> DescribeTransactionsResponse:
    """Each transactional id's state as the coordinator last wrote it: its state, timeout,
    start time (-1 with no transaction), producer id and epoch, and the partitions of its
    transaction, in the order asked."""
    coordinator = await apis.txn_coordinator(create=False)
    found = {} if coordinator is None else await apis.run_blocking(coordinator.transactions)
    return DescribeTransactionsResponse(throttle_time_ms=0, transaction_states=[
        _described(tid, found.get(tid)) for tid in request.body.transactional_ids or ()])


def _described(transactional_id: str, meta) -> _TxnState:
    if meta is None:
        return _TxnState(error_code=TRANSACTIONAL_ID_NOT_FOUND, transactional_id=transactional_id,
                         transaction_state="", transaction_timeout_ms=0, transaction_start_time_ms=-1,
                         producer_id=-1, producer_epoch=-1, topics=[])
    by_topic: dict[str, list] = {}
    for topic, partition in sorted(meta.partitions):
        by_topic.setdefault(topic, []).append(partition)
    return _TxnState(error_code=NONE, transactional_id=transactional_id, transaction_state=meta.state,
                     transaction_timeout_ms=meta.timeout_ms, transaction_start_time_ms=meta.start_ms,
                     producer_id=meta.producer_id, producer_epoch=meta.producer_epoch,
                     topics=[_TxnTopic(topic=t, partitions=ps) for t, ps in by_topic.items()])
