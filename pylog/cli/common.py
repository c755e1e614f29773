"""What the subcommands share: opening a root or partition directory, and table output."""

from __future__ import annotations

import os
import re

from pylog.errors import InputFormatError, LogDirNotFoundError, UnknownTopicError
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


def parse_properties(items: list[str] | None, known: dict[str, str]) -> dict[str, str]:
    """``--property name=value`` arguments as a dict, each name one of ``known`` (name ->
    what it does); defaults are the caller's. Raises :class:`InputFormatError`."""
    out = {}
    for item in items or []:
        name, sep, value = item.partition("=")
        if not sep:
            raise InputFormatError(f"--property {item!r} is not name=value")
        if name not in known:
            raise InputFormatError(f"unknown --property {name!r}; known: {', '.join(sorted(known))}")
        out[name] = value
    return out


def flag(props: dict[str, str], name: str, default: bool = False) -> bool:
    """A boolean property as Kafka's tools read it: true when it says "true" (any case)."""
    return props[name].strip().lower() == "true" if name in props else default


def properties_help(known: dict[str, str]) -> str:
    """The help text of a ``--property`` option: every property and what it does."""
    return "NAME=VALUE ...; " + "; ".join(f"{k}: {v}" for k, v in known.items())


def unescape(text: str) -> bytes:
    """A separator as typed on a shell line, as UTF-8: ``\\t``, ``\\n``, ``\\r`` and ``\\\\``
    are the characters they name (``key.separator=\\t`` needs no ``$'\\t'``)."""
    return re.sub(r"\\[tnr\\]", lambda m: _ESCAPES[m[0]], text).encode("utf-8")


_ESCAPES = {"\\t": "\t", "\\n": "\n", "\\r": "\r", "\\\\": "\\"}


def internal_topic(name: str) -> bool:
    """Kafka's internal topics: ``__consumer_offsets`` and ``__transaction_state``."""
    return name in ("__consumer_offsets", "__transaction_state")
