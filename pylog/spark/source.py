"""The PySpark data source ``pylog``: ``spark.read``, ``df.write`` and ``spark.readStream``
over a pylog (or Kafka) log dir, local or in object storage (reads only), with the schema
and options of Spark's Kafka source.

Importing this module needs pyspark; ``import pylog`` never does. Planning and reading
live in ``plan.py``; these classes only adapt them to Spark's API. Everything kept on
``self`` is picklable (Spark ships readers and partitions to other processes).
"""

from __future__ import annotations


import datetime
import math
import os
import shutil
import sys
import time
import uuid
import warnings
from dataclasses import dataclass

from pyspark import TaskContext
from pyspark.sql.datasource import (
    DataSource, DataSourceArrowWriter, DataSourceReader, DataSourceStreamArrowWriter, DataSourceStreamReader,
    InputPartition,
    WriterCommitMessage,
)
from pyspark.sql.types import (
    ArrayType, BinaryType, IntegerType, LongType, StringType, StructField, StructType, TimestampType,
)

from pylog.errors import InvalidConfigError
from pylog.remote.location import remote_target
from pylog.remote.store import redact
from pylog.spark import group_offsets, plan
from pylog.spark.options import parse_read_options
from pylog.spark.stream_write import write_task
from pylog.spark.write import commit_staged, stage_rows

try:  # 4.2+: admission control and Trigger.AvailableNow
    from pyspark.sql.streaming.datasource import (
        ReadAllAvailable, ReadMaxRows, ReadMinRows, SupportsTriggerAvailableNow,
    )
except ImportError:  # pragma: no cover - older PySpark
    ReadAllAvailable = ReadMaxRows = ReadMinRows = None
    SupportsTriggerAvailableNow = object

KAFKA_SCHEMA = StructType([
    StructField("key", BinaryType()), StructField("value", BinaryType()), StructField("topic", StringType()),
    StructField("partition", IntegerType()), StructField("offset", LongType()),
    StructField("timestamp", TimestampType()), StructField("timestampType", IntegerType()),
])
HEADERS_FIELD = StructField("headers", ArrayType(StructType([StructField("key", StringType()),
                                                             StructField("value", BinaryType())])))
STAGING_DIR = ".pylog-staging"
FASTER_READER = ("format('pylog') reads with its Python source, as pylog's jar is not on this session's classpath: "
                 "the JVM reader is 3-12x faster for batch reads. Create the session with pylog.spark.session(), or "
                 "add .config('spark.jars', pylog.spark.jar_path()) to its builder (docs/spark.md). "
                 "option('reader', 'python') keeps the Python source without this warning")


class SlowReaderWarning(UserWarning):
    """Said once per process by a batch read that the Python source serves although the
    JVM reader could (its jar is not on the session's classpath)."""


class RangePartition(InputPartition):
    """One Spark task: an offset range of one partition, and how to read it."""

    def __init__(self, r: plan.OffsetRange, include_headers: bool, isolation: str, fail_on_data_loss: bool):
        super().__init__((r.topic, r.partition, r.start, r.end))
        self.range = r
        self.include_headers = include_headers
        self.isolation = isolation
        self.fail_on_data_loss = fail_on_data_loss


def _read(partition: RangePartition):
    yield from plan.read_range(partition.range, include_headers=partition.include_headers,
                               isolation=partition.isolation, fail_on_data_loss=partition.fail_on_data_loss)


class PylogDataSource(DataSource):
    """``format("pylog")``: Kafka partition logs on disk, read like Spark's Kafka source."""

    @classmethod
    def name(cls) -> str:
        return "pylog"

    def schema(self):
        opts = parse_read_options(self.options) if "path" in self.options else None
        if opts is not None:
            plan.require_log_dir(opts.root, opts.storage_options)
        if opts is not None and opts.include_headers:
            return StructType(KAFKA_SCHEMA.fields + [HEADERS_FIELD])
        return KAFKA_SCHEMA

    def reader(self, schema):
        opts = parse_read_options(self.options)
        if opts.reader == "jvm":
            raise InvalidConfigError("option reader=jvm needs pylog's jar on the session's classpath: start the "
                                     "session with pylog.spark.session() or spark.jars=pylog.spark.jar_path()")
        if opts.reader == "auto":
            warnings.warn(FASTER_READER, SlowReaderWarning, stacklevel=1)
        if _pushdown_enabled():
            return PylogPushdownReader(opts)
        return PylogReader(opts)

    def streamReader(self, schema):
        opts = parse_read_options(self.options, streaming=True)
        group_offsets.require_local(opts)
        return PylogStreamReader(opts)

    def streamWriter(self, schema, overwrite: bool):
        if overwrite:
            raise InvalidConfigError("format pylog appends only (a log is never overwritten): use outputMode('append')")
        return PylogStreamWriter(dict(self.options), schema)

    def writer(self, schema, overwrite: bool):
        if overwrite:
            raise InvalidConfigError("format pylog appends only (a log is never overwritten): use mode('append')")
        return PylogWriter(dict(self.options), schema)


