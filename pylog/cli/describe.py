"""``pylog describe PATH``: what ``kafka-topics.sh --describe`` and ``kafka-log-dirs.sh``
tell about a broker, read from the files: per partition the log start and end offsets,
high watermark, last stable offset, segments, size and oldest/newest timestamps, and per
topic its config overrides. PATH is a broker log dir (every partition in it) or one
partition directory. Read-only: nothing on disk changes."""

from __future__ import annotations

import json
import os
import sys
from datetime import datetime, timezone
from itertools import groupby

from pylog.cli.common import add_exclude_internal_argument, add_storage_arguments, no_partitions, \
    one_line_warnings, storage_options, table, wanted_topics
from pylog.config import LogConfig
from pylog.errors import CorruptRecordError, InvalidTopicError, LogDirNotFoundError, UnknownTopicError
from pylog.manager import LogManager
from pylog.partition_dir import is_partition_dir, parse_partition_dir
from pylog.remote.store import is_url

COLUMNS = ["topic", "partition", "log_start_offset", "log_end_offset", "high_watermark", "last_stable_offset",
           "segments", "bytes", "oldest_timestamp", "newest_timestamp"]
#: the table's header for each column
HEADERS = {"log_start_offset": "start", "log_end_offset": "end", "high_watermark": "hw",
           "last_stable_offset": "lso", "oldest_timestamp": "oldest", "newest_timestamp": "newest"}


def add_parser(sub) -> None:
    p = sub.add_parser("describe")
    p.add_argument("path", metavar="ROOT|PARTITION",
                   help="a broker log dir (every partition in it) or one <topic>-<partition> directory; or the "
                        "URL of one in object storage (s3://, s3a://, gs://, az://, abfss://, file://)")
    p.add_argument("--json", action="store_true",
                   help="one JSON list, an object per partition (offsets, bytes, epoch-ms timestamps, topic_config)")
    p.add_argument("--raw", action="store_true",
                   help="plain numbers: bytes instead of KiB/MiB, epoch milliseconds instead of UTC times")
    p.add_argument("--topic", help="only the topics this regular expression matches (whole name)")
    add_exclude_internal_argument(p)
    add_storage_arguments(p)
    p.set_defaults(run=run)


def describe(path: str, topic: str | None = None, *, exclude_internal: bool = False,
             storage_options: dict | None = None, remote_log_metadata: str | None = None) -> list[dict]:
    """One row per partition of the log dir ``path``, or the one row of the partition
    directory ``path``; only the topics ``topic`` (a regular expression) matches, and
    without Kafka's internal topics when ``exclude_internal``. Raises
    :class:`LogDirNotFoundError` for a missing path, :class:`UnknownTopicError` when
    those leave no topic, and :class:`InvalidArgumentError` for a directory holding no
    partition. Reads each partition's first batch and its segments' metadata.

    ``path`` may be a URL (``LogManager.open_existing``) of a log dir or of one partition directory
    in object storage: a log dir copied to a bucket, or a tiered layout's prefix."""
    m, wanted = _opened(path, storage_options, remote_log_metadata)
    with m:
        topics = wanted_topics(m.topics(), topic, exclude_internal=exclude_internal)
        all_there = len(topics) == len(m.topics())
        rows = [_row(m, t, p) for t in topics for p in m.partitions(t) if wanted is None or (t, p) in wanted]
    if not rows and not all_there:
        raise UnknownTopicError(f"no topic of {path} matches --topic {topic!r}" if topic is not None
                                else f"{path} holds only Kafka's internal topics")
    if not rows:
        raise no_partitions(path, "describe")
    return rows


def _opened(path: str, storage_options, remote_log_metadata):
    """The manager to read for ``path`` and the one partition wanted in it (None: every one).
    A local partition directory is read through its log dir. A URL whose last name is
    ``<topic>-<partition>`` is tried as a partition directory first, through its parent
    (whose listing costs as much as describing it whole, and gives the topic's config);
    when the parent holds no such partition, the URL is a log dir."""
    options = {"storage_options": storage_options, "remote_log_metadata": remote_log_metadata}
    if not is_url(path):
        if not os.path.isdir(path):
            raise LogDirNotFoundError(f"no such directory {path}")
        if is_partition_dir(path):
            root, name = os.path.split(os.path.abspath(path))
            return LogManager.open_existing(root, read_only=True), {parse_partition_dir(name)}
        return LogManager.open_existing(path, read_only=True), None
    parent, _, name = path.rstrip("/").rpartition("/")
    try:
        wanted = parse_partition_dir(name)
        manager = LogManager.open_existing(parent, read_only=True, **options)
    except (InvalidTopicError, LogDirNotFoundError):
        return LogManager.open_existing(path, read_only=True, **options), None
    if wanted[0] in manager.topics() and wanted[1] in manager.partitions(wanted[0]):
        return manager, {wanted}
    manager.close()
    return LogManager.open_existing(path, read_only=True, **options), None


