"""The streaming sink's write of one Spark task, ``writeStream.format("pylog")``, exactly
once: a replay of a micro-batch after a driver or executor crash adds nothing.

Each write task of micro-batch ``b`` of query ``q`` (Spark's query id, kept in the query's
checkpoint) runs as partition ``p`` of the batch's write stage, and:

1. turns its rows into records (:func:`pylog.spark.write.records_by_partition`, the batch
   writer's rules: topic, partition, key, headers, timestamp);
2. starts a transactional :class:`~pylog.clients.producer.Producer` whose transactional id
   is ``spark-sink-<q>-<p>`` (:func:`transactional_id`). Its ``init_transactions`` bumps
   the id's epoch, which fences any earlier attempt of the same task (a retried task, a
   zombie of a crashed driver) and first finishes what that attempt left: aborted if it
   was still writing, committed if it had decided to commit;
3. reads the task's marker (:func:`batches_written`): the offset group ``spark-sink-<q>``
   (:func:`sink_group`) commits for ``(spark-micro-batches, p)`` the next micro-batch
   partition ``p`` writes. If it is past ``b``, this micro-batch was written by an
   earlier attempt: the task writes nothing;
4. else appends its records and the marker ``b + 1`` in one transaction, and commits it:
   both are in the logs, or neither.

The guarantee holds when a replayed micro-batch presents the same rows to the same
partition ids, as Spark's other exactly-once sinks assume (a replay reads the same offset
range of a replayable source, and the plan partitions it the same way). The records of
a micro-batch become visible to ``read_committed`` readers task by task, as each commits,
not all at once when Spark commits the micro-batch.

With ``exactly_once=False`` the task appends with a plain idempotent producer and no
marker: Spark's Kafka sink's at-least-once, for the cost of a transaction saved.
"""

from __future__ import annotations

import contextlib
import os

from pylog.clients.producer import Producer
from pylog.coordinator.offsets_reader import OFFSETS_TOPIC, GroupState, replay_partition
from pylog.coordinator.partitioning import DEFAULT_PARTITIONS, partition_for_group
from pylog.errors import PylogError
from pylog.layout import CONTROL_COMMIT
from pylog.log import Log
from pylog.partition_dir import partition_dir_name
from pylog.spark.write import records_by_partition

#: The "topic" of a sink group's markers: partition ``p``'s committed offset is the next
#: micro-batch Spark partition ``p`` writes (``pylog consumer-groups --describe`` shows it).
MARKER_TOPIC = "spark-micro-batches"
#: The producer's batch size: records are appended in batches of this many bytes at most.
SINK_BATCH_BYTES = 512 << 10


def sink_group(query_id: str) -> str:
    """The offset group holding the markers of the streaming query ``query_id``."""
    return f"spark-sink-{query_id}"


def transactional_id(query_id: str, partition_id: int) -> str:
    """The transactional id of the write tasks of partition ``partition_id`` of query ``query_id``.

    >>> transactional_id("4dad18f7-a92e-4785-824f-f9522586e84c", 1)
    'spark-sink-4dad18f7-a92e-4785-824f-f9522586e84c-1'
    """
    return f"spark-sink-{query_id}-{partition_id}"


