"""``pylog transactions ROOT COMMAND``: Kafka's ``kafka-transactions.sh`` on a log dir.

- ``list``: every transactional id of ``__transaction_state``, with its producer and state.
- ``describe --transactional-id ID``: one id's transaction: epoch, timeout, start, partitions.
- ``describe-producers --topic T --partition P``: the producers a partition knows (Kafka's
  DescribeProducers: epoch, last sequence and timestamp, the start of an open transaction).
- ``find-hanging [--topic T [--partition P]] [--max-transaction-timeout MIN]``: open
  transactions no coordinator will end. A transaction left open by a producer that died
  without a coordinator tracking it (transactional batches written through ``Log.append``,
  or a broker's copy whose coordinator state is gone) pins the last stable offset for
  ever: ``read_committed`` readers stop there and compaction does not pass it (Kafka's
  "hanging transaction"). One is hanging when it has been open longer than the timeout
  (Kafka's default 15 minutes, from the producer's last write) and ``__transaction_state``
  has no transaction of that producer that is ongoing or preparing with the partition.
- ``abort --topic T --partition P (--start-offset N | --producer-id ID --producer-epoch E
  [--coordinator-epoch C])``: write the ABORT marker that ends it, through the clients'
  hand-off when a process writes the log. Ending a transaction a live producer is still
  writing aborts it under that producer, as with Kafka's tool.
"""

from __future__ import annotations

import os

from pylog.cli.common import add_timeout_argument, kafka_table, taken_log, writer_pool
from pylog.cli.topics import node_id
from pylog.coordinator.txn_state_reader import read_transaction_states
from pylog.errors import InvalidArgumentError, UnknownTopicError
from pylog.manager import LogManager
from pylog.record.encode import now_ms

#: a transaction's states in which its coordinator still writes markers to its partitions
_MARKERS_DUE = ("Ongoing", "PrepareCommit", "PrepareAbort")
#: ``--max-transaction-timeout`` default, minutes: Kafka's (its brokers' transaction.max.timeout.ms)
MAX_TRANSACTION_TIMEOUT_MIN = 15


def add_parser(sub) -> None:
    p = sub.add_parser("transactions")
    p.add_argument("root", help="the log dir holding <topic>-<partition> directories")
    commands = p.add_subparsers(dest="txn_command", metavar="COMMAND", required=True,
                                help="list | describe | describe-producers | find-hanging | abort")
    c = commands.add_parser("list", help="every transactional id, its producer and state")
    c.set_defaults(run=run_list)
    c = commands.add_parser("describe", help="one transactional id's transaction")
    c.add_argument("--transactional-id", required=True, help="the transactional id")
    c.set_defaults(run=run_describe)
    c = commands.add_parser("describe-producers", help="the producers of one partition")
    _add_partition_arguments(c)
    c.set_defaults(run=run_describe_producers)
    c = commands.add_parser("find-hanging", help="open transactions no coordinator will end")
    c.add_argument("--topic", help="only this topic (default: every topic)")
    c.add_argument("--partition", type=int, help="only this partition of --topic")
    c.add_argument("--max-transaction-timeout", type=int, default=MAX_TRANSACTION_TIMEOUT_MIN, metavar="MIN",
                   help=f"open at least this many minutes since the producer's last write "
                        f"(default {MAX_TRANSACTION_TIMEOUT_MIN})")
    c.add_argument("--broker-id", type=int, metavar="ID",
                   help="Kafka's way to name the broker whose partitions to search: the log dir is that broker "
                        "(every partition in it is searched)")
    c.set_defaults(run=run_find_hanging)
    c = commands.add_parser("abort", help="write the ABORT marker ending an open transaction")
    _add_partition_arguments(c)
    c.add_argument("--start-offset", type=int, help="the first offset of the transaction (as find-hanging shows)")
    c.add_argument("--producer-id", type=int, help="instead of --start-offset: the producer")
    c.add_argument("--producer-epoch", type=int, help="with --producer-id: its epoch")
    c.add_argument("--coordinator-epoch", type=int, default=0, help="with --producer-id: the marker's coordinator "
                                                                    "epoch (default 0)")
    add_timeout_argument(c)
    c.set_defaults(run=run_abort)