def _pushdown_enabled() -> bool:
    """Whether Spark will push filters to this reader.

    Spark refuses a reader that implements ``pushFilters`` while
    ``spark.sql.python.filterPushdown.enabled`` is false, and does not tell the data source
    the setting. Its pushdown worker only runs when the setting is on, and its planning
    worker holds the setting in a local ``enable_pushdown``; anything else (a future Spark)
    gets the plain reader, which is always accepted."""
    try:
        caller = sys._getframe(2)
    except ValueError:
        return False
    if caller.f_globals.get("__name__", "").endswith("data_source_pushdown_filters"):
        return True
    return caller.f_locals.get("enable_pushdown") is True


class PylogReader(DataSourceReader):
    def __init__(self, opts):
        self.opts = opts
        self.pruned: dict = {}

    def partitions(self):
        ranges = plan.plan_ranges(self.opts)
        ranges = plan.prune_ranges(ranges, self.pruned)
        return [RangePartition(r, self.opts.include_headers, self.opts.isolation, self.opts.fail_on_data_loss)
                for r in ranges] or [InputPartition(None)]

    def read(self, partition):
        if getattr(partition, "range", None) is None:
            return iter(())
        return _read(partition)


class PylogPushdownReader(PylogReader):
    """Prunes partitions and offset ranges with pushed filters on topic, partition,
    offset and timestamp (a lower bound on the timestamp seeks with the time index).
    Every filter is handed back to Spark, which applies it exactly."""

    def pushFilters(self, filters):
        for f in filters:
            name = type(f).__name__
            col = f.attribute[0] if getattr(f, "attribute", None) else None
            if col in ("topic", "partition") and name == "EqualTo":
                self.pruned.setdefault(col, set()).add(f.value)
            elif col in ("topic", "partition") and name == "In":
                self.pruned.setdefault(col, set()).update(f.value)
            elif col == "offset" and name in ("GreaterThan", "GreaterThanOrEqual"):
                lo = f.value + (1 if name == "GreaterThan" else 0)
                self.pruned["offset_min"] = max(self.pruned.get("offset_min", lo), lo)
            elif col == "offset" and name in ("LessThan", "LessThanOrEqual"):
                hi = f.value + (1 if name == "LessThanOrEqual" else 0)
                self.pruned["offset_max"] = min(self.pruned.get("offset_max", hi), hi)
            elif col == "timestamp" and name in ("GreaterThan", "GreaterThanOrEqual", "EqualTo"):
                lo = _timestamp_ms(f.value)
                if lo is not None:
                    self.pruned["timestamp_min_ms"] = max(self.pruned.get("timestamp_min_ms", lo), lo)
            yield f  # Spark still evaluates it: pruning here only saves reading


def _timestamp_ms(value) -> int | None:
    """A pushed timestamp literal in ms, rounded down; None when it is not a datetime.
    A naive datetime (no zone) is moved a day earlier, so the bound stays a lower bound."""
    if not isinstance(value, datetime.datetime):
        return None
    if value.tzinfo is None:
        return int(value.replace(tzinfo=datetime.timezone.utc).timestamp() * 1000) - 86_400_000
    return math.floor(value.timestamp() * 1000)


class PylogStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    """Micro-batches of new records. Offsets: ``{"topic": {"partition": next_offset}}``.

    Admission control is Spark's Kafka source's: ``maxOffsetsPerTrigger`` caps a
    micro-batch (split across partitions by backlog); ``minOffsetsPerTrigger`` skips a
    trigger (:meth:`latestOffset` returns its start) while fewer offsets are new, unless
    ``maxTriggerDelay`` passed since the last trigger that fired (the first one always
    fires). ``Trigger.AvailableNow`` ends at the offsets of its start and ignores
    ``minOffsetsPerTrigger`` (it would wait for records that are not coming).
    ``commitOffsetsToGroup``: each committed micro-batch's end becomes the group's
    offsets at the next trigger (:meth:`_commit_to_group`)."""

    def __init__(self, opts):
        self.opts = opts
        self.available_now_end = None
        self.last_trigger_ms = -math.inf  # monotonic ms of the last trigger that fired
        self.group_end = None  # the offsets last committed to option commitOffsetsToGroup's group

    def _latest(self) -> dict:
        with plan.OffsetReader.open(self.opts) as reader:
            return _stream_offsets(reader.latest())

    def initialOffset(self) -> dict:
        """Where a new stream starts: ``startingTimestamp`` or ``startingOffsetsByTimestamp``
        when given (they take precedence, as in Spark's Kafka source), else
        ``startingOffsets`` (latest by default; ``group``: option ``groupId``'s committed
        offsets)."""
        with plan.OffsetReader.open(self.opts) as reader:
            return _stream_offsets(reader.partition_offsets(starting=True))

    def getDefaultReadLimit(self):
        """Spark hands this back to :meth:`latestOffset` (PySpark has no composite limit:
        with both options set, ``minOffsetsPerTrigger`` is read from the options)."""
        if ReadAllAvailable is None:
            return None
        if self.opts.max_offsets_per_trigger:
            return ReadMaxRows(self.opts.max_offsets_per_trigger)
        if self.opts.min_offsets_per_trigger:
            return ReadMinRows(self.opts.min_offsets_per_trigger)
        return ReadAllAvailable()

    def prepareForTriggerAvailableNow(self) -> None:
        self.available_now_end = self._latest()

    def latestOffset(self, start: dict = None, limit=None) -> dict:
        latest = self.available_now_end or self._latest()
        if start is None:
            return latest
        self._commit_to_group(start)  # Spark plans a trigger once the micro-batch ending at start committed
        target = {t: dict(parts) for t, parts in latest.items()}
        for t, parts in start.items():  # partitions never go backwards
            for p, off in parts.items():
                target.setdefault(t, {})[p] = max(target.get(t, {}).get(p, off), off)
        if ReadAllAvailable is not None and isinstance(limit, ReadAllAvailable):  # Trigger.Once
            return target
        if self.available_now_end is None and self._skip_trigger(start, target):
            return start
        max_rows = self.opts.max_offsets_per_trigger
        return target if max_rows is None else plan.capped_offsets(start, target, max_rows)

    def _skip_trigger(self, start: dict, target: dict) -> bool:
        """Kafka source's ``minOffsetsPerTrigger``: whether this trigger waits for more
        offsets (fewer than the minimum are new, and ``maxTriggerDelay`` has not passed)."""
        minimum = self.opts.min_offsets_per_trigger
        if minimum is None:
            return False
        now_ms = time.monotonic() * 1000
        if now_ms - self.last_trigger_ms < self.opts.max_trigger_delay_ms and _new_offsets(start, target) < minimum:
            return True
        self.last_trigger_ms = now_ms
        return False

    def reportLatestOffset(self):
        return self._latest()

    def partitions(self, start: dict, end: dict):
        return [RangePartition(r, self.opts.include_headers, self.opts.isolation, self.opts.fail_on_data_loss)
                for r in plan.OffsetReader(None, self.opts).ranges_from_resolved(start, end)]

    def read(self, partition):
        return _read(partition)

    def commit(self, end: dict) -> None:
        """Spark committed the micro-batch ending at ``end`` (it says so when it plans the
        next one): see :meth:`_commit_to_group`."""
        self._commit_to_group(end)

    def _commit_to_group(self, end: dict) -> None:
        """With ``commitOffsetsToGroup``: the end offsets of a committed micro-batch become
        the group's committed offsets (pylog/spark/group_offsets.py), once. Spark calls
        :meth:`commit` only when it plans the following micro-batch, and
        :meth:`latestOffset` with the last committed end at every trigger, so the group
        follows the query at its next trigger, also after the last micro-batch of
        ``Trigger.AvailableNow``. Without the option nothing is written: the offsets live
        in Spark's checkpoint."""
        if self.opts.commit_offsets_to_group and end != self.group_end:
            group_offsets.commit(self.opts.root, self.opts.commit_offsets_to_group, end)
            self.group_end = end


def _stream_offsets(offsets: dict) -> dict:
    """``{(topic, partition): offset}`` as a stream's offset: ``{"topic": {"partition": offset}}``."""
    out: dict = {}
    for (t, p), offset in offsets.items():
        out.setdefault(t, {})[str(p)] = offset
    return out


