"""``pylog get-offsets ROOT``: Kafka's ``kafka-get-offsets.sh`` on a log dir: for each
partition, the offset ``--time`` names, printed ``topic:partition:offset`` in Kafka's order
(sorted by ``topic-partition`` as text).

``--time`` is ``-1``/``latest`` (the high watermark, the default: the log end of a log without
replicas), ``-2``/``earliest`` (the log start offset), ``-3``/``max-timestamp`` (the first
record with the largest timestamp, looked up in the segments only, as Kafka does: it may lie
below a log start that ``delete-records`` moved), ``-4``/``earliest-local`` (the local log
start), ``-5``/``latest-tiered`` (the last offset in remote storage: none when nothing is
tiered), ``-6``/``earliest-pending-upload`` (none: pylog names no offset), or a time in ms
since the epoch: the first offset whose timestamp is at or after it. Each is the partition's
ListOffsets answer, read_uncommitted as Kafka's tool asks (:meth:`Log.list_offset
<pylog.log.reading.RecordReads.list_offset>`). A partition with no such offset is left out,
as Kafka leaves it out.

Partitions: ``--topic REGEX`` and ``--partitions 0,1``, or Kafka's ``--topic-partitions``
patterns (``orders:0-3,audit,:5-``). A broker's log dir also holds KRaft's metadata log
(``__cluster_metadata-0``), which is no topic: left out, as Kafka's tool never lists it.
"""

from __future__ import annotations
import re

from pylog.cli.common import add_exclude_internal_argument, add_storage_arguments, open_url_manager, \
    parse_offset_spec, topic_pattern, wanted_topics
from pylog.errors import InvalidArgumentError, UnknownTopicError
from pylog.log.list_offset import SPEC_TIMESTAMPS

#: Kafka's EARLIEST_PENDING_UPLOAD_TIMESTAMP: pylog tiers nothing it has not uploaded, so it names no offset
PENDING_UPLOAD = ("earliest-pending-upload", -6)
TIMES = (*SPEC_TIMESTAMPS, PENDING_UPLOAD[0])
#: one ``--topic-partitions`` pattern: an optional topic regex, then ``:N``, ``:N-M`` (M
#: exclusive), ``:N-`` or ``:-M``
_PATTERN = re.compile(r"([^:,]*)(?::(?:(\d+)|(\d*)-(\d*)))?")
#: KRaft's metadata log in a broker's log dir: a partition dir, but no topic
KRAFT_METADATA_TOPIC = "__cluster_metadata"


def add_parser(sub) -> None:
    p = sub.add_parser("get-offsets")
    p.add_argument("root", help="the log dir holding <topic>-<partition> directories, or its URL in object storage "
                                "(s3://, s3a://, gs://, az://, abfss://, file://)")
    p.add_argument("--topic", help="the topic, a regular expression (whole name); default: every topic")
    p.add_argument("--partitions", metavar="P,P,...", help="comma-separated partition ids; default: every partition")
    p.add_argument("--topic-partitions", metavar="PATTERNS",
                   help="instead of --topic and --partitions: comma-separated TOPIC_REGEX[:P], where P is N, N-M "
                        "(M exclusive), N- or -M, and a missing regex is every topic "
                        "(orders:0-3,audit,:5-)")
    p.add_argument("--time", default="latest",
                   help="-1 or latest (default), -2 or earliest, -3 or max-timestamp, -4 or earliest-local (the "
                        "local log start), -5 or latest-tiered (the last tiered offset: none when nothing is "
                        "tiered), -6 or earliest-pending-upload (none), or a time in ms: the first offset at or "
                        "after it")
    add_exclude_internal_argument(p)
    add_storage_arguments(p)
    p.set_defaults(run=run)


def run(args) -> int:
    spec = parse_time(args.time)
    wanted = _partition_filter(args)
    with open_url_manager(args, args.root) as manager:
        topics = [t for t in wanted_topics(manager.topics(), None, exclude_internal=args.exclude_internal_topics)
                  if t != KRAFT_METADATA_TOPIC]
        found = [(t, p) for t in topics for p in manager.partitions(t) if wanted(t, p)]
        if not found:
            raise UnknownTopicError(f"no topic-partition in {args.root} matches the given filters")
        for topic, partition in sorted(found, key=lambda tp: f"{tp[0]}-{tp[1]}"):
            offset = None if spec in PENDING_UPLOAD else manager.log(topic, partition).list_offset(
                spec, isolation="uncommitted")  # as Kafka's tool asks: latest is the high watermark
            if offset is not None:
                print(f"{topic}:{partition}:{offset}")
    return 0


def _partition_filter(args):
    """``(topic, partition) -> bool`` from ``--topic-partitions``, or from ``--topic`` and
    ``--partitions``."""
    if args.topic_partitions is None:
        pattern, ids = topic_pattern(args.topic), _partition_ids(args.partitions)
        return lambda t, p: pattern.fullmatch(t) is not None and (ids is None or p in ids)
    if args.topic is not None or args.partitions is not None:
        raise InvalidArgumentError("--topic-partitions cannot be used with --topic or --partitions")
    rules = [_rule(spec) for spec in args.topic_partitions.split(",")]
    return lambda t, p: any(pattern.fullmatch(t) and low <= p < high for pattern, low, high in rules)


def _rule(spec: str) -> tuple[re.Pattern, int, int]:
    """One ``--topic-partitions`` pattern as (topic regex, lowest partition, highest + 1)."""
    match = _PATTERN.fullmatch(spec)
    if match is None or (match.group(3) == "" and match.group(4) == ""):
        raise InvalidArgumentError(f"--topic-partitions: {spec!r} is not TOPIC_REGEX[:N | :N-M | :N- | :-M]")
    topic, single, low, high = match.groups()
    pattern = topic_pattern(topic or None, "--topic-partitions")
    if single is not None:
        return pattern, int(single), int(single) + 1
    return pattern, int(low or 0), int(high) if high else 2**31


def parse_time(text: str) -> str | int:
    """``--time``: a name of :data:`TIMES`, or Kafka's ListOffsets timestamp (-1 to -6, or ms)."""
    value = parse_offset_spec(text, "--time", TIMES)
    if isinstance(value, int) and value < PENDING_UPLOAD[1]:
        raise InvalidArgumentError(f"--time {value}: only -1 to -6 are negative times")
    return value


def _partition_ids(text: str | None) -> set[int] | None:
    if not text:
        return None
    try:
        return {int(p) for p in text.split(",")}
    except ValueError:
        raise InvalidArgumentError(f"--partitions {text!r} is not a comma-separated list of ids") from None
