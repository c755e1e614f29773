"""``pylog console-consumer ROOT --topic T``: Kafka's ``kafka-console-consumer.sh`` on a log
dir. ``pylog consume`` is the same command with other defaults (see below).

It reads every partition of the topic (or ``--partition P``; or of every topic ``--include
REGEX`` matches), in rounds: one fetch per
partition, its records printed (pylog/cli/formatter.py), the output flushed. Without a start
option it begins at the end of each partition, as Kafka's does (``--from-beginning``: at the
start; ``--offset`` with ``--partition``; ``--timestamp``: the first record at or after a
time), and keeps following what writers append until ``--max-messages``, ``--timeout-ms``
(that long without a record) or Ctrl-C. ``--no-follow`` stops at the end of every partition
instead. On exit it prints ``Processed a total of N messages`` on stderr, as Kafka's does.

``pylog consume`` (the first command pylog had) is this command with ``--no-follow`` and
``--from-beginning`` as defaults: it prints what is there and stops; ``--follow`` makes it
wait for more, starting at the end unless told otherwise.

Following, every record is printed once, in offset order per partition, across rolls,
retention, compaction and truncation by the writing process. A position the writer removed
meanwhile (retention passed it, or truncation cut below it) is reported on stderr and
reading goes on from the log start, or the log end, as Kafka's consumers reset. Following a
``--topic`` that does not exist, it waits for it, as Kafka's does; a topic deleted under it is
said on stderr and waited for again; either is read from its start once created.

Without ``--group`` no consumer group is joined: the partitions and start offsets come
from the options (:func:`assign`), and nothing is committed. With ``--group G`` the process
is a member of group G (:class:`pylog.clients.Consumer`): it reads the partitions the group
assigns it, from the group's committed offsets (``--from-beginning`` or the log end where
there are none, as Kafka's ``auto.offset.reset``), and commits its positions as it goes and
on exit, so ``pylog consumer-groups --describe --group G`` shows its progress and lag.
"""

from __future__ import annotations

import os
import sys
import time

from pylog.cli import client_settings
from pylog.cli.client_settings import Setting, choice
from pylog.cli.common import add_storage_arguments, open_url_manager, parse_offset_spec, parse_properties, \
    properties_help, topic_pattern, wanted_topics
from pylog.clients.consumer import Consumer as GroupConsumer
from pylog.cli.formatter import FORMATTERS, PROPERTIES, deserializer, formatter_name
from pylog.errors import InvalidArgumentError, OffsetOutOfRangeError, PylogError, UnknownTopicError
from pylog.manager import LogManager
from pylog.remote.store import is_url

#: How long a consumer at the end of every partition waits before it polls again.
POLL_INTERVAL_S = 0.05
#: Bytes per fetch and partition.
FETCH_BYTES = 1 << 20
ISOLATION_LEVELS = {"read_uncommitted": "uncommitted", "read_committed": "committed",
                    "uncommitted": "uncommitted", "committed": "committed"}
#: Kafka consumer settings (--consumer-property, --consumer.config) with a use here
SETTINGS = {
    "group.id": Setting("--group", "group", str),
    "isolation.level": Setting("--isolation-level", "isolation", choice({n: n for n in ("read_committed",
                                                                                          "read_uncommitted")})),
    "auto.offset.reset": Setting("--from-beginning", "from_beginning", choice({"earliest": True, "latest": False})),
}


def add_console_consumer_parser(sub) -> None:
    _add(sub.add_parser("console-consumer"), follow=True)


def add_consume_parser(sub) -> None:
    _add(sub.add_parser("consume"), follow=False)


