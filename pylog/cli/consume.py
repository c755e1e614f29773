"""``pylog consume ROOT --topic T``: print records, from the beginning, an offset or a
timestamp; ``--follow`` keeps tailing.

Following, every record is printed once, in offset order, across rolls, retention,
compaction and truncation by the writing process. A position the writer removed meanwhile
(retention passed it, or truncation cut below it) is reported on stderr and reading
goes on from the log start, or the log end, as Kafka's consumers reset.
"""

from __future__ import annotations

import base64
import json
import sys
import time

from pylog.cli.common import open_topic_log
from pylog.errors import OffsetOutOfRangeError


def add_parser(sub) -> None:
    p = sub.add_parser("consume", help="print records of a partition")
    p.add_argument("root")
    p.add_argument("--topic", required=True)
    p.add_argument("--partition", type=int, default=0)
    start = p.add_mutually_exclusive_group()
    start.add_argument("--from-beginning", action="store_true")
    start.add_argument("--offset", type=int)
    start.add_argument("--timestamp", type=int, help="start at the first record at or after this time (ms)")
    p.add_argument("--max-records", type=int)
    p.add_argument("--format", choices=["text", "json"], default="text")
    p.add_argument("--isolation", choices=["uncommitted", "committed"], default="uncommitted")
    p.add_argument("--follow", action="store_true", help="wait for new records")
    p.set_defaults(run=run)


def _text(b):
    return "null" if b is None else b.decode("utf-8", "replace")


def _b64(b):
    return None if b is None else base64.b64encode(b).decode()


def run(args) -> int:
    manager, log = open_topic_log(args.root, args.topic, args.partition, read_only=True)
    with manager:
        if args.offset is not None:
            offset = args.offset
        elif args.timestamp is not None:
            offset = log.offset_for_timestamp(args.timestamp)
            if offset is None:
                offset = log.log_end_offset
        elif args.from_beginning:
            offset = log.log_start_offset
        else:
            offset = log.log_end_offset if args.follow else log.log_start_offset
        isolation = "committed" if args.isolation == "committed" else "uncommitted"
        printed = 0
        while args.max_records is None or printed < args.max_records:
            try:
                fetch = log.read(offset, 1 << 20, isolation=isolation)
            except OffsetOutOfRangeError:
                if not args.follow:
                    raise
                offset = _reset(log, offset)
                continue
            records = fetch.records()
            for r in records:
                if args.max_records is not None and printed >= args.max_records:
                    break
                if args.format == "json":
                    print(json.dumps({"offset": r.offset, "timestamp": r.timestamp, "key": _b64(r.key),
                                      "value": _b64(r.value), "headers": [[k, _b64(v)] for k, v in r.headers]}))
                else:
                    print(_text(r.value) if r.key is None else f"{_text(r.key)}\t{_text(r.value)}")
                printed += 1
            if fetch.size_bytes:
                offset = fetch.next_offset
                continue
            if not args.follow:
                break
            sys.stdout.flush()
            time.sleep(0.2)
    return 0


def _reset(log, offset: int) -> int:
    """Where to go on from an offset the writer removed: the log start, or the log end."""
    to = log.log_start_offset if offset < log.log_start_offset else log.log_end_offset
    print(f"offset {offset} is no longer in the log; going on from {to}", file=sys.stderr)
    return to
