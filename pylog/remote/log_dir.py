"""``RemoteLogDir``: Kafka data in object storage opened as a read-only log dir.

``LogManager(url, read_only=True, storage_options=..., remote_log_metadata=...)`` and
``Log.open(url, read_only=True, storage_options=...)`` come here for an object-store URL.
The store is listed once when it opens (one LIST walk; a partition's ``Log.open`` lists
only that partition's objects) and the listing is kept: a log dir in object storage is
read as it was when opened.
"""

from __future__ import annotations

import contextlib
from pathlib import Path

from pylog.checkpoint import OffsetCheckpoint
from pylog.config import build_config
from pylog.errors import LogDirNotFoundError, ReadOnlyError, UnknownTopicError
from pylog.layout import OFFSET_DIGITS, SNAPSHOT_SUFFIX, TOPIC_CONFIGS_FILE
from pylog.logdir.metadata import parse_topic_configs
from pylog.producer_state import parse_snapshot
from pylog.remote.layouts import LOG_DIR, list_store, live_entries
from pylog.remote.log import RemoteLog
from pylog.remote.location import AIVEN_PARTITION, LOCAL_TIERED_PARTITION, LOG_DIR_PARTITION
from pylog.remote.metadata import METADATA_TOPIC, RemoteLogMetadata
from pylog.remote.store import ObjectStore, is_url, redact

LOG_START_OFFSET_CHECKPOINT = "log-start-offset-checkpoint"


class RemoteLogDir(contextlib.AbstractContextManager):
    """The topics and partitions of a store (a log dir copied to a bucket, or a tiered
    layout), each opened as a :class:`RemoteLog`. ``remote_log_metadata``: a path, URL or
    :class:`~pylog.remote.metadata.RemoteLogMetadata` of the ``__remote_log_metadata``
    partitions, which say which tiered segments are live. ``encryption_key``: the
    :class:`~pylog.remote.aiven.KeyPair` (or a list of them) that reads encrypted Aiven segments."""

    read_only = True

    def __init__(self, url, *, storage_options: dict | None = None, remote_log_metadata=None, prefix: str = "",
                 encryption_key=None):
        if not prefix:  # a tiered layout's partition: listed as open_remote_log lists it
            url, prefix = _tiered_partition(url)
        self.store = ObjectStore.from_url(url, storage_options)
        self.root = self.store.url()
        self.storage_options = storage_options
        self._prefix = prefix
        self._listing = list_store(self.store, prefix, encryption_key=encryption_key)
        self._log_starts: dict | None = None
        self._topic_overrides: dict | None = None
        self.layout = self._listing.layout
        self.metadata = _metadata(remote_log_metadata, storage_options)
        self._logs: dict[tuple[str, int], RemoteLog] = {}

    def __repr__(self) -> str:
        return f"RemoteLogDir({self.root!r}, layout={self.layout!r})"

    def topics(self) -> list[str]:
        return self._listing.topics()

    def partitions(self, topic: str) -> list[int]:
        return self._listing.partitions_of(topic)

    def topic_config(self, topic: str):
        """The topic's :class:`~pylog.config.LogConfig`: the defaults with the overrides a
        copied log dir's ``topic-configs.json`` holds for it (the object is read once; a
        tiered layout has none). Raises :class:`InvalidConfigError` for one that is not a
        JSON object of settings."""
        if self._topic_overrides is None:
            self._topic_overrides = {}
            if TOPIC_CONFIGS_FILE in self._listing.objects:
                self._topic_overrides = parse_topic_configs(self.store.read(TOPIC_CONFIGS_FILE),
                                                            self.store.url(TOPIC_CONFIGS_FILE))
        return build_config(None, self._topic_overrides.get(topic, {}))

    def topic_id(self, topic: str) -> str | None:
        """The topic's id as its tiered objects name it (None for a plain log dir)."""
        return self._listing.topic_ids.get(topic)

    def log(self, topic: str, partition: int, *, create: bool = False) -> RemoteLog:
        """The partition as a :class:`RemoteLog` (opened once, then the same object)."""
        if create:
            raise ReadOnlyError(f"{self.root} is in object storage and read only: cannot create {topic}-{partition}")
        key = (topic, partition)
        if key not in self._logs:
            if key not in self._listing.partitions:
                raise UnknownTopicError(f"no partition {topic}-{partition} in {self.root}")
            entries, infos = live_entries(self._listing, topic, partition, self.metadata)
            segments = []
            for entry, info in zip(entries, infos):
                seg = entry.build()
                if info is not None:
                    seg._end_offset, seg._max_timestamp = info.end_offset, info.max_timestamp_ms
                    if info.txn_index_empty:
                        seg.indexes.known_empty("transaction")
                segments.append(seg)
            self._logs[key] = RemoteLog(segments, topic=topic, partition=partition,
                                        url=self.store.url(self._listing.dirs[key].rstrip("/")),
                                        log_start_offset=self._log_start_offset(topic, partition),
                                        open_transactions=self._open_transactions_of(topic, partition))
        return self._logs[key]

    def logs(self) -> list[RemoteLog]:
        return [self.log(t, p) for t in self.topics() for p in self.partitions(t)]

    def _log_start_offset(self, topic: str, partition: int) -> int | None:
        """A plain log dir's ``log-start-offset-checkpoint`` entry (moved by delete-records)."""
        if self.layout != LOG_DIR:
            return None
        if self._log_starts is None:
            self._log_starts = {}
            listed = LOG_START_OFFSET_CHECKPOINT in self._listing.objects
            if listed or (self._prefix and self.store.exists(LOG_START_OFFSET_CHECKPOINT)):  # listed a partition only
                self._log_starts = OffsetCheckpoint.parse(self.store.read(LOG_START_OFFSET_CHECKPOINT),
                                                          self.store.url(LOG_START_OFFSET_CHECKPOINT))
        return self._log_starts.get((topic, partition))

    def _open_transactions_of(self, topic: str, partition: int):
        """For a plain log dir: ``() -> {producer id: first offset}`` of the transactions open at
        its end, from its latest producer snapshot and the batches after it."""
        if self.layout != LOG_DIR:
            return None
        directory = self._listing.dirs[(topic, partition)]
        snapshots = sorted(int(k[len(directory):-len(SNAPSHOT_SUFFIX)]) for k in self._listing.objects
                           if k.startswith(directory) and k.endswith(SNAPSHOT_SUFFIX)
                           and len(k) - len(directory) == OFFSET_DIGITS + len(SNAPSHOT_SUFFIX))

        def open_transactions() -> dict[int, int]:
            log = self._logs[(topic, partition)]
            at = max([s for s in snapshots if s <= log.log_end_offset], default=None)
            ongoing: dict[int, int] = {}
            if at is not None:
                key = f"{directory}{at:0{OFFSET_DIGITS}d}{SNAPSHOT_SUFFIX}"
                for e in parse_snapshot(self.store.read(key), self.store.url(key)):
                    if e.current_txn_first_offset is not None:
                        ongoing[e.producer_id] = e.current_txn_first_offset
            for batch in _batches_from(log, log.log_start_offset if at is None else at):
                if batch.is_control:
                    ongoing.pop(batch.producer_id, None)
                elif batch.is_transactional:
                    ongoing.setdefault(batch.producer_id, batch.base_offset)
            return ongoing
        return open_transactions

    def flush(self) -> None:
        """Nothing to flush."""

    def close(self) -> None:
        for log in self._logs.values():
            log.close()
        self._logs.clear()

    def __exit__(self, *exc) -> None:
        self.close()