def write_task(batches, *, root: str, topic: str | None, partitions: int, query_id: str, batch_id: int,
               partition_id: int, exactly_once: bool = True) -> int:
    """Append the rows of the Arrow ``batches`` of one write task of micro-batch
    ``batch_id`` (see the module's doc); returns the number of records appended, 0 when an
    earlier attempt wrote this micro-batch. Raises :class:`ProducerFencedError` when a
    newer attempt of the same task started meanwhile (nothing of this one is committed).
    Cost: the rows' conversion, a producer's start (a replay of its
    ``__transaction_state`` partition), a replay of the sink group's ``__consumer_offsets``
    partition, and the appends: one per ``SINK_BATCH_BYTES`` of records, plus the
    transaction's markers. Durability: the producer's (``acks=1``: the operating system
    has the records when the task returns)."""
    groups = records_by_partition(batches, root, topic, partitions)
    if not groups:
        return 0
    # a topic made here gets a partition for every row of this task (as the batch writer's commit)
    num_partitions = max(partitions, 1 + max(p for _, p in groups))
    if not exactly_once:
        with Producer(root, num_partitions=num_partitions, batch_size=SINK_BATCH_BYTES) as producer:
            return _send(producer, groups)
    with Producer(root, transactional_id=transactional_id(query_id, partition_id), num_partitions=num_partitions,
                  batch_size=SINK_BATCH_BYTES) as producer:
        if batches_written(root, query_id, partition_id) > batch_id:
            return 0  # a replay: an earlier attempt committed this micro-batch
        producer.begin_transaction()
        try:
            sent = _send(producer, groups)
            producer.send_offsets_to_transaction({(MARKER_TOPIC, partition_id): batch_id + 1}, sink_group(query_id))
            producer.commit_transaction()
        except BaseException:
            with contextlib.suppress(PylogError):  # fenced: the newer attempt aborted it already
                producer.abort_transaction()
            raise
        return sent


def _send(producer: Producer, groups: dict) -> int:
    """Send every record of ``groups`` (``{(topic, partition): [Record]}``) to its
    partition and flush; returns how many."""
    sent = 0
    for (topic, part), records in groups.items():
        keys = [r.key for r in records]
        headers = [r.headers for r in records]
        stamps = [r.timestamp for r in records]
        producer.send_batch(topic, [r.value for r in records], keys=keys if any(k is not None for k in keys) else None,
                            partition=part, headers=headers if any(headers) else None,
                            timestamps_ms=stamps if any(t is not None for t in stamps) else None)
        sent += len(records)
    producer.flush()
    return sent


def batches_written(root: str, query_id: str, partition_id: int) -> int:
    """How many micro-batches partition ``partition_id`` of query ``query_id`` has
    committed (the next one it writes): its marker's offset, 0 without one.

    Call it after the task's producer started (step 2 of the module's doc), so that no
    transaction of this task is still open. Other tasks' transactions may be: the markers
    of a query share a ``__consumer_offsets`` partition, whose committed view stops at the
    first open transaction (its last stable offset). So this replays the committed
    records below that offset, then, past it, follows each producer's transaction to its
    COMMIT or ABORT marker, as Kafka's group coordinator keeps pending transactional
    offsets. Cost: one pass over the partition; nothing is written."""
    group, tp = sink_group(query_id), (MARKER_TOPIC, partition_id)
    path = os.path.join(root, partition_dir_name(OFFSETS_TOPIC, partition_for_group(group, DEFAULT_PARTITIONS)))
    if not os.path.isdir(path):
        return 0
    with Log.open(path, read_only=True) as log:
        stable, end = log.last_stable_offset, log.log_end_offset
        written = _marker(replay_partition(path, end_offset=stable), group, tp, 0)
        pending: dict[int, GroupState] = {}  # producer id -> its open transaction's commits
        offset = stable
        while offset < end:
            fetch = log.read(offset, 1 << 20, max_offset=end)
            for b in fetch.batches():
                if b.next_offset <= offset:
                    continue
                if b.is_control:
                    done = pending.pop(b.producer_id, None)
                    if done is not None and b.records()[0].control_type_id == CONTROL_COMMIT:
                        written = _marker(done, group, tp, written)
                    continue
                state = pending.setdefault(b.producer_id, GroupState()) if b.is_transactional else GroupState()
                for r in b.records():
                    state.apply(r.key, r.value, offset=r.offset, path=path)
                if not b.is_transactional:
                    written = _marker(state, group, tp, written)
            if fetch.next_offset <= offset:
                break
            offset = fetch.next_offset
    return written


def _marker(state: GroupState, group: str, tp: tuple, default: int) -> int:
    committed = state.offsets.get(group, {}).get(tp)
    return default if committed is None else committed.offset
