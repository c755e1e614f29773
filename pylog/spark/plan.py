"""Turning read options into offset ranges, and ranges into Arrow batches. Pure Python
(pyarrow only when reading): the Spark classes in ``source.py`` are thin over this.

The log dir is a local path or an object-store URL (``s3://``, ``s3a://``, ``gs://``,
``abfss://``, ``file://``), read through pylog's remote reader with the query's
``storage_options`` (docs/spark.md, "Object storage")."""

from __future__ import annotations

import contextlib
import dataclasses
import math
import os
import re
from dataclasses import dataclass, field

import numpy as np

from pylog.partition_dir import is_partition_dir
from pylog.remote.layouts import LOG_DIR
from pylog.remote.location import local_path, remote_target
from pylog.remote.store import redact
from pylog.errors import (
    DataLossError, InvalidConfigError, LogDirNotFoundError, OffsetOutOfRangeError, PylogError, UnknownTopicError,
)
from pylog.layout import INTERNAL_TOPICS
from pylog.log import Log
from pylog.manager import LogManager
from pylog.partition_dir import nested_log_dirs, parse_partition_dir, partition_dir_name
from pylog.spark import gaps, group_offsets
from pylog.spark.options import EARLIEST, GROUP, LATEST, ReadOptions

#: Bytes fetched per read call; one Arrow batch per fetch.
FETCH_BYTES = 8 << 20


@dataclass(frozen=True)
class OffsetRange:
    """Offsets [start, end) of one partition: what one Spark task reads."""

    root: str
    topic: str
    partition: int
    start: int
    end: int
    #: fsspec's options for a log dir in object storage (never shown: it may hold credentials)
    storage_options: dict | None = field(default=None, repr=False, compare=False)
    #: the URL of the tiered segments of a local log dir (reads below its local start go there)
    remote_storage: str | None = None
    #: a log dir in object storage: the URL of the partition's objects in its layout, when planned
    partition_url: str | None = None

    @property
    def size(self) -> int:
        return self.end - self.start

    @property
    def directory(self) -> str:
        """The partition's directory in the log dir as given (a path or a URL): what the JVM
        reader lists and reads."""
        return f"{self.root.rstrip('/')}/{partition_dir_name(self.topic, self.partition)}"


def open_log_dir(root: str, storage_options: dict | None = None, remote_storage: str | None = None):
    """The log dir ``root``, read only: a local ``LogManager`` (whose logs read below their
    local start from the tiered segments in ``remote_storage``, when given), or a
    ``RemoteLogDir`` for an object-store URL (one listing of the store when it opens). Raises
    :class:`LogDirNotFoundError` for a missing local dir, :class:`StorageError` (naming the
    URL, never credentials) when the store cannot be listed."""
    if remote_target(root) is not None:
        return LogManager(root, read_only=True, storage_options=storage_options)
    if remote_storage is not None:
        if not os.path.isdir(local_path(root)):
            raise LogDirNotFoundError(f"no log dir at {root}")
        return LogManager(local_path(root), read_only=True, remote_storage=remote_storage,
                          storage_options=storage_options)
    return LogManager.open_existing(local_path(root), read_only=True)


@contextlib.contextmanager
def open_log(r: "OffsetRange"):
    """``with open_log(r) as log``: the partition of range ``r``, read only (cost:
    :meth:`Log.open`: a listing of the partition's objects for a planned range in object
    storage; of the whole store for a stream's range or with ``remote_storage``)."""
    if r.partition_url is not None:
        with Log.open(r.partition_url, read_only=True, storage_options=r.storage_options) as log:
            yield log
    elif r.remote_storage is not None or remote_target(r.root) is not None:  # lists the whole store
        with open_log_dir(r.root, r.storage_options, r.remote_storage) as manager:
            yield manager.log(r.topic, r.partition)
    else:
        with Log.open(local_path(r.directory), read_only=True) as log:
            yield log