def _add(p, *, follow: bool) -> None:
    p.add_argument("root", help="the log dir holding <topic>-<partition> directories, or its URL in object storage "
                                "(s3://, s3a://, gs://, az://, abfss://, file://: read as it was when listed)")
    which = p.add_mutually_exclusive_group(required=True)
    which.add_argument("--topic", help="the topic to read")
    which.add_argument("--include", "--whitelist", dest="include", metavar="REGEX",
                       help="read every topic this regular expression matches (whole name), Kafka's internal "
                            "topics left out; without --group, those there when it starts")
    p.add_argument("--partition", type=int, help="read this partition only (default: every partition of the topic)")
    start = p.add_mutually_exclusive_group()
    start.add_argument("--from-beginning", action="store_true", default=None,
                       help="start at the log start offset of each partition")
    start.add_argument("--offset", help="start at this offset of --partition, or 'earliest' or 'latest'")
    start.add_argument("--timestamp", type=int, metavar="MS",
                       help="start at the first record at or after this time (ms since the epoch)")
    p.add_argument("--group", metavar="G",
                   help="read as a member of consumer group G: the group's partitions of the topic, from its "
                        "committed offsets, committing as it goes (not with --partition, --offset, --timestamp)")
    p.add_argument("--max-messages", "--max-records", dest="max_messages", type=int, metavar="N",
                   help="exit after printing N records (-1: no limit, as Kafka's default)")
    p.add_argument("--timeout-ms", type=int, metavar="MS",
                   help="exit when no record came for this long (-1: never, as Kafka's default)")
    p.add_argument("--isolation-level", "--isolation", dest="isolation", choices=sorted(ISOLATION_LEVELS),
                   default="read_uncommitted",
                   help="read_committed leaves out aborted transactions and stops before open ones "
                        "(default read_uncommitted; committed/uncommitted are accepted too)")
    p.add_argument("--property", "--formatter-property", dest="properties", action="extend", nargs="+",
                   metavar="NAME=VALUE",
                   help="formatter properties, Kafka's: " + properties_help(PROPERTIES))
    p.add_argument("--formatter", "--format", dest="formatter", type=formatter_name, choices=sorted(FORMATTERS),
                   default="default",
                   help="default (text; Kafka's class name kafka.tools.DefaultMessageFormatter too) prints as Kafka's "
                        "DefaultMessageFormatter; json prints one object per record, keys and values as UTF-8 text or "
                        "base64 (a field says which)")
    for which in ("key", "value"):
        p.add_argument(f"--{which}-deserializer", type=deserializer, metavar="CLASS",
                       help=f"accepted for Kafka's command lines: org.apache.kafka.common.serialization."
                            f"StringDeserializer or ByteArrayDeserializer, which print a {which} as the bytes pylog "
                            f"prints; no other")
    p.add_argument("--skip-message-on-error", action="store_true",
                   help="accepted for Kafka's command lines: printing a record cannot fail here (keys and values "
                        "are printed as their bytes), so there is none to skip")
    p.add_argument("--follow", dest="follow", action="store_const", const=True, default=follow,
                   help="keep waiting for new records" + (" (the default)" if follow else ""))
    p.add_argument("--no-follow", dest="follow", action="store_const", const=False,
                   help="stop at the end of every partition" + ("" if follow else " (the default)"))
    client_settings.add_arguments(p, "consumer", SETTINGS)
    add_storage_arguments(p)
    p.set_defaults(run=run)


def run(args) -> int:
    client_settings.apply(args)
    _check_numbers(args)
    props = parse_properties(args.properties, PROPERTIES)
    formatter = FORMATTERS[args.formatter](props)
    out = sys.stdout.buffer
    if args.group is not None:
        consumer = GroupMember(args)
    else:
        consumer = Consumer(open_url_manager(args, args.root), args)
    status = 0
    try:
        max_records = None if args.max_messages == -1 else args.max_messages
        timeout_ms = None if args.timeout_ms == -1 else args.timeout_ms
        for record in consumer.poll(follow=args.follow, max_records=max_records, timeout_ms=timeout_ms,
                                    flush=out.flush):
            out.write(formatter.format(record))
    except KeyboardInterrupt:  # how a following consumer is usually stopped: still a summary
        status = 130
    finally:
        out.flush()
        consumer.close()
    print(f"Processed a total of {consumer.printed} messages", file=sys.stderr)
    return status


def _check_numbers(args) -> None:
    """-1 is Kafka's "no limit" of both; another negative is a mistake."""
    for option, value in (("--max-messages", args.max_messages), ("--timeout-ms", args.timeout_ms)):
        if value is not None and value < -1:
            raise InvalidArgumentError(f"{option} must be at least 0, or -1 for no limit; got {value}")