def _row(manager, topic: str, partition: int) -> dict:
    """The partition's row. A corrupt batch where the oldest timestamp or the last stable
    offset is read leaves that column empty (None) and is told on stderr: ``pylog verify``
    finds every one. ``invalid_tail``: the bytes after the last valid batch that the
    read-only open stopped before (each path, position, bytes, reason; logged on stderr
    too), which ``pylog verify --repair`` truncates."""
    log = manager.log(topic, partition)
    stamps = [t for t in (s.max_timestamp for s in log.segments) if t >= 0]
    first = _unless_corrupt(log, lambda: log.read(log.log_start_offset, 1).records())  # the first batch only
    return {"topic": topic, "partition": partition, "log_start_offset": log.log_start_offset,
            "log_end_offset": log.log_end_offset, "high_watermark": log.high_watermark,
            "last_stable_offset": _unless_corrupt(log, lambda: log.last_stable_offset),
            "segments": len(log.segments), "bytes": log.size_bytes,
            "oldest_timestamp": first[0].timestamp if first else None,
            "newest_timestamp": max(stamps) if stamps else None, "topic_config": _config_overrides(manager, topic),
            "invalid_tail": _invalid_tail(log)}


def _invalid_tail(log) -> list[dict]:
    """The load report's truncations; none for a log in object storage, which is read, never
    loaded (``pylog verify URL`` reports bytes after its last valid batch)."""
    report = getattr(log, "load_report", None)
    return [] if report is None else [t._asdict() for t in report.truncations]


def _unless_corrupt(log, answer):
    """``answer()``, or None (said on stderr) when it meets a corrupt batch."""
    try:
        return answer()
    except CorruptRecordError as e:
        print(f"pylog describe: {log.topic}-{log.partition}: {e} (pylog verify checks the whole log)",
              file=sys.stderr)
        return None


def _config_overrides(manager, topic: str) -> dict[str, str]:
    """The topic's settings that differ from Kafka's defaults, by Kafka name (what
    ``kafka-topics.sh --describe`` lists as Configs)."""
    defaults = LogConfig().to_kafka()
    return {k: v for k, v in manager.topic_config(topic).to_kafka().items() if defaults.get(k) != v}


def human_bytes(n: int) -> str:
    """``1536`` -> ``"1.5 KiB"``."""
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if n < 1024 or unit == "TiB":
            return f"{n} B" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    raise AssertionError("unreachable")


def human_time(ms: int | None) -> str:
    """Epoch milliseconds as a UTC time, ``2023-11-14T22:13:20.000Z``; ``-`` for none
    (also Kafka's -1 of a message without a timestamp)."""
    if ms is None or ms < 0:
        return "-"
    return datetime.fromtimestamp(ms / 1000, timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"


def _human(row: dict) -> dict:
    return {**row, "bytes": human_bytes(row["bytes"]), "oldest_timestamp": human_time(row["oldest_timestamp"]),
            "newest_timestamp": human_time(row["newest_timestamp"])}


def report_lines(rows: list[dict], *, raw: bool) -> list[str]:
    """Per topic a ``Topic: ... Configs: ...`` line, then its partitions as a table, where
    consecutive partitions that read the same in every column share one row (``4-44``:
    the 50 mostly empty partitions of ``__consumer_offsets`` take a few lines)."""
    lines = []
    headers = [HEADERS.get(c, c) for c in COLUMNS if c != "topic"]
    for topic in dict.fromkeys(r["topic"] for r in rows):
        mine = [r if raw else _human(r) for r in rows if r["topic"] == topic]
        configs = ",".join(f"{k}={v}" for k, v in sorted(mine[0]["topic_config"].items()))
        lines.append(f"Topic: {topic}\tPartitionCount: {len(mine)}\tConfigs: {configs}")
        shown = _runs([{HEADERS.get(c, c): r[c] for c in COLUMNS if c != "topic"} for r in mine])
        lines += ["  " + line for line in table(shown, headers).splitlines()]
    return lines


def _runs(rows: list[dict]) -> list[dict]:
    """Rows of consecutive partitions equal in every other column, merged into one whose
    partition is the range ``first-last``."""
    def same_run(item):  # consecutive partitions keep partition - position constant
        position, row = item
        return row["partition"] - position, [(k, v) for k, v in row.items() if k != "partition"]
    out = []
    for _, run in groupby(enumerate(rows), key=same_run):
        run = [row for _, row in run]
        first, last = run[0]["partition"], run[-1]["partition"]
        out.append({**run[0], "partition": str(first) if first == last else f"{first}-{last}"})
    return out


def run(args) -> int:
    one_line_warnings(args.command)
    rows = describe(args.path, args.topic, exclude_internal=args.exclude_internal_topics,
                    storage_options=storage_options(args), remote_log_metadata=args.remote_log_metadata)
    print(json.dumps(rows, indent=1) if args.json else "\n".join(report_lines(rows, raw=args.raw)))
    return 0