def require_log_dir(root: str, storage_options: dict | None = None, *, plain: bool = False) -> None:
    """A read names a log dir, or fails when the DataFrame is created (``load()``, both
    readers): not a missing path, not a partition directory, not a directory that holds log
    dirs but no partition (a replica set's root). An empty directory is a log dir with no
    topic yet. Lists ``root`` and its subdirectories up to the first partition directory;
    a URL is listed once through the store, and fails when it cannot be read or holds no
    partition (a missing bucket or prefix), or (``plain``: the JVM reader, which lists
    ``<topic>-<partition>/`` directories of segment files) holds a tiered layout."""
    if remote_target(root) is not None:
        with open_log_dir(root, storage_options) as log_dir:
            if not log_dir.topics():  # object storage has no empty directories: nothing is there
                raise LogDirNotFoundError(f"no log dir at {redact(root)}: no partition is stored below it (is the "
                                          f"bucket or prefix right?)")
            if plain and log_dir.layout != LOG_DIR:
                raise InvalidConfigError(f"{redact(root)} holds Kafka's tiered layout ({log_dir.layout}), which the "
                                         f"JVM reader does not read: read it with option reader=python")
        return
    root = local_path(root)
    if not os.path.isdir(root):
        raise InvalidConfigError(f"no log dir at {root}")
    if is_partition_dir(root):
        parent, name = os.path.split(os.path.abspath(root))
        try:
            topic, partition = parse_partition_dir(name)
            choose = f" and choose it with .option(\"assign\", '{{\"{topic}\": [{partition}]}}')"
        except PylogError:
            choose = ""
        raise InvalidConfigError(f"{root} is a partition directory, not a log dir: load the log dir holding it "
                                 f"({parent}){choose}")
    if not any(is_partition_dir(os.path.join(root, n)) for n in os.listdir(root)):
        nested = nested_log_dirs(root)
        if nested:
            raise InvalidConfigError(f"{root} holds no partitions but the log dirs {', '.join(nested)} (a replica "
                                     f"set's root): load one of them ({os.path.join(root, nested[0])})")


def topic_partitions(manager, opts: ReadOptions) -> list[tuple[str, int]]:
    """The (topic, partition) pairs the options select, sorted."""
    topics = manager.topics()
    if opts.assign is not None:
        out = []
        for t, parts in opts.assign.items():
            have = set(manager.partitions(t)) if t in topics else set()
            missing = [p for p in parts if p not in have]
            if missing:
                raise UnknownTopicError(f"option assign names partitions {missing} of topic {t!r} that do not exist")
            out += [(t, p) for p in parts]
        return sorted(out)
    if opts.subscribe is not None:
        chosen = [t for t in opts.subscribe if t in topics]
    else:
        rx = None if opts.pattern is None else re.compile(opts.pattern)
        chosen = [t for t in topics if (rx is None or rx.fullmatch(t))
                  and not (opts.exclude_internal_topics and t in INTERNAL_TOPICS)]
    return sorted((t, p) for t in chosen for p in manager.partitions(t))


