"""``pylog retention ROOT`` and ``pylog compact ROOT``: run a cleanup policy once over every
log of a log dir and report what was removed."""

from __future__ import annotations

from pylog.cli.common import open_manager


def add_retention_parser(sub) -> None:
    p = sub.add_parser("retention", help="apply the delete policy once to every log")
    p.add_argument("root", help="the log dir holding <topic>-<partition> directories")
    p.set_defaults(run=run_retention)


def add_compact_parser(sub) -> None:
    p = sub.add_parser("compact", help="compact every log whose policy includes compact")
    p.add_argument("root", help="the log dir holding <topic>-<partition> directories")
    p.add_argument("--force", action="store_true", help="ignore min_cleanable_dirty_ratio")
    p.set_defaults(run=run_compact)


def add_parser(sub) -> None:
    add_retention_parser(sub)
    add_compact_parser(sub)


def run_retention(args) -> int:
    with open_manager(args.root, read_only=False) as m:
        for log in m.logs():
            removed = log.enforce_retention()
            listed = f" {removed}" if removed else ""
            print(f"{log.topic}-{log.partition}: removed {len(removed)} segment(s){listed}; "
                  f"log start offset {log.log_start_offset}")
    return 0


def run_compact(args) -> int:
    with open_manager(args.root, read_only=False) as m:
        for log in m.logs():
            if not log.config.compact:
                print(f"{log.topic}-{log.partition}: cleanup_policy is {log.config.cleanup_policy}; skipped")
                continue
            r = log.compact(force=args.force)
            print(f"{log.topic}-{log.partition}: {r.records_removed} record(s) removed, "
                  f"{r.bytes_read} bytes read, {r.bytes_written} written, {len(r.cleaned_segments)} segment(s) cleaned")
    return 0
