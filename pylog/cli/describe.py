"""``pylog describe ROOT``: topics, partitions, offsets, segments, bytes and timestamps."""

from __future__ import annotations

import json

from pylog.cli.common import open_manager, table


def add_parser(sub) -> None:
    p = sub.add_parser("describe", help="topics, partitions, offsets, sizes and timestamps of a log dir")
    p.add_argument("root")
    p.add_argument("--json", action="store_true", help="machine-readable output")
    p.set_defaults(run=run)


def describe(root: str) -> list[dict]:
    rows = []
    with open_manager(root, read_only=True) as m:
        for topic in m.topics():
            for p in m.partitions(topic):
                log = m.log(topic, p)
                segs = log.segments
                stamps = [s.max_timestamp for s in segs if s.max_timestamp >= 0]
                oldest = None
                for r in log.records(max_bytes=64 << 10):
                    oldest = r.timestamp
                    break
                rows.append({"topic": topic, "partition": p, "log_start_offset": log.log_start_offset,
                             "log_end_offset": log.log_end_offset, "high_watermark": log.high_watermark,
                             "segments": len(segs), "bytes": log.size_bytes,
                             "oldest_timestamp": oldest, "newest_timestamp": max(stamps) if stamps else None})
    return rows


def run(args) -> int:
    rows = describe(args.root)
    if args.json:
        print(json.dumps(rows, indent=1))
    else:
        print(table(rows, ["topic", "partition", "log_start_offset", "log_end_offset", "high_watermark",
                           "segments", "bytes", "oldest_timestamp", "newest_timestamp"]))
    return 0