class OffsetReader:
    """Resolves the offsets of a query, as Spark's ``KafkaOffsetReader``: the one place
    where its options' "earliest", "latest", offsets and timestamps become offsets, for the
    batch (:meth:`ranges_from_unresolved`) and the stream (:meth:`partition_offsets`,
    :meth:`latest`, :meth:`ranges_from_resolved`) readers. Each offset is the partition's
    ListOffsets answer at the query's isolation level (:meth:`Log.list_offset
    <pylog.log.reading.RecordReads.list_offset>`): "latest" is the high watermark, or the last
    stable offset with ``read_committed``. ``manager`` is the log dir opened read only
    (:func:`open_log_dir`; None will do for :meth:`ranges_from_resolved`, which reads
    nothing); cost: O(1) a partition for earliest and latest, a time-index look-up for a
    timestamp."""

    def __init__(self, manager, opts: ReadOptions):
        self.manager, self.opts = manager, opts

    @classmethod
    @contextlib.contextmanager
    def open(cls, opts: ReadOptions):
        """``with OffsetReader.open(opts) as reader``: over the query's log dir, opened for it."""
        with open_log_dir(opts.root, opts.storage_options, opts.remote_storage) as manager:
            yield cls(manager, opts)

    def partition_offsets(self, *, starting: bool) -> dict[tuple[str, int], int]:
        """``{(topic, partition): offset}`` of every partition the query reads, where its
        starting (``starting``) or ending options put it (Spark's ``fetchPartitionOffsets``).
        ``startingOffsets="group"``: the offsets option ``groupId`` committed, checked
        against the log as given offsets are (:func:`_check_data_loss`); a partition the
        group has no offset for starts at latest (Kafka's ``auto.offset.reset`` default)."""
        partitions = topic_partitions(self.manager, self.opts)
        if starting and self.opts.starting == GROUP:
            committed = group_offsets.committed(self.opts.root, self.opts.group_id)
            return {(t, p): self._from_group(self.manager.log(t, p), t, p, committed.get((t, p)))
                    for t, p in partitions}
        return {(t, p): self._resolve(self.manager.log(t, p), t, p, starting=starting) for t, p in partitions}

    def _from_group(self, log, topic: str, partition: int, committed: int | None) -> int:
        if committed is None:
            return log.list_offset("latest", isolation=self.opts.isolation)
        return _check_data_loss(log, topic, partition, committed, self.opts)

    def latest(self) -> dict[tuple[str, int], int]:
        """``{(topic, partition): latest offset}`` of every partition the query reads."""
        return {(t, p): self.manager.log(t, p).list_offset("latest", isolation=self.opts.isolation)
                for t, p in topic_partitions(self.manager, self.opts)}

    def _resolve(self, log, topic: str, partition: int, *, starting: bool) -> int:
        """The offset of ``log`` the starting or ending options name: by timestamp (a global
        one, or the partition's) when given, else earliest, latest or the offset given."""
        opts = self.opts
        value, by_timestamp, timestamp = ((opts.starting, opts.starting_by_timestamp, opts.starting_timestamp)
                                          if starting else (opts.ending, opts.ending_by_timestamp,
                                                            opts.ending_timestamp))
        if timestamp is None and by_timestamp is not None:
            timestamp = by_timestamp.get(topic, {}).get(partition)
            if timestamp is None and topic in by_timestamp:
                raise InvalidConfigError(f"offsets by timestamp for topic {topic} miss partition {partition}")
        if timestamp is not None:
            found = log.list_offset(timestamp, isolation=opts.isolation)
            if found is None and starting and opts.timestamp_strategy == "error":
                raise InvalidConfigError(f"no offset of {topic}-{partition} has a timestamp >= {timestamp}")
            return log.list_offset("latest", isolation=opts.isolation) if found is None else found
        if isinstance(value, dict):
            if topic not in value or partition not in value[topic]:
                name = "startingOffsets" if starting else "endingOffsets"
                raise InvalidConfigError(f"option {name} must list every partition; {topic}-{partition} is "
                                         f"missing (use -2 for earliest, -1 for latest)")
            value = value[topic][partition]
        if value in ("earliest", "latest", EARLIEST, LATEST):  # as ListOffsets names them: -2, -1
            return log.list_offset(value, isolation=opts.isolation)
        return int(value)

    def ranges_from_unresolved(self) -> list[OffsetRange]:
        """A batch query's offset ranges (Spark's ``getOffsetRangesFromUnresolvedOffsets``),
        split per minPartitions / maxRecordsPerPartition. A subscribed topic the log dir
        lacks is an :class:`UnknownTopicError` (a typo would read nothing), as Spark's Kafka
        source fails on a topic the cluster lacks."""
        opts, manager = self.opts, self.manager
        unknown = [t for t in opts.subscribe or () if t not in manager.topics()]
        if unknown:  # a stream waits for a topic to appear; a batch query would read nothing
            raise UnknownTopicError(f"option subscribe names topics {unknown} that {opts.root} does not have")
        ranges = []
        for topic, p in topic_partitions(manager, opts):
            log = manager.log(topic, p)
            start = _check_data_loss(log, topic, p, self._resolve(log, topic, p, starting=True), opts)
            end = self._resolve(log, topic, p, starting=False)
            if start > end:
                raise InvalidConfigError(f"{topic}-{p}: starting offset {start} is after the ending offset {end}")
            if end > start:
                ranges.append(OffsetRange(opts.root, topic, p, start, end, opts.storage_options, opts.remote_storage,
                                          getattr(log, "url", None) if remote_target(opts.root) else None))
        return split_ranges(manager, ranges, opts.min_partitions, opts.max_records_per_partition)

    def ranges_from_resolved(self, start: dict, end: dict) -> list[OffsetRange]:
        """A micro-batch's offset ranges from the stream's offsets ``{"topic": {"partition":
        offset}}`` (Spark's ``getOffsetRangesFromResolvedOffsets``): a partition new since
        ``start`` is read from 0. No I/O."""
        opts = self.opts
        return [OffsetRange(opts.root, t, int(p), start.get(t, {}).get(p, 0), until, opts.storage_options,
                            opts.remote_storage)
                for t, parts in end.items() for p, until in parts.items() if until > start.get(t, {}).get(p, 0)]