def assign(manager, args, *, new: bool = False) -> dict:
    """``{log: start offset}`` of the partitions to read, from the options; the log start
    without a start option when the topic is ``new`` (created while waited for: all of it
    came since). A consumer group would instead take its assignment and committed offsets here."""
    if args.include is not None:
        return {log: _start(log, args) for log in _included_logs(manager, args)}
    partitions = manager.partitions(args.topic)
    if args.partition is not None:
        if args.partition not in partitions:
            raise InvalidArgumentError(f"topic {args.topic!r} has no partition {args.partition} "
                                       f"(it has {len(partitions)})")
        partitions = [args.partition]
    if args.offset is not None and len(partitions) > 1:
        raise InvalidArgumentError(f"--offset needs --partition: topic {args.topic!r} has {len(partitions)} partitions")
    logs = [manager.log(args.topic, p) for p in partitions]
    return {log: _start(log, args, new) for log in logs}


def _included_logs(manager, args) -> list:
    """The logs of every topic ``--include`` matches, internal topics left out."""
    if args.partition is not None or args.offset is not None:
        raise InvalidArgumentError("--partition and --offset go with --topic, not --include")
    topics = wanted_topics(manager.topics(), args.include, exclude_internal=True, option="--include")
    if not topics:
        raise UnknownTopicError(f"no topic of {manager.root} matches --include {args.include!r}")
    return [manager.log(t, p) for t in topics for p in manager.partitions(t)]


def _start(log, args, new: bool = False) -> int:
    """Where ``log`` is read from: ``--offset``, ``--timestamp`` (the latest offset when no
    record is that late), the log start or the latest offset (:meth:`Log.list_offset
    <pylog.log.reading.RecordReads.list_offset>` at the isolation level)."""
    isolation = ISOLATION_LEVELS[args.isolation]
    if args.offset is not None:
        spec = parse_offset_spec(args.offset, "--offset")
        if isinstance(spec, int) and spec < 0:
            raise InvalidArgumentError(f"--offset {spec} is negative")
        return spec if isinstance(spec, int) else log.list_offset(spec, isolation=isolation)
    if args.timestamp is not None:
        found = log.list_offset(args.timestamp, isolation=isolation)
        return log.list_offset("latest", isolation=isolation) if found is None else found
    earliest = new or args.from_beginning or (args.from_beginning is None and not args.follow)
    return log.list_offset("earliest" if earliest else "latest", isolation=isolation)


class Consumer:
    """Reads its partitions in rounds from their positions; the records' place (topic,
    partition, timestamp type) comes with them. Following a ``--topic`` that does not exist,
    or whose partitions were deleted, it waits for the topic and reads it from its start
    when it comes, as Kafka's console consumer waits for an unknown topic."""

    def __init__(self, manager, args):
        self._manager, self._args = manager, args
        self.isolation = ISOLATION_LEVELS[args.isolation]
        self.printed = 0
        self._positions = {}
        if self._awaits():
            print(f"topic {args.topic!r} does not exist in {manager.root} yet; waiting for it", file=sys.stderr)
        else:
            self._positions = assign(manager, args)

    def close(self) -> None:
        self._manager.close()

    def _awaits(self) -> bool:
        """Whether it waits for ``--topic``: following it, and it is not there. A log dir in
        object storage was listed once when opened: a missing topic is an error there."""
        args = self._args
        missing = args.topic is not None and args.topic not in self._manager.topics()
        if missing and in_object_storage(self._manager):
            raise UnknownTopicError(f"no topic {args.topic!r} in {self._manager.root}")
        return missing and args.follow

    def _find_topic(self) -> None:
        """Read the awaited ``--topic`` from its start if it has come."""
        if not self._awaits():
            self._manager.close()  # and the deleted partitions' logs with it
            self._manager = open_url_manager(self._args, self._args.root)
            self._positions = assign(self._manager, self._args, new=True)

    def positions(self) -> dict[tuple[str, int], int]:
        """``{(topic, partition): next offset to read}``: what a group would commit."""
        return {(log.topic, log.partition): offset for log, offset in self._positions.items()}

    def poll(self, *, follow: bool, max_records: int | None, timeout_ms: int | None, flush):
        """Yield records until ``max_records``, or (not ``follow``) the end of every
        partition, or ``timeout_ms`` without one. ``flush`` runs after each round that
        yielded records and before waiting."""
        if max_records is not None and max_records <= 0:
            return
        last_record = time.monotonic()
        while True:
            moved = got = False
            if not self._positions and self._args.topic is not None and follow:
                self._find_topic()
            for log in list(self._positions):
                records, advanced = self._fetch(log, follow)
                moved = moved or advanced
                for record in records:
                    got = True
                    self.printed += 1
                    yield record
                    if self.printed == max_records:
                        return
            now = time.monotonic()
            if got:
                last_record = now
                flush()
            if moved:
                continue
            if not follow or (timeout_ms is not None and (now - last_record) * 1000 >= timeout_ms):
                return
            flush()
            time.sleep(POLL_INTERVAL_S)

    def _fetch(self, log, follow: bool) -> tuple[list, bool]:
        """The records of one fetch of ``log`` at its position, and whether it moved on."""
        offset = self._positions[log]
        try:
            fetch = log.read(offset, FETCH_BYTES, isolation=self.isolation)
        except OffsetOutOfRangeError:
            if not follow:
                raise
            self._positions[log] = _reset(log, offset, self.isolation)
            return [], True
        except (OSError, PylogError):
            if in_object_storage(self._manager) or os.path.isdir(log.path):
                raise
            self._deleted(log, follow)
            return [], True
        if not fetch.size_bytes:
            return [], False
        self._positions[log] = fetch.next_offset
        return fetch.records(), True

    def _deleted(self, log, follow: bool) -> None:
        """Stop reading ``log``, whose partition was deleted, and say so."""
        del self._positions[log]
        waits = self._args.topic is not None and follow
        print(f"{log.topic}-{log.partition} was deleted; "
              + (f"waiting for topic {log.topic!r} to be created again" if waits else "no longer reading it"),
              file=sys.stderr)


