"""The write side of the data source: staging a task's rows as encoded Kafka batches, and
appending them on commit. Pure Python over pyarrow."""

from __future__ import annotations

import os

from pylog.errors import InvalidRecordError, UnknownTopicError
from pylog.logdir.metadata import LogDirMetadata
from pylog.manager import LogManager
from pylog.partitioner import partition_for_key
from pylog.record.encode import encode_batch
from pylog.record.record import Record

#: Records per staged batch.
BATCH_RECORDS = 1000


def records_by_partition(batches, root: str, default_topic: str | None,
                         default_partitions: int) -> dict[tuple[str, int], list[Record]]:
    """The rows of Arrow ``batches`` (the sink schema: ``value``, optional ``key``,
    ``topic``, ``partition``, ``timestamp``, ``headers``) as records, by the (topic,
    partition) each goes to: the ``partition`` column, else Kafka's partitioner for a key,
    else round robin over the topic's partitions (``default_partitions`` for a topic not
    yet made). Raises :class:`InvalidRecordError` for a row without a topic, a key or value
    that is neither string nor binary, or a partition the existing topic lacks. Cost:
    O(rows) in Python; the batch writer and the streaming sink share it."""
    groups: dict[tuple[str, int], list[Record]] = {}
    counts: dict[str, int] = {}
    metadata = LogDirMetadata.for_root(root)
    rr = 0
    for rb in batches:
        cols = {name: rb.column(i).to_pylist() for i, name in enumerate(rb.schema.names)}
        n = rb.num_rows
        for i in range(n):
            value = _bytes(cols["value"][i], "value")
            key = _bytes(cols["key"][i], "key") if "key" in cols else None
            topic = default_topic or cols["topic"][i]
            if not topic:
                raise InvalidRecordError(f"row {i} has no topic")
            part = cols.get("partition", [None] * n)[i]
            if topic not in counts:
                counts[topic] = metadata.partition_count(topic) or default_partitions
            if part is not None and not 0 <= part < counts[topic] and metadata.partition_count(topic):
                raise InvalidRecordError(f"row {i} names partition {part} of topic {topic!r}, which has "
                                         f"partitions 0-{counts[topic] - 1} in {root}")
            if part is None:
                if key is None:
                    part, rr = rr % counts[topic], rr + 1
                else:
                    part = partition_for_key(key, counts[topic])
            ts = cols.get("timestamp", [None] * n)[i]
            ts_ms = None if ts is None else int(ts.timestamp() * 1000)
            headers = tuple((h["key"], h["value"]) for h in (cols.get("headers", [None] * n)[i] or ()))
            groups.setdefault((topic, int(part)), []).append(Record(value, key, ts_ms, headers))
    return groups


def stage_rows(batches, path: str, root: str, default_topic: str | None, default_partitions: int) -> list:
    """Encode the rows of Arrow ``batches`` into one staging file; returns
    [(topic, partition, position, size)] of the batches written."""
    groups = records_by_partition(batches, root, default_topic, default_partitions)
    out = []
    with open(path, "wb") as f:
        for (topic, part), records in sorted(groups.items()):
            for i in range(0, len(records), BATCH_RECORDS):
                raw = encode_batch(records[i:i + BATCH_RECORDS])
                out.append((topic, part, f.tell(), len(raw)))
                f.write(raw)
        f.flush()
        os.fsync(f.fileno())
    return out


def _bytes(v, what: str):
    if v is None or isinstance(v, bytes):
        return v
    if isinstance(v, str):
        return v.encode("utf-8")
    raise InvalidRecordError(f"column {what} must be binary or string, not {type(v).__name__}")


def commit_staged(root: str, messages, default_partitions: int) -> None:
    """Append every staged batch to its partition, creating the topics that do not exist
    with enough partitions for every row of theirs (``default_partitions`` at least). A
    partition an existing topic lacks is refused (:class:`UnknownTopicError`) before
    anything is appended."""
    with LogManager(root) as manager:
        existing = set(manager.topics())
        highest: dict[str, int] = {}  # the highest partition each topic's rows name
        for m in messages:
            for topic, part, _, _ in m.parts:
                highest[topic] = max(highest.get(topic, 0), part)
        for topic, part in sorted(highest.items()):
            if topic in existing and part >= len(manager.partitions(topic)):
                raise UnknownTopicError(f"topic {topic!r} has no partition {part} in {root} (it has "
                                        f"{len(manager.partitions(topic))}); nothing was written")
        for topic, part in sorted(highest.items()):
            if topic not in existing:
                manager.create_topic(topic, max(default_partitions, part + 1))
        for m in messages:
            with open(m.path, "rb") as f:
                data = f.read()
            for topic, part, pos, size in m.parts:
                manager.log(topic, part).append_batches(data[pos:pos + size])


