"""``pylog retention ROOT`` and ``pylog compact ROOT``: run a cleanup policy once over every
log of a log dir and report what was removed. A log that a live producer or consumer
writes is taken from it through the clients' hand-off (``--timeout-ms``) and given back
after (pylog/cli/common.py ``taken_log``)."""

from __future__ import annotations

from pylog.cli.common import add_timeout_argument, taken_log, writer_pool
from pylog.manager import LogManager


def add_retention_parser(sub) -> None:
    p = sub.add_parser("retention")
    p.add_argument("root", help="the log dir holding <topic>-<partition> directories")
    add_timeout_argument(p)
    p.set_defaults(run=run_retention)


def add_compact_parser(sub) -> None:
    p = sub.add_parser("compact")
    p.add_argument("root", help="the log dir holding <topic>-<partition> directories")
    p.add_argument("--force", action="store_true", help="ignore min_cleanable_dirty_ratio")
    add_timeout_argument(p)
    p.set_defaults(run=run_compact)


def add_parser(sub) -> None:
    add_retention_parser(sub)
    add_compact_parser(sub)


def _partitions(root: str) -> list[tuple[str, int, object]]:
    """Every partition of ``root`` with its topic's config, sorted."""
    with LogManager.open_existing(root, read_only=True) as m:
        return [(t, p, m.topic_config(t)) for t in m.topics() for p in m.partitions(t)]


def run_retention(args) -> int:
    with writer_pool(args.root) as pool:
        for topic, partition, _ in _partitions(args.root):
            with taken_log(pool, topic, partition, args.timeout_ms) as log:
                removed = log.enforce_retention()
                listed = f" {removed}" if removed else ""
                print(f"{topic}-{partition}: removed {len(removed)} segment(s){listed}; "
                      f"log start offset {log.log_start_offset}")
    return 0


def run_compact(args) -> int:
    with writer_pool(args.root) as pool:
        for topic, partition, config in _partitions(args.root):
            if not config.compact:
                print(f"{topic}-{partition}: cleanup_policy is {config.cleanup_policy}; skipped")
                continue
            with taken_log(pool, topic, partition, args.timeout_ms) as log:
                r = log.compact(force=args.force)
            print(f"{topic}-{partition}: {r.records_removed} record(s) removed, {r.bytes_read} bytes read, "
                  f"{r.bytes_written} written, {len(r.cleaned_segments)} segment(s) cleaned")
    return 0
