"""``pylog console-producer ROOT --topic T``: Kafka's ``kafka-console-producer.sh`` on a log
dir: each line of stdin becomes a record (pylog/cli/line_reader.py). ``pylog produce`` is the
same command.

Lines are appended promptly: a batch goes to the log when it holds ``--batch-size`` lines,
``--linger-ms`` after its first line came (Kafka's ``linger.ms``, 5 ms), or at the end of the
input; a line typed on a terminal or written by a slow writer is readable by consumers
within milliseconds. Records go to ``--partition``, or by Kafka's default partitioner (murmur2
of the key; records without a key go, batch by batch, to the next partition in turn), or
``--partitioner round-robin`` (each record to the next partition). A topic that does not
exist is created with ``--partitions`` partitions (Kafka's auto-creation) when the first
record comes, so a run that fails before one writes nothing; a log dir that does not exist is
refused (a mistyped path). Appends go through
a client :class:`~pylog.clients.Producer` (idempotent, as Kafka's console producer is), so
other producers of the topic, in other processes, write while this one runs.

A partition that a live producer or consumer writes is handed over by it (waiting up to
``--timeout-ms``), and this command hands its partitions over in turn to any client that
wants one (pylog/logdir/writers.py).

Durability: an appended batch is in the log (every reader sees it) but is made durable
(fsync) only by the topic's flush settings or when the command ends; a line not yet
appended when the process is killed is lost, as with Kafka's producer.
"""

from __future__ import annotations

import itertools
import sys

from pylog.cli import client_settings
from pylog.cli.client_settings import Setting, choice, integer
from pylog.cli.common import add_timeout_argument, parse_properties, properties_help
from pylog.cli.line_reader import PROPERTIES, LineReader, line_batches
from pylog.clients.producer import Producer
from pylog.errors import InvalidArgumentError, LogDirNotFoundError
from pylog.layout import INT32_MAX
from pylog.manager import LogManager

CODECS = ["none", "gzip", "snappy", "lz4", "zstd"]
ACKS = ["0", "1", "-1", "all"]
#: Kafka producer settings (--producer-property, --producer.config) with a use here
SETTINGS = {
    "acks": Setting("--request-required-acks", "request_required_acks", choice({a: a for a in ACKS})),
    "compression.type": Setting("--compression-codec", "compression", choice({c: c for c in CODECS})),
    "linger.ms": Setting("--linger-ms", "linger_ms", integer),
    "max.block.ms": Setting("--timeout-ms", "timeout_ms", integer),
}


def add_console_producer_parser(sub) -> None:
    _add(sub.add_parser("console-producer"))


def add_produce_parser(sub) -> None:
    _add(sub.add_parser("produce"))


def _add(p) -> None:
    p.add_argument("root", help="the log dir holding <topic>-<partition> directories (pylog topics ROOT --create "
                                "makes a new one)")
    p.add_argument("--topic", required=True, help="the topic to append to (created if missing)")
    p.add_argument("--partitions", type=int, default=1,
                   help="partitions of the topic if it is created (default 1)")
    where = p.add_mutually_exclusive_group()
    where.add_argument("--partition", type=int, help="append every record to this partition")
    where.add_argument("--partitioner", choices=["default", "round-robin"], default="default",
                       help="default: murmur2 of the key, records without a key batch by batch to the next "
                            "partition; round-robin: each record to the next partition")
    p.add_argument("--property", "--reader-property", dest="properties", action="extend", nargs="+",
                   metavar="NAME=VALUE",
                   help="line parsing, Kafka's LineMessageReader properties: " + properties_help(PROPERTIES))
    p.add_argument("--key-separator", metavar="S",
                   help="the same as --property parse.key=true key.separator=S")
    p.add_argument("--compression-codec", "--compression", dest="compression", nargs="?", const="gzip",
                   default="none", choices=CODECS, help="codec of the batches (default none; gzip if given without one)")
    p.add_argument("--batch-size", type=int, default=1000, metavar="N", help="at most N lines per append (default 1000)")
    p.add_argument("--linger-ms", type=int, default=5, metavar="MS",
                   help="append a batch at the latest this long after its first line came (default 5)")
    p.add_argument("--sync", action="store_true", help="append each line on its own (as --batch-size 1)")
    p.add_argument("--request-required-acks", choices=ACKS, default="all", metavar="ACKS",
                   help="accepted for Kafka's command lines (0, 1, -1 or all): pylog is one node, so an append "
                        "is acknowledged once written whatever the value")
    p.add_argument("--verbose", action="store_true",
                   help="print topic-partition@offset of every record appended, on stdout")
    add_timeout_argument(p)
    client_settings.add_arguments(p, "producer", SETTINGS)
    p.set_defaults(run=run)


