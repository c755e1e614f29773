"""``pylog get-offsets ROOT``: Kafka's ``kafka-get-offsets.sh`` on a log dir: for each
partition, the offset ``--time`` names, printed ``topic:partition:offset`` in Kafka's order
(sorted by ``topic-partition`` as text).

``--time`` is ``-1``/``latest`` (the log end offset, the default), ``-2``/``earliest`` (the log
start offset), ``-3``/``max-timestamp`` (the record with the largest timestamp), or a time in
ms since the epoch: the first offset whose timestamp is at or after it (Kafka's ListOffsets).
A partition with no such offset is left out, as Kafka leaves it out.
"""

from __future__ import annotations


from pylog.cli.common import add_exclude_internal_argument, open_manager, wanted_topics
from pylog.errors import InvalidArgumentError, UnknownTopicError

TIMES = {"latest": -1, "earliest": -2, "max-timestamp": -3}


def add_parser(sub) -> None:
    p = sub.add_parser("get-offsets", help="print topic:partition:offset for a time, as kafka-get-offsets.sh does")
    p.add_argument("root", help="the log dir holding <topic>-<partition> directories")
    p.add_argument("--topic", help="the topic, a regular expression (whole name); default: every topic")
    p.add_argument("--partitions", metavar="P,P,...", help="comma-separated partition ids; default: every partition")
    p.add_argument("--time", default="latest",
                   help="-1 or latest (default), -2 or earliest, -3 or max-timestamp, or a time in ms: the first "
                        "offset at or after it")
    add_exclude_internal_argument(p)
    p.set_defaults(run=run)


def run(args) -> int:
    timestamp = parse_time(args.time)
    wanted = _partition_ids(args.partitions)
    with open_manager(args.root, read_only=True) as manager:
        topics = wanted_topics(manager.topics(), args.topic, exclude_internal=args.exclude_internal_topics)
        found = [(t, p) for t in topics for p in manager.partitions(t) if wanted is None or p in wanted]
        if not found:
            raise UnknownTopicError(f"no topic-partition in {args.root} matches the given filters")
        for topic, partition in sorted(found, key=lambda tp: f"{tp[0]}-{tp[1]}"):
            offset = manager.log(topic, partition).offset_for_timestamp(timestamp)
            if offset is not None:
                print(f"{topic}:{partition}:{offset}")
    return 0


def parse_time(text: str) -> int:
    """``--time`` as Kafka's ListOffsets timestamp (-1, -2, -3 or ms)."""
    if text in TIMES:
        return TIMES[text]
    try:
        value = int(text)
    except ValueError:
        raise InvalidArgumentError(f"--time {text!r}: use -1 or latest, -2 or earliest, -3 or max-timestamp, "
                                   "or a time in ms") from None
    if value < -3:
        raise InvalidArgumentError(f"--time {value}: only -1, -2 and -3 are negative times")
    return value


def _partition_ids(text: str | None) -> set[int] | None:
    if not text:
        return None
    try:
        return {int(p) for p in text.split(",")}
    except ValueError:
        raise InvalidArgumentError(f"--partitions {text!r} is not a comma-separated list of ids") from None