def _new_offsets(start: dict, target: dict) -> int:
    """How many offsets ``target`` is past ``start`` (a partition new since ``start``: from 0)."""
    return sum(off - start.get(t, {}).get(p, 0) for t, parts in target.items() for p, off in parts.items())


def _write_target(options: dict, schema) -> tuple[str, str | None, int]:
    """``(root, topic option, partitions of a new topic)`` of a write, checked against the
    rows' ``schema`` (:class:`InvalidConfigError` says what is missing)."""
    opts = {k.lower(): v for k, v in options.items()}
    root = opts.get("path")
    if not root:
        raise InvalidConfigError("no log dir: use .save(root) or .option('path', root)")
    if remote_target(root) is not None:
        raise InvalidConfigError(f"format pylog writes to local log dirs only, not to {redact(root)}: "
                                 f"object storage is read in place (write locally; tiering copies to a bucket)")
    names = {f.name for f in schema.fields}
    if "value" not in names:
        raise InvalidConfigError("writing to pylog needs a 'value' column")
    topic = opts.get("topic")
    if topic is None and "topic" not in names:
        raise InvalidConfigError("writing to pylog needs a 'topic' column or the topic option")
    return root, topic, int(opts.get("partitions", "1"))


@dataclass
class StagedBatches(WriterCommitMessage):
    """A task's staged file of encoded batches per (topic, partition)."""

    path: str
    parts: list


class PylogWriter(DataSourceArrowWriter):
    """Tasks encode their rows into Kafka batches in a staging file; the driver's commit
    appends every staged file to its partition, so a failed job leaves nothing in the logs."""

    def __init__(self, options: dict, schema):
        self.root, self.topic, self.partitions = _write_target(options, schema)
        self.job = uuid.uuid4().hex

    def write(self, iterator):
        staging = os.path.join(self.root, STAGING_DIR, self.job)
        os.makedirs(staging, exist_ok=True)
        path = os.path.join(staging, uuid.uuid4().hex + ".batches")
        parts = stage_rows(iterator, path, self.root, self.topic, self.partitions)
        return StagedBatches(path, parts)

    def commit(self, messages) -> None:
        try:
            commit_staged(self.root, [m for m in messages if m is not None], self.partitions)
        finally:
            shutil.rmtree(os.path.join(self.root, STAGING_DIR, self.job), ignore_errors=True)

    def abort(self, messages) -> None:
        shutil.rmtree(os.path.join(self.root, STAGING_DIR, self.job), ignore_errors=True)




#: ``deliveryGuarantee`` of ``writeStream.format("pylog")``
DELIVERY_GUARANTEES = ("exactly-once", "at-least-once")


@dataclass
class TaskWritten(WriterCommitMessage):
    """What a streaming write task appended: ``records``, 0 for a replay an earlier attempt wrote."""

    records: int


class PylogStreamWriter(DataSourceStreamArrowWriter):
    """``writeStream.format("pylog")``: each task appends its rows of a micro-batch in one
    transaction with a marker of the micro-batch, so a replay adds nothing
    (pylog/spark/stream_write.py). Option ``deliveryGuarantee``: ``exactly-once`` (the
    default) or ``at-least-once`` (Spark's Kafka sink's: no transaction, a replay may
    append a micro-batch again)."""

    def __init__(self, options: dict, schema):
        self.root, self.topic, self.partitions = _write_target(options, schema)
        guarantee = {k.lower(): v for k, v in options.items()}.get("deliveryguarantee", "exactly-once").lower()
        if guarantee not in DELIVERY_GUARANTEES:
            raise InvalidConfigError(f"option deliveryGuarantee={guarantee!r}: use one of "
                                     f"{', '.join(DELIVERY_GUARANTEES)}")
        self.exactly_once = guarantee == "exactly-once"

    def write(self, iterator):
        task = TaskContext.get()
        query_id = task.getLocalProperty("sql.streaming.queryId")
        batch_id = task.getLocalProperty("streaming.sql.batchId")
        if query_id is None or batch_id is None:
            raise InvalidConfigError("format pylog's stream writer runs in a streaming query only "
                                     "(Spark gave its task no query id or batch id)")
        return TaskWritten(write_task(iterator, root=self.root, topic=self.topic, partitions=self.partitions,
                                      query_id=query_id, batch_id=int(batch_id), partition_id=task.partitionId(),
                                      exactly_once=self.exactly_once))

    def commit(self, messages, batchId) -> None:
        pass  # each task committed its own transaction

    def abort(self, messages, batchId) -> None:
        pass  # committed tasks stay (a replay skips them); a failed task's transaction was aborted
