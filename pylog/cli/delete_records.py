"""``pylog delete-records ROOT --offset-json-file F``: Kafka's ``kafka-delete-records.sh`` on
a log dir: moves each listed partition's log start offset up to the given offset
(``Log.delete_records``), deleting the segments wholly below it.

The file is Kafka's::

    {"partitions": [{"topic": "orders", "partition": 0, "offset": 42}], "version": 1}

An offset of -1 means the high watermark (everything). The whole file is checked first (its
shape, duplicates, that every partition exists and no offset passes its high watermark), so
bad input changes nothing. Output, as Kafka's::

    Executing records delete operation
    Records delete operation completed:
    partition: orders-0	low_watermark: 42

A partition that a live producer or consumer writes is taken from it through the clients'
hand-off (``--timeout-ms``) and given back after (pylog/cli/common.py ``taken_log``).
"""

from __future__ import annotations

import json
from contextlib import ExitStack

from pylog.cli.common import add_timeout_argument, taken_log, writer_pool
from pylog.errors import InputFormatError, OffsetOutOfRangeError, UnknownTopicError
from pylog.manager import LogManager


def add_parser(sub) -> None:
    p = sub.add_parser("delete-records")
    p.add_argument("root", help="the log dir holding <topic>-<partition> directories")
    p.add_argument("--offset-json-file", required=True, metavar="FILE",
                   help='Kafka\'s JSON: {"partitions": [{"topic": "t", "partition": 0, "offset": 5}], "version": 1}')
    add_timeout_argument(p)
    p.set_defaults(run=run)


def run(args) -> int:
    targets = parse_offset_json(args.offset_json_file)
    with LogManager.open_existing(args.root, read_only=True) as manager:  # checked read-only: bad input touches nothing
        for (topic, partition), offset in targets.items():
            if topic not in manager.topics() or partition not in manager.partitions(topic):
                raise UnknownTopicError(f"no partition {topic}-{partition} in {args.root}")
            high_watermark = manager.log(topic, partition).high_watermark  # only grows: still true when taken
            if offset > high_watermark:
                raise OffsetOutOfRangeError(f"{topic}-{partition}: offset {offset} is past the high watermark "
                                            f"{high_watermark}")
    with writer_pool(args.root) as pool, ExitStack() as taken:
        logs = {tp: taken.enter_context(taken_log(pool, *tp, args.timeout_ms)) for tp in targets}
        print("Executing records delete operation")
        lines = []
        for (topic, partition), offset in targets.items():
            log = logs[topic, partition]
            low = log.delete_records(log.high_watermark if offset == -1 else offset)
            lines.append(f"partition: {topic}-{partition}\tlow_watermark: {low}")
        print("Records delete operation completed:")
        print("\n".join(lines))
    return 0


def parse_offset_json(path: str) -> dict[tuple[str, int], int]:
    """``{(topic, partition): offset}`` from Kafka's offset JSON file, in file order.
    Raises :class:`InputFormatError` naming the file and what is wrong."""
    try:
        with open(path, encoding="utf-8") as f:
            data = json.load(f)
    except OSError as e:
        raise InputFormatError(f"cannot read {path}: {e.strerror}") from None
    except ValueError as e:
        raise InputFormatError(f"{path} is not valid JSON: {e}") from None
    if not isinstance(data, dict) or not isinstance(data.get("partitions"), list):
        raise InputFormatError(f'{path}: expected {{"partitions": [...], "version": 1}}')
    if data.get("version", 1) != 1:
        raise InputFormatError(f"{path}: version {data['version']!r} is not supported (only 1)")
    out: dict[tuple[str, int], int] = {}
    for i, entry in enumerate(data["partitions"]):
        topic, partition, offset = (entry.get(k) if isinstance(entry, dict) else None
                                    for k in ("topic", "partition", "offset"))
        if not isinstance(topic, str) or not _is_int(partition) or not _is_int(offset) or offset < -1:
            raise InputFormatError(f"{path}: partitions[{i}] needs a topic (string), a partition and an offset "
                                   f"(integers, offset -1 or more), got {json.dumps(entry)}")
        if (topic, partition) in out:
            raise InputFormatError(f"{path}: offset json file contains duplicate topic partitions: "
                                   f"{topic}-{partition}")
        out[topic, partition] = offset
    return out


def _is_int(value) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)