def _batches_from(log: RemoteLog, offset: int):
    """Every batch of ``log`` from the one holding ``offset`` on (uncommitted, control included)."""
    while offset < log.log_end_offset:
        fetch = log.read(offset, 4 << 20)
        batches = fetch.batches()
        if not batches:
            return
        yield from batches
        offset = fetch.next_offset


def _metadata(remote_log_metadata, storage_options):
    if remote_log_metadata is None or isinstance(remote_log_metadata, RemoteLogMetadata):
        return remote_log_metadata
    return open_remote_log_metadata(remote_log_metadata, storage_options)


def open_remote_log_metadata(path_or_url, storage_options: dict | None = None) -> RemoteLogMetadata:
    """Replay every ``__remote_log_metadata-N`` partition of the log dir ``path_or_url`` (a
    local path, or an object-store URL), read-only. Raises :class:`UnknownTopicError` when it
    holds none. Cost: one listing and one read of every record of the topic; holds nothing
    open afterwards."""
    url = path_or_url if is_url(str(path_or_url)) else Path(path_or_url).absolute().as_uri()
    with RemoteLogDir(url, storage_options=storage_options) as log_dir:
        if METADATA_TOPIC not in log_dir.topics():
            raise UnknownTopicError(f"no {METADATA_TOPIC} partitions in {redact(str(path_or_url))}")
        return RemoteLogMetadata.from_logs(log_dir.log(METADATA_TOPIC, p) for p in log_dir.partitions(METADATA_TOPIC))


def open_remote_log(url, *, storage_options: dict | None = None, remote_log_metadata=None,
                    encryption_key=None) -> RemoteLog:
    """The partition at ``url``: ``<root>/<topic>-<partition>`` (a log dir),
    ``<prefix><topic>-<topicId>/<partition>`` (Aiven's layout) or
    ``<dir>/<topic>-<partition>-<topicId>`` (Kafka's LocalTieredStorage). Lists that
    partition's objects only."""
    text = str(url).rstrip("/")
    for pattern in (AIVEN_PARTITION, LOCAL_TIERED_PARTITION, LOG_DIR_PARTITION):
        m = pattern.fullmatch(text)
        if m is None or not m["root"] or m["root"].endswith("://"):
            continue
        root, prefix = m["root"].rstrip("/"), text[len(m["root"]):] + "/"
        log_dir = RemoteLogDir(root, storage_options=storage_options, remote_log_metadata=remote_log_metadata,
                               prefix=prefix, encryption_key=encryption_key)
        key = (m["topic"], int(m["partition"]))
        if key in log_dir._listing.partitions:
            return log_dir.log(*key)
    raise LogDirNotFoundError(f"no partition found at {redact(text)}: expected <topic>-<partition> (a log dir), "
                              f"<topic>-<topicId>/<partition> (Aiven's tiered layout) or "
                              f"<topic>-<partition>-<topicId> (Kafka's LocalTieredStorage) holding segments")


def _tiered_partition(url) -> tuple:
    """(the root, the partition's prefix below it) when ``url`` names one partition of a
    tiered layout (``<topic>-<topicId>/<partition>``, ``<topic>-<partition>-<topicId>``),
    else (``url``, ""). No I/O."""
    text = str(url).rstrip("/")
    for pattern in (AIVEN_PARTITION, LOCAL_TIERED_PARTITION):
        m = pattern.fullmatch(text)
        if m is not None and m["root"] and not m["root"].endswith("://"):
            return m["root"].rstrip("/"), text[len(m["root"]):] + "/"
    return url, ""