def _add_partition_arguments(c) -> None:
    c.add_argument("--topic", required=True, help="the topic")
    c.add_argument("--partition", type=int, required=True, help="the partition")


def _transaction_states(root: str) -> dict:
    return read_transaction_states(root)


def coordinator(root: str, partition: int) -> str:
    """Kafka's Coordinator(Id) column: the coordinator's broker id. A log dir with a broker's
    ``meta.properties`` is that broker (its ``node.id``), the one holding the transactional
    id's ``__transaction_state`` partition; any other log dir has no broker id, and the
    partition is named instead (``__transaction_state-P``)."""
    if os.path.isfile(os.path.join(root, "meta.properties")):
        return str(node_id(root))
    return f"__transaction_state-{partition}"


def run_list(args) -> int:
    rows = [{"TransactionalId": tid, "Coordinator": coordinator(args.root, p), "ProducerId": meta.producer_id,
             "TransactionState": meta.state} for tid, (p, meta) in _transaction_states(args.root).items()]
    print(kafka_table(rows, ["TransactionalId", "Coordinator", "ProducerId", "TransactionState"]))
    return 0


def run_describe(args) -> int:
    found = _transaction_states(args.root).get(args.transactional_id)
    if found is None:
        raise InvalidArgumentError(f"transactional id {args.transactional_id!r} is not in {args.root}'s "
                                   f"__transaction_state")
    p, meta = found
    started = meta.start_ms >= 0  # Kafka shows the start whenever the coordinator has one, in any state
    row = {"CoordinatorId": coordinator(args.root, p), "TransactionalId": args.transactional_id,
           "ProducerId": meta.producer_id, "ProducerEpoch": meta.producer_epoch, "TransactionState": meta.state,
           "TransactionTimeoutMs": meta.timeout_ms,
           "CurrentTransactionStartTimeMs": meta.start_ms if started else "None",
           "TransactionDurationMs": now_ms() - meta.start_ms if started else "None",
           "TopicPartitions": ",".join(f"{t}-{q}" for t, q in sorted(meta.partitions))}
    print(kafka_table([row], list(row)))
    return 0


def run_describe_producers(args) -> int:
    with LogManager.open_existing(args.root, read_only=True) as manager:
        producers = _log(manager, args.topic, args.partition).active_producers()
    rows = [{"ProducerId": ps.producer_id, "ProducerEpoch": ps.producer_epoch,
             "LatestCoordinatorEpoch": ps.coordinator_epoch, "LastSequence": ps.last_sequence,
             "LastTimestamp": ps.last_timestamp,
             "CurrentTransactionStartOffset": "None" if ps.current_txn_start_offset is None
             else ps.current_txn_start_offset} for ps in producers]
    print(kafka_table(rows, ["ProducerId", "ProducerEpoch", "LatestCoordinatorEpoch", "LastSequence", "LastTimestamp",
                       "CurrentTransactionStartOffset"]))
    return 0


def _log(manager, topic: str, partition: int):
    if partition not in manager.partitions(topic):
        raise UnknownTopicError(f"topic {topic!r} has no partition {partition} in {manager.root}")
    return manager.log(topic, partition)