def run(args) -> int:
    client_settings.apply(args)
    props = parse_properties(args.properties, PROPERTIES)
    if args.key_separator is not None:
        props.update({"parse.key": "true", "key.separator": args.key_separator})
    reader = LineReader(props)
    _check_numbers(args)
    _check_partition(args)
    lines_out = LineSender(args, sys.stdout if args.verbose else None)
    try:
        for lines in line_batches(sys.stdin.fileno(), linger_ms=args.linger_ms,
                                  batch_records=1 if args.sync else args.batch_size):
            try:
                for line in lines:
                    lines_out.send(reader.record(line))
            finally:  # the lines before a bad one are appended, as Kafka's producer sent them
                lines_out.flush()
    finally:
        lines_out.close()
    print(f"produced {lines_out.sent} record(s) to {args.topic}", file=sys.stderr)
    return 0


def _check_numbers(args) -> None:
    for option, value, least in (("--partitions", args.partitions, 1), ("--batch-size", args.batch_size, 1),
                                 ("--linger-ms", args.linger_ms, 0), ("--timeout-ms", args.timeout_ms, 0)):
        if value < least:
            raise InvalidArgumentError(f"{option} must be at least {least}, got {value}")


def _check_partition(args) -> None:
    """Refuse a log dir that does not exist (a typo: nothing creates it) and a
    ``--partition`` the topic does not have (or will not have, once created)."""
    try:
        with LogManager.open_existing(args.root, read_only=True) as manager:
            exists = args.topic in manager.topics()
            count = len(manager.partitions(args.topic)) if exists else args.partitions
    except LogDirNotFoundError as e:
        raise LogDirNotFoundError(f"{e}: pylog topics {args.root} --create --topic {args.topic} creates it with "
                                  f"the topic") from None
    if args.partition is not None and not 0 <= args.partition < count:
        has = "it has" if exists else "created with --partitions, it would have"
        raise InvalidArgumentError(f"topic {args.topic!r} has no partition {args.partition} ({has} {count})")


def _ensure_topic(root: str, topic: str, partitions: int) -> None:
    """Create ``topic`` with ``partitions`` partitions if it does not exist (Kafka's
    auto-creation); the manager is closed at once, leaving the logs to the producer."""
    with LogManager.open_existing(root, read_only=False) as manager:
        if topic not in manager.topics():
            manager.create_topic(topic, partitions)


class LineSender:
    """Sends each line's record to its partition through a client ``Producer``, opened (and
    the topic created if missing) at the first record, so input without one writes nothing;
    a batch of lines is appended by ``flush`` (one append per partition touched)."""

    def __init__(self, args, verbose):
        self.args, self.topic, self.partition = args, args.topic, args.partition
        self.verbose = verbose
        self.producer = None
        self.partition_count = 0
        self.sent = 0
        self._next = itertools.count()
        self._futures = []

    def _open(self) -> None:
        args = self.args
        _ensure_topic(args.root, args.topic, args.partitions)
        compression = None if args.compression == "none" else args.compression
        self.producer = Producer(args.root, linger_ms=INT32_MAX, batch_size=INT32_MAX, compression_type=compression,
                                 max_block_ms=args.timeout_ms)
        if args.partitioner == "round-robin":
            self.partition_count = len(self.producer.partitions_for(self.topic))

    def close(self) -> None:
        if self.producer is not None:
            self.producer.close()

    def send(self, record) -> None:
        if self.producer is None:
            self._open()
        partition = self.partition
        if self.partition_count:
            partition = next(self._next) % self.partition_count
        self._futures.append(self.producer.send(self.topic, record.value, key=record.key, headers=record.headers,
                                                partition=partition, timestamp_ms=record.timestamp))

    def flush(self) -> None:
        """Append the lines sent since the last flush; with ``verbose``, print where each
        went. Raises the first append's error."""
        if self.producer is None:
            return
        self.producer.flush()
        futures, self._futures = self._futures, []
        placed = [f.get(0) for f in futures]
        self.sent += len(placed)
        if self.verbose is not None and placed:
            self.verbose.write("".join(f"{m.topic}-{m.partition}@{m.offset}\n" for m in placed))
            self.verbose.flush()
