"""``pylog get-offsets ROOT``: Kafka's ``kafka-get-offsets.sh`` on a log dir: for each
partition, the offset ``--time`` names, printed ``topic:partition:offset`` in Kafka's order
(sorted by ``topic-partition`` as text).

``--time`` is ``-1``/``latest`` (the high watermark, the default: the log end of a log without
replicas), ``-2``/``earliest`` (the log start offset), ``-3``/``max-timestamp`` (the first
record with the largest timestamp, looked up in the segments only, as Kafka does: it may lie
below a log start that ``delete-records`` moved),
``-4``/``earliest-local`` (the log start: every segment is local), ``-5``/``latest-tiered`` and
``-6``/``earliest-pending-upload`` (none: nothing is tiered, so Kafka names no offset), or a
time in ms since the epoch: the first offset whose timestamp is at or after it (Kafka's
ListOffsets). A partition with no such offset is left out, as Kafka leaves it out.

Partitions: ``--topic REGEX`` and ``--partitions 0,1``, or Kafka's ``--topic-partitions``
patterns (``orders:0-3,audit,:5-``). A broker's log dir also holds KRaft's metadata log
(``__cluster_metadata-0``), which is no topic: left out, as Kafka's tool never lists it.
"""

from __future__ import annotations
import re

from pylog.cli.common import add_exclude_internal_argument, add_storage_arguments, open_url_manager, topic_pattern, \
    wanted_topics
from pylog.errors import InvalidArgumentError, UnknownTopicError
from pylog.log.offsets import latest_offset

TIMES = {"latest": -1, "earliest": -2, "max-timestamp": -3, "earliest-local": -4, "latest-tiered": -5,
         "earliest-pending-upload": -6}
#: Kafka's times for tiered storage, on a log dir where every segment is local: earliest-local
#: is the log start; the tiered ones name no offset (None)
LOCAL_TIMES = {-4: -2, -5: None, -6: None}
#: one ``--topic-partitions`` pattern: an optional topic regex, then ``:N``, ``:N-M`` (M
#: exclusive), ``:N-`` or ``:-M``
_PATTERN = re.compile(r"([^:,]*)(?::(?:(\d+)|(\d*)-(\d*)))?")
#: KRaft's metadata log in a broker's log dir: a partition dir, but no topic
KRAFT_METADATA_TOPIC = "__cluster_metadata"


def add_parser(sub) -> None:
    p = sub.add_parser("get-offsets", help="print topic:partition:offset for a time, as kafka-get-offsets.sh does")
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
                        "log start), -5 or latest-tiered and -6 or earliest-pending-upload (no offset: nothing is "
                        "tiered), or a time in ms: the first offset at or after it")
    add_exclude_internal_argument(p)
    add_storage_arguments(p)
    p.set_defaults(run=run)


def run(args) -> int:
    asked = parse_time(args.time)
    timestamp = LOCAL_TIMES.get(asked, asked)
    wanted = _partition_filter(args)
    with open_url_manager(args, args.root) as manager:
        topics = [t for t in wanted_topics(manager.topics(), None, exclude_internal=args.exclude_internal_topics)
                  if t != KRAFT_METADATA_TOPIC]
        found = [(t, p) for t in topics for p in manager.partitions(t) if wanted(t, p)]
        if not found:
            raise UnknownTopicError(f"no topic-partition in {args.root} matches the given filters")
        for topic, partition in sorted(found, key=lambda tp: f"{tp[0]}-{tp[1]}"):
            offset = _offset(manager.log(topic, partition), timestamp)
            if offset is not None:
                print(f"{topic}:{partition}:{offset}")
    return 0


def _offset(log, timestamp: int | None) -> int | None:
    """Kafka's ListOffsets answer, read_uncommitted as Kafka's tool asks: latest is the high
    watermark (:func:`latest_offset`)."""
    if timestamp is None:
        return None
    return latest_offset(log) if timestamp == TIMES["latest"] else log.offset_for_timestamp(timestamp)


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


def parse_time(text: str) -> int:
    """``--time`` as Kafka's ListOffsets timestamp (-1, -2, -3 or ms)."""
    if text in TIMES:
        return TIMES[text]
    try:
        value = int(text)
    except ValueError:
        raise InvalidArgumentError(f"--time {text!r}: use -1 or latest, -2 or earliest, -3 or max-timestamp, "
                                   "or a time in ms") from None
    if value < -6:
        raise InvalidArgumentError(f"--time {value}: only -1 to -6 are negative times")
    return value


def _partition_ids(text: str | None) -> set[int] | None:
    if not text:
        return None
    try:
        return {int(p) for p in text.split(",")}
    except ValueError:
        raise InvalidArgumentError(f"--partitions {text!r} is not a comma-separated list of ids") from None