def in_object_storage(manager) -> bool:
    """Whether ``manager`` reads a log dir in object storage (a URL's), which no writer
    changes under it: nothing to wait for, a failed read is the store's."""
    return not isinstance(manager, LogManager)


def _reset(log, offset: int, isolation: str) -> int:
    """Where to go on from an offset the writer removed: the log start, or the latest offset."""
    to = log.list_offset("earliest" if offset < log.log_start_offset else "latest", isolation=isolation)
    print(f"{log.topic}-{log.partition}: offset {offset} is no longer in the log; going on from {to}",
          file=sys.stderr)
    return to


class GroupMember:
    """``--group``: a :class:`pylog.clients.Consumer` in the group, subscribed to the topic,
    polled with the same stopping rules as :class:`Consumer`; positions are auto-committed
    and committed on close."""

    def __init__(self, args):
        if is_url(args.root):
            raise InvalidArgumentError("--group commits the group's offsets in the log dir: give a local log dir, "
                                       "not a URL (without --group, a URL is read as any log dir)")
        if args.partition is not None or args.offset is not None or args.timestamp is not None:
            raise InvalidArgumentError("--group reads the partitions the group assigns from its committed offsets: "
                                       "it does not go with --partition, --offset or --timestamp")
        earliest = args.from_beginning or (args.from_beginning is None and not args.follow)
        isolation = "read_" + ISOLATION_LEVELS[args.isolation]
        self._consumer = GroupConsumer(args.root, group_id=args.group, isolation_level=isolation,
                                       auto_offset_reset="earliest" if earliest else "latest")
        if args.include is not None:
            self._consumer.subscribe(pattern=topic_pattern(args.include, "--include").pattern)
        else:
            self._consumer.subscribe([args.topic])
        self.printed = 0

    def close(self) -> None:
        self._consumer.close()

    def poll(self, *, follow: bool, max_records: int | None, timeout_ms: int | None, flush):
        """As :meth:`Consumer.poll`; without ``follow`` it stops once a poll finds nothing
        and every assigned partition is read to its end."""
        consumer, last_record = self._consumer, time.monotonic()
        while max_records is None or self.printed < max_records:
            left = None if max_records is None else max_records - self.printed
            batches = consumer.poll(timeout_ms=int(POLL_INTERVAL_S * 1000), max_records=left)
            for records in batches.values():
                for record in records:
                    self.printed += 1
                    yield record
            now = time.monotonic()
            if batches:
                last_record = now
                flush()
            elif not follow and self._at_end():
                return
            elif timeout_ms is not None and (now - last_record) * 1000 >= timeout_ms:
                return

    def _at_end(self) -> bool:
        assigned = self._consumer.assignment()
        ends = self._consumer.end_offsets(assigned)
        return bool(assigned) and all(self._consumer.position(tp) >= ends[tp] for tp in assigned)