def hanging_transactions(root: str, topic: str | None = None, partition: int | None = None, *,
                         max_timeout_ms: int, now: int | None = None) -> list[dict]:
    """The open transactions of ``root`` (or of one topic, or partition) no coordinator
    will end, as Kafka's tool finds them: open more than ``max_timeout_ms`` since the
    producer's last write, and no transaction of that producer in ``__transaction_state``
    whose coordinator still writes markers to the partition (ongoing, or preparing).
    Read-only. Cost: each partition's producer state (from its newest snapshot on)."""
    now = now_ms() if now is None else now
    by_producer = {meta.producer_id: meta for _, meta in _transaction_states(root).values()}
    found = []
    with LogManager.open_existing(root, read_only=True) as manager:
        topics = [topic] if topic is not None else manager.topics()
        for t in topics:
            for p in [partition] if partition is not None else manager.partitions(t):
                for ps in _log(manager, t, p).active_producers():
                    if ps.current_txn_start_offset is None or now - ps.last_timestamp <= max_timeout_ms:
                        continue
                    meta = by_producer.get(ps.producer_id)
                    if meta is not None and meta.state in _MARKERS_DUE and (t, p) in meta.partitions:
                        continue  # its coordinator writes the marker (at the latest when the timeout passes)
                    found.append({"Topic": t, "Partition": p, "ProducerId": ps.producer_id,
                                  "ProducerEpoch": ps.producer_epoch, "CoordinatorEpoch": ps.coordinator_epoch,
                                  "StartOffset": ps.current_txn_start_offset, "LastTimestamp": ps.last_timestamp,
                                  "Duration(min)": (now - ps.last_timestamp) // 60_000})
    return found


def run_find_hanging(args) -> int:
    if args.partition is not None and args.topic is None:
        raise InvalidArgumentError("--partition needs --topic")
    if args.max_transaction_timeout < 0:
        raise InvalidArgumentError(f"--max-transaction-timeout must be at least 0, got {args.max_transaction_timeout}")
    rows = hanging_transactions(args.root, args.topic, args.partition,
                                max_timeout_ms=args.max_transaction_timeout * 60_000)
    print(kafka_table(rows, ["Topic", "Partition", "ProducerId", "ProducerEpoch", "CoordinatorEpoch", "StartOffset",
                       "LastTimestamp", "Duration(min)"]))
    return 0


def run_abort(args) -> int:
    by_offset = args.start_offset is not None
    if by_offset == (args.producer_id is not None) or (args.producer_id is not None) != (
            args.producer_epoch is not None):
        raise InvalidArgumentError("abort takes --start-offset, or --producer-id with --producer-epoch")
    # read-only first: a mistake is found before anything is written
    with LogManager.open_existing(args.root, read_only=True) as manager:
        _open_transaction(_log(manager, args.topic, args.partition), args)
    with writer_pool(args.root) as pool, taken_log(pool, args.topic, args.partition, args.timeout_ms) as log:
        marker = _open_transaction(log, args)
        info = log.append_txn_marker(*marker[:2], commit=False, coordinator_epoch=marker[2])
        stable = log.last_stable_offset
    print(f"Wrote an ABORT marker for producer {marker[0]} (epoch {marker[1]}) to {args.topic}-{args.partition} at "
          f"offset {info.first_offset}; last stable offset now {stable}")
    return 0


def _open_transaction(log, args) -> tuple[int, int, int]:
    """``(producer id, epoch, coordinator epoch)`` of the marker ending the open transaction
    of ``log`` that ``--start-offset`` or ``--producer-id`` names; InvalidArgumentError
    when it has none such."""
    where = f"{args.topic}-{args.partition}"
    open_ones = [ps for ps in log.active_producers() if ps.current_txn_start_offset is not None]
    if args.start_offset is not None:
        ps = next((ps for ps in open_ones if ps.current_txn_start_offset == args.start_offset), None)
        if ps is None:
            starts = sorted(ps.current_txn_start_offset for ps in open_ones)
            raise InvalidArgumentError(f"no open transaction of {where} starts at offset {args.start_offset} "
                                       f"(open ones start at {starts or 'none'})")
        return ps.producer_id, ps.producer_epoch, max(ps.coordinator_epoch, 0)
    if all(ps.producer_id != args.producer_id for ps in open_ones):
        raise InvalidArgumentError(f"producer {args.producer_id} has no open transaction in {where} (producers "
                                   f"with one: {sorted(ps.producer_id for ps in open_ones) or 'none'})")
    return args.producer_id, args.producer_epoch, args.coordinator_epoch

