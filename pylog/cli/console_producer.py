"""``pylog console-producer ROOT --topic T``: Kafka's ``kafka-console-producer.sh`` on a log
dir: each line of stdin becomes a record (pylog/cli/line_reader.py). ``pylog produce`` is the
same command.

Lines are appended promptly: a batch goes to the log when it holds ``--batch-size`` lines,
``--linger-ms`` after its first line came (Kafka's ``linger.ms``, 5 ms), or at the end of the
input; a line typed on a terminal or written by a slow writer is readable by consumers
within milliseconds. Records go to ``--partition``, or by Kafka's default partitioner (murmur2
of the key; records without a key go, batch by batch, to the next partition in turn), or
``--partitioner round-robin`` (each record to the next partition). A topic that does not
exist is created with ``--partitions`` partitions (Kafka's auto-creation).

A partition that a live producer or consumer writes is handed over by it (waiting up to
``--timeout-ms``), and this command hands its partitions over in turn to any client that
wants one (pylog/cli/common.py ``taken_log``).

Durability: an appended batch is in the log (every reader sees it) but is made durable
(fsync) only by the topic's flush settings or when the command ends; a line not yet
appended when the process is killed is lost, as with Kafka's producer.
"""

from __future__ import annotations

import itertools
import sys

from pylog.cli.common import add_timeout_argument, parse_properties, properties_help, taken_log, writer_pool
from pylog.cli.line_reader import PROPERTIES, LineReader, line_batches
from pylog.errors import InvalidArgumentError, UnknownTopicError
from pylog.partitioner import partition_for_key

CODECS = ["none", "gzip", "snappy", "lz4", "zstd"]


def add_console_producer_parser(sub) -> None:
    _add(sub.add_parser("console-producer", help="append stdin lines as records, as kafka-console-producer.sh does"))


def add_produce_parser(sub) -> None:
    _add(sub.add_parser("produce", help="the same as console-producer"))


def _add(p) -> None:
    p.add_argument("root", help="the log dir holding <topic>-<partition> directories (created if missing)")
    p.add_argument("--topic", required=True, help="the topic to append to (created if missing)")
    p.add_argument("--partitions", type=int, default=1,
                   help="partitions of the topic if it is created (default 1)")
    where = p.add_mutually_exclusive_group()
    where.add_argument("--partition", type=int, help="append every record to this partition")
    where.add_argument("--partitioner", choices=["default", "round-robin"], default="default",
                       help="default: murmur2 of the key, records without a key batch by batch to the next "
                            "partition; round-robin: each record to the next partition")
    p.add_argument("--property", dest="properties", action="extend", nargs="+", metavar="NAME=VALUE",
                   help="line parsing, Kafka's LineMessageReader properties: " + properties_help(PROPERTIES))
    p.add_argument("--key-separator", metavar="S",
                   help="the same as --property parse.key=true key.separator=S")
    p.add_argument("--compression-codec", "--compression", dest="compression", nargs="?", const="gzip",
                   default="none", choices=CODECS, help="codec of the batches (default none; gzip if given without one)")
    p.add_argument("--batch-size", type=int, default=1000, metavar="N", help="at most N lines per append (default 1000)")
    p.add_argument("--linger-ms", type=int, default=5, metavar="MS",
                   help="append a batch at the latest this long after its first line came (default 5)")
    p.add_argument("--sync", action="store_true", help="append each line on its own (as --batch-size 1)")
    p.add_argument("--verbose", action="store_true",
                   help="print topic-partition@offset of every record appended, on stdout")
    add_timeout_argument(p)
    p.set_defaults(run=run)


def run(args) -> int:
    from pylog.manager import LogManager
    props = parse_properties(args.properties, PROPERTIES)
    if args.key_separator is not None:
        props.update({"parse.key": "true", "key.separator": args.key_separator})
    reader = LineReader(props)
    if args.batch_size < 1 or args.linger_ms < 0:
        raise InvalidArgumentError("--batch-size must be at least 1 and --linger-ms at least 0")
    with LogManager(args.root) as manager:
        if args.topic not in manager.topics():
            manager.create_topic(args.topic, args.partitions)
    with writer_pool(args.root) as pool:
        topic = LogManager(args.root, read_only=True).topic(args.topic)
        producer = Producer(topic, args.partition, args.partitioner, args.compression, sys.stdout if args.verbose
                            else None, pool, args.timeout_ms)
        for lines in line_batches(sys.stdin.fileno(), linger_ms=args.linger_ms,
                                  batch_records=1 if args.sync else args.batch_size):
            records = []
            try:
                for line in lines:
                    records.append(reader.record(line))
            finally:  # the lines before a bad one are appended, as Kafka's producer sent them
                producer.send(records)
    print(f"produced {producer.sent} record(s) to {args.topic}", file=sys.stderr)
    return 0


class Producer:
    """Routes records to partitions and appends one batch per partition touched."""

    def __init__(self, topic, partition: int | None, partitioner: str, compression: str, verbose, pool,
                 timeout_ms: int):
        self.topic, self.pool, self.timeout_ms = topic, pool, timeout_ms
        self.partition = partition
        self.round_robin = partitioner == "round-robin"
        self.compression = compression
        self.verbose = verbose
        self.sent = 0
        self._next = itertools.count()

    def send(self, records: list) -> None:
        """Append ``records``; with ``verbose``, print where each went and flush."""
        for partition, group in self._route(records).items():
            if partition not in self.topic.partitions:
                raise UnknownTopicError(f"topic {self.topic.name!r} has no partition {partition}")
            with taken_log(self.pool, self.topic.name, partition, self.timeout_ms, keep=True) as log:
                info = log.append(group, compression=self.compression)
            self.sent += len(group)
            if self.verbose is not None:
                name = f"{self.topic.name}-{partition}"
                self.verbose.write("".join(f"{name}@{info.first_offset + i}\n" for i in range(len(group))))
        if self.verbose is not None:
            self.verbose.flush()

    def _route(self, records: list) -> dict[int, list]:
        if not records:
            return {}
        if self.partition is not None:
            return {self.partition: records}
        count = len(self.topic.partitions)
        sticky = next(self._next) % count  # records without a key: this batch's partition
        groups: dict[int, list] = {}
        for r in records:
            if self.round_robin:
                p = next(self._next) % count
            else:
                p = sticky if r.key is None else partition_for_key(r.key, count)
            groups.setdefault(p, []).append(r)
        return groups
