"""What the subcommands share: opening a root or partition directory, and table output."""

from __future__ import annotations

import os

from pylog.errors import LogDirNotFoundError, UnknownTopicError
from pylog.layout import LOG_SUFFIX
from pylog.manager import LogManager


def is_partition_dir(path: str) -> bool:
    return os.path.isdir(path) and any(n.endswith(LOG_SUFFIX) for n in os.listdir(path))


def open_manager(root: str, *, read_only: bool) -> LogManager:
    """A ``LogManager`` on the existing log dir ``root`` (the CLI's and Spark's one way in).
    Raises :class:`LogDirNotFoundError` when there is none: not even a writer creates it."""
    if not os.path.isdir(root):
        raise LogDirNotFoundError(f"no log dir at {root}")
    return LogManager(root, read_only=read_only)


def open_topic_log(root: str, topic: str, partition: int, *, read_only: bool, create: bool = False):
    manager = open_manager(root, read_only=read_only) if os.path.isdir(root) or read_only else None
    if manager is None:
        manager = LogManager(root)
    if create and topic not in manager.topics():
        manager.create_topic(topic, partition + 1)
    if topic not in manager.topics():
        manager.close()
        raise UnknownTopicError(f"unknown topic {topic!r} in {root}")
    return manager, manager.log(topic, partition)


def table(rows: list[dict], columns: list[str]) -> str:
    """A plain aligned text table."""
    widths = {c: max([len(c)] + [len(str(r.get(c, ""))) for r in rows]) for c in columns}
    lines = ["  ".join(c.ljust(widths[c]) for c in columns)]
    lines += ["  ".join(str(r.get(c, "")).ljust(widths[c]) for c in columns) for r in rows]
    return "\n".join(line.rstrip() for line in lines)