def plan_ranges(opts: ReadOptions) -> list[OffsetRange]:
    """Offset ranges for a batch read (:meth:`OffsetReader.ranges_from_unresolved`)."""
    with OffsetReader.open(opts) as reader:
        return reader.ranges_from_unresolved()


def _check_data_loss(log, topic, p, start, opts) -> int:
    """A batch query's start on ``log``: ``start``, or where it goes on when ``start`` is
    outside the log (:func:`gaps.check_lost`: :class:`DataLossError`, or logged)."""
    if start < log.log_start_offset:
        return gaps.check_lost(log, topic, p, start, log.log_start_offset, fail=opts.fail_on_data_loss)
    if start > log.log_end_offset:  # the log lost what it had up to start: truncated or recreated
        reason = gaps.truncation_reason(log.log_end_offset)
        if opts.fail_on_data_loss:
            raise DataLossError(topic, p, start, reason)
        gaps.lost(topic, p, log.log_end_offset, start, reason, fail=False)
        return log.log_end_offset
    return start


def capped_offsets(start: dict, target: dict, max_offsets: int) -> dict:
    """Kafka's ``maxOffsetsPerTrigger`` for both stream readers: a micro-batch's end offsets
    (``{"topic": {"partition": offset}}``) from ``start`` toward ``target`` with at most
    ``max_offsets`` offsets in all, split across partitions in proportion to their backlog,
    at least one each (topic, then partition number, order) while the budget lasts."""
    backlog = {(t, p): off - start.get(t, {}).get(p, 0) for t, parts in target.items() for p, off in parts.items()}
    total = sum(v for v in backlog.values() if v > 0)
    if total <= max_offsets:
        return target
    out = {t: dict(parts) for t, parts in target.items()}
    given = 0
    for (t, p), lag in sorted(backlog.items(), key=lambda item: (item[0][0], int(item[0][1]))):
        if lag <= 0:
            continue
        share = min(max(1, lag * max_offsets // total), lag, max_offsets - given)
        out[t][p] = start.get(t, {}).get(p, 0) + share
        given += share
    return out


def split_ranges(manager, ranges: list[OffsetRange], min_partitions: int | None,
                 max_records: int | None) -> list[OffsetRange]:
    """Kafka source's rule: split so no range exceeds maxRecordsPerPartition, and large
    ranges proportionally so there are about minPartitions; cuts snap to batch starts
    known from the offset index."""
    total = sum(r.size for r in ranges)
    out = []
    for r in ranges:
        parts = 1
        if min_partitions and min_partitions > len(ranges) and total:
            parts = max(parts, math.ceil(r.size / total * min_partitions))
        if max_records:
            parts = max(parts, math.ceil(r.size / max_records))
        if parts <= 1:
            out.append(r)
            continue
        cuts = _batch_starts(manager.log(r.topic, r.partition), r.start, r.end)
        bounds = [r.start]
        for i in range(1, parts):
            target = r.start + r.size * i // parts
            nearest = min(cuts, key=lambda c: abs(c - target)) if cuts and not max_records else target
            snapped = nearest if abs(nearest - target) * 4 <= r.size // parts else target
            if bounds[-1] < snapped < r.end:
                bounds.append(snapped)
        bounds.append(r.end)
        out += [dataclasses.replace(r, start=a, end=b) for a, b in zip(bounds, bounds[1:]) if b > a]
    return out


def _batch_starts(log, start: int, end: int) -> list[int]:
    """Offsets where batches begin, from segment bases and offset-index entries (cheap: one
    request per remote segment's index the first time)."""
    cuts = []
    segments = log.segments
    for i, seg in enumerate(segments):
        following = segments[i + 1].base_offset if i + 1 < len(segments) else None
        if seg.base_offset >= end or (following is not None and following <= start):
            continue
        cuts.append(seg.base_offset)
        cuts += [off + 1 for off in _indexed_offsets(seg)]
    return [c for c in cuts if start < c < end]


def _indexed_offsets(seg) -> list[int]:
    """The absolute offsets a segment's offset index holds: a local segment's index object,
    or a remote segment's (offsets, positions) arrays."""
    index = seg.offset_index
    if callable(index):
        return index()[0].tolist()
    return [off for off, _ in index.entries()]


def prune_ranges(ranges: list[OffsetRange], pruned: dict) -> list[OffsetRange]:
    """Ranges narrowed by pushed bounds: ``topic`` and ``partition`` (sets of allowed values),
    ``offset_min``/``offset_max`` ([min, max)), ``timestamp_min_ms`` (a time-index seek). Both
    readers use this; Spark still evaluates every filter."""
    if "timestamp_min_ms" in pruned:
        ranges = _seek_timestamps(ranges, pruned["timestamp_min_ms"])
    out = []
    for r in ranges:
        if "topic" in pruned and r.topic not in pruned["topic"]:
            continue
        if "partition" in pruned and r.partition not in pruned["partition"]:
            continue
        start = max(r.start, pruned.get("offset_min", r.start))
        end = min(r.end, pruned.get("offset_max", r.end))
        if end > start:
            out.append(dataclasses.replace(r, start=start, end=end))
    return out


def _seek_timestamps(ranges, timestamp_ms: int):
    """Ranges moved past every record older than ``timestamp_ms``. The seek looks for
    ``timestamp_ms - 1`` so that no record at exactly the bound is skipped, whatever the
    time index holds; partitions with no record that late drop out. A bound at or below
    -1 keeps every record (a record without a timestamp, -1, is that late), so it seeks
    nothing."""
    if not ranges or timestamp_ms <= -1:
        return ranges
    firsts = {}
    out = []
    with open_log_dir(ranges[0].root, ranges[0].storage_options, ranges[0].remote_storage) as manager:
        for r in ranges:
            key = (r.topic, r.partition)
            if key not in firsts:
                firsts[key] = manager.log(*key).offset_for_timestamp(max(timestamp_ms - 1, 0))
            first = firsts[key]
            if first is not None and first < r.end:
                out.append(dataclasses.replace(r, start=max(r.start, first)))
    return out


def read_range(r: OffsetRange, *, include_headers: bool = False, isolation: str = "uncommitted",
               fail_on_data_loss: bool = True):
    """Yield Arrow batches of the records in the range (Spark's Kafka schema). Offsets gone
    from the log (retention, truncation) raise :class:`DataLossError` naming the first,
    or with ``fail_on_data_loss=False`` are skipped and logged; the gaps the log holds by
    design (compaction, transaction markers, aborted transactions) are skipped and logged
    at INFO (pylog/spark/gaps.py)."""
    with open_log(r) as log:
        offset = r.start
        while offset < r.end:
            try:
                fetch = log.read_to(offset, r.end, FETCH_BYTES, isolation=isolation)
            except OffsetOutOfRangeError:  # retention or a truncation since the range was planned
                resume = gaps.check_lost(log, r.topic, r.partition, offset, r.end, fail=fail_on_data_loss)
                if resume is None:
                    raise
                offset = resume
                continue
            if fetch.size_bytes == 0:
                break
            cols = fetch.columns(include_headers=include_headers)
            in_range = int(np.searchsorted(cols.offsets, r.end)) if cols.num_rows else 0  # a wrapper read_to gave whole
            if in_range:
                batch = cols.to_arrow(r.topic, r.partition, include_headers=include_headers)
                yield batch if in_range == cols.num_rows else batch.slice(0, in_range)
            nxt = fetch.next_offset
            gaps.log_gaps(r.topic, r.partition, fetch, cols.offsets[:in_range], offset, min(nxt, r.end))
            if nxt <= offset:
                break
            offset = nxt
        if offset < r.end:
            gaps.check_lost(log, r.topic, r.partition, offset, r.end, fail=fail_on_data_loss)
