"""``RemoteLogManager``: tiers the closed segments of a log dir's topics configured
``remote_storage_enable`` to object storage, as Kafka's RemoteLogManager (KIP-405) does with
Aiven's plugin (docs/tiered.md).

One round, per partition of such a topic:

1. **Clean up.** A segment whose copy (or deletion) a dead process left at COPY_SEGMENT_STARTED
   (or DELETE_SEGMENT_STARTED) is deleted: DELETE_SEGMENT_STARTED, its objects, then
   DELETE_SEGMENT_FINISHED. No reader ever took it for live (pylog.remote.metadata).
2. **Copy.** Each closed segment wholly below the last stable offset (Kafka's rule: the next
   segment starts at or below the LSO) and above the last offset copied: COPY_SEGMENT_STARTED,
   the ``.log``, ``.indexes`` and ``.rsm-manifest`` objects in Aiven's layout
   (pylog/remote/aiven.py; chunks uncompressed and unencrypted), then COPY_SEGMENT_FINISHED,
   each record fsynced in ``__remote_log_metadata`` before the next step. The log's lock is
   held only while the segments are picked: appends never wait for an upload.
3. **Local retention.** Local segments go by ``local_retention_ms``/``local_retention_bytes``,
   and only those copied (pylog/retention/delete.py); the others wait, however old, for the
   store to take them.
4. **Total retention.** Copied segments go by ``retention_ms`` (their largest timestamp) and
   ``retention_bytes`` (remote plus not-yet-copied local bytes), oldest first:
   DELETE_SEGMENT_STARTED, the objects, DELETE_SEGMENT_FINISHED; the log start moves past them.

A failure (the store down, a full disk) stops that partition's round where it is and is kept
in ``RemoteLogManager.errors``; local segments stay until a later round copies them.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
import threading
from dataclasses import dataclass, field

from pylog import failpoints
from pylog.checkpoint import LeaderEpochCheckpoint, read_partition_metadata, write_partition_metadata
from pylog.partition_dir import new_topic_id, topic_id_of
from pylog.errors import PylogError
from pylog.layout import LEADER_EPOCH_CHECKPOINT, PARTITION_METADATA, SNAPSHOT_SUFFIX, segment_file_name
from pylog.record.encode import now_ms as _now_ms
from pylog.remote import aiven
from pylog.remote.metadata import (
    COPY_SEGMENT_FINISHED, COPY_SEGMENT_STARTED, DELETE_SEGMENT_FINISHED,
    DELETE_SEGMENT_STARTED, METADATA_TOPIC, RemoteLogMetadata, RemoteLogMetadataWriter, RemoteSegmentInfo,
    uuid_bytes,
)
from pylog.remote.store import ObjectStore
from pylog.retention.delete import enforce_retention

#: At most this many errors are kept (the oldest go first).
MAX_ERRORS = 100


@dataclass
class TierResult:
    """What one round did, per partition ``(topic, partition)``: start offsets of the segments
    copied, of the local segments deleted, of the remote segments deleted."""
    copied: dict = field(default_factory=dict)
    deleted_local: dict = field(default_factory=dict)
    deleted_remote: dict = field(default_factory=dict)
    errors: list = field(default_factory=list)


@dataclass(frozen=True)
class _Candidate:
    """A closed segment picked for copying, with what was read under the log's lock."""
    base_offset: int
    next_offset: int
    log_path: str
    indexes: dict
    max_timestamp_ms: int
    size_bytes: int
    leader_epochs: dict
    txn_index_empty: bool


class RemoteLogManager:
    """Tiers the logs of ``manager`` (a writable :class:`~pylog.manager.LogManager`) to the
    object store at ``url``. ``prefix``: the Aiven plugin's ``key.prefix``. The manager's
    config gives ``remote_log_manager_task_interval_ms`` and the partition count of a new
    ``__remote_log_metadata`` (``remote_log_metadata_topic_num_partitions``)."""

    def __init__(self, manager, url, *, storage_options: dict | None = None, prefix: str = "",
                 broker_id: int = 0):
        self.manager = manager
        self.store = ObjectStore.from_url(url, storage_options)
        self.prefix = prefix
        self.metadata_partitions = manager.config.remote_log_metadata_topic_num_partitions
        self.broker_id = broker_id
        self.errors: list[tuple[str, Exception]] = []
        self._writer: RemoteLogMetadataWriter | None = None
        self._round_lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    @property
    def metadata(self) -> RemoteLogMetadata:
        """The replayed ``__remote_log_metadata`` of this log dir (created on first use)."""
        return self._metadata_writer().metadata

    def _metadata_writer(self) -> RemoteLogMetadataWriter:
        """The one writer (and replayed state) of this log dir's ``__remote_log_metadata``,
        made on first use under the manager's lock (its logs' remote parts read its state)."""
        with self.manager._lock:
            if self._writer is None:
                self._writer = RemoteLogMetadataWriter(self.manager, partitions=self.metadata_partitions,
                                                       broker_id=self.broker_id)
            return self._writer

    # -- the background task -----------------------------------------------------------------
    def start(self, interval_ms: int | None = None) -> None:
        """Run a round every ``interval_ms`` (default: the manager's
        ``remote_log_manager_task_interval_ms``) on a daemon thread until :meth:`stop`."""
        if self._thread is None:
            interval_ms = interval_ms or self.manager.config.remote_log_manager_task_interval_ms
            self._stop.clear()
            self._thread = threading.Thread(target=self._loop, args=(interval_ms,), name="pylog-remote-log-manager",
                                            daemon=True)
            self._thread.start()

    def stop(self, timeout_s: float = 60.0) -> None:
        """Ask the thread to stop after the segment it is copying, and wait for it."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout_s)
            self._thread = None

    def _loop(self, interval_ms: int) -> None:
        while not self._stop.wait(interval_ms / 1000):
            self.run_once()
            try:
                self.manager.refresh_remote()  # its logs read what was tiered below their local start
            except (PylogError, OSError) as e:  # the store went down since: the next round tries again
                self.errors = (self.errors + [(self.manager.root, e)])[-MAX_ERRORS:]

    # -- one round -----------------------------------------------------------------------------
    def run_once(self, now_ms: int | None = None) -> TierResult:
        """One round over every writable log of a topic with ``remote_storage_enable``
        (see the module's docstring); a round in progress on another thread is waited for.
        Failures are kept in the result and in ``errors``; none is raised."""
        result = TierResult()
        with self._round_lock:
            for log in self._tiered_logs():
                if self._stop.is_set() and self._thread is not None and threading.current_thread() is self._thread:
                    break
                try:
                    self._tier(log, _now_ms() if now_ms is None else now_ms, result)
                except (PylogError, OSError) as e:  # keep tiering the other logs; local segments wait
                    result.errors.append((log.path, e))
            self.errors = (self.errors + result.errors)[-MAX_ERRORS:]
        return result

    def _tiered_logs(self) -> list:
        manager = self.manager
        return [manager.log(topic, p) for topic in manager.topics() if topic != METADATA_TOPIC
                and manager.topic_config(topic).remote_storage_enable for p in manager.partitions(topic)]

    def _tier(self, log, now: int, result: TierResult) -> None:
        writer = self._metadata_writer()
        topic_id = self._topic_id(log)
        key = (log.topic, log.partition)
        for info in writer.metadata.segments(log.topic, log.partition, topic_id):
            if info.state in (COPY_SEGMENT_STARTED, DELETE_SEGMENT_STARTED):
                self._delete_remote(info)
        for candidate in self._candidates(log, topic_id):
            if self._stop.is_set() and threading.current_thread() is self._thread:
                return
            self._copy(log, topic_id, candidate)
            result.copied.setdefault(key, []).append(candidate.base_offset)
        if key in result.copied:  # reads find the copies before their local segments go
            self.manager.refresh_remote()
        copied_end = self._copied_end(log, topic_id)
        deleted = enforce_retention(log, now, remote_end_offset=copied_end)
        if deleted:
            result.deleted_local[key] = deleted
        deleted = self._expire_remote(log, topic_id, now, copied_end)
        if deleted:
            result.deleted_remote[key] = deleted

    def _copied_end(self, log, topic_id: bytes) -> int | None:
        """The last offset of the partition's copied segments, None when none is."""
        live = self._metadata_writer().metadata.live_segments(log.topic, log.partition, topic_id)
        return max((s.end_offset for s in live), default=None)

    # -- copying --------------------------------------------------------------------------------
    def _candidates(self, log, topic_id: bytes) -> list[_Candidate]:
        """The closed segments to copy, oldest first, read under the log's lock (which is
        released before anything is uploaded). Cost: O(segments) plus reading each
        candidate's index files."""
        copied_end = self._copied_end(log, topic_id)
        with log.cleaner_view.lock:
            lso, segments = log.last_stable_offset, log.segments
            epochs = LeaderEpochCheckpoint(os.path.join(log.path, LEADER_EPOCH_CHECKPOINT)).read()
            out = []
            for seg, nxt in zip(segments, segments[1:]):
                if nxt.base_offset > lso:
                    break
                if copied_end is not None and nxt.base_offset - 1 <= copied_end or seg.size_bytes == 0:
                    continue
                out.append(self._candidate(log, seg, nxt.base_offset, epochs))
            return out

    @staticmethod
    def _candidate(log, seg, next_offset: int, epochs: list[tuple[int, int]]) -> _Candidate:
        txn = seg.txn_index
        snapshot = os.path.join(log.path, segment_file_name(next_offset, SNAPSHOT_SUFFIX))
        indexes = {
            "offset": _index_bytes(seg.offset_index), "timestamp": _index_bytes(seg.time_index),
            "producer_snapshot": _file_bytes(snapshot),
            "leader_epoch": _epoch_checkpoint_bytes([(e, o) for e, o in epochs if o < next_offset]),
        }
        txn_bytes = _file_bytes(txn.path) if txn.path and os.path.exists(txn.path) else b""
        if txn_bytes:
            indexes["transaction"] = txn_bytes
        in_segment = {e: max(o, seg.base_offset) for e, o in _epochs_in_range(epochs, seg.base_offset, next_offset)}
        return _Candidate(seg.base_offset, next_offset, seg.log_path, indexes, seg.largest_timestamp(),
                          seg.size_bytes, in_segment or {0: seg.base_offset}, not txn_bytes)

    def _copy(self, log, topic_id: bytes, c: _Candidate) -> None:
        """COPY_SEGMENT_STARTED, the objects, COPY_SEGMENT_FINISHED."""
        writer = self._metadata_writer()
        info = writer.copy_started(RemoteSegmentInfo(
            topic=log.topic, topic_id=topic_id, partition=log.partition, segment_id=_new_uuid(),
            start_offset=c.base_offset, end_offset=c.next_offset - 1, max_timestamp_ms=c.max_timestamp_ms,
            segment_leader_epochs=c.leader_epochs, segment_size_bytes=c.size_bytes, txn_index_empty=c.txn_index_empty))
        failpoints.hit("tier.copy.started")
        aiven.upload_segment(self.store, self.prefix, log.topic, topic_id, log.partition, info.segment_id,
                             c.log_path, c.indexes, start_offset=c.base_offset)
        failpoints.hit("tier.copy.uploaded")
        writer.update(info, COPY_SEGMENT_FINISHED)

    # -- deleting --------------------------------------------------------------------------------
    def _expire_remote(self, log, topic_id: bytes, now: int, copied_end: int | None) -> list[int]:
        """Total retention over the copied segments, oldest first; returns their start offsets."""
        config = log.config
        if not config.delete:
            return []
        live = self._metadata_writer().metadata.live_segments(log.topic, log.partition, topic_id)
        local_only = sum(s.size_bytes for s, n in _with_next(log.segments)
                         if copied_end is None or (n.base_offset if n else log.log_end_offset) - 1 > copied_end)
        excess = sum(s.segment_size_bytes for s in live) + local_only - config.retention_bytes
        doomed = []
        for info in live:
            by_time = 0 <= config.retention_ms < now - info.max_timestamp_ms
            by_size = config.retention_bytes >= 0 and excess - info.segment_size_bytes >= 0
            if not (by_time or by_size):
                break
            excess -= info.segment_size_bytes
            doomed.append(info)
        for info in doomed:
            self._delete_remote(info)
        if doomed:  # local segments the deleted copies held go too (a no-op below the local start)
            log.delete_records(min(doomed[-1].end_offset + 1, log.high_watermark))
        return [info.start_offset for info in doomed]

    def _delete_remote(self, info: RemoteSegmentInfo) -> None:
        """DELETE_SEGMENT_STARTED, the segment's objects, DELETE_SEGMENT_FINISHED."""
        writer = self._metadata_writer()
        if info.state != DELETE_SEGMENT_STARTED:
            writer.update(info, DELETE_SEGMENT_STARTED)
        for suffix in (aiven.MANIFEST, aiven.LOG, aiven.INDEXES):  # the manifest first: no longer a segment
            self.store.delete(aiven.object_key(self.prefix, info.topic, info.topic_id, info.partition,
                                               info.start_offset, info.segment_id, suffix))
        writer.update(info, DELETE_SEGMENT_FINISHED)

    # -- deleting a topic ---------------------------------------------------------------------------
    @contextlib.contextmanager
    def paused(self):
        """No round runs while held (one in progress is waited for). Not reentrant."""
        with self._round_lock:
            yield

    def delete_partitions(self, logs) -> None:
        """Delete the remote segments of ``logs`` (partitions of a topic being deleted; call
        under :meth:`paused`), as Kafka does for a deleted tiered topic: per partition,
        DELETE_PARTITION_MARKED and _STARTED, each segment's deletion, then
        DELETE_PARTITION_FINISHED. A partition never tiered costs nothing. Raises
        :class:`StorageError` when the store fails (what was deleted stays deleted)."""
        if METADATA_TOPIC not in self.manager.topics():
            return
        writer = self._metadata_writer()
        for log in logs:
            try:
                topic_id = uuid_bytes(read_partition_metadata(os.path.join(log.path, PARTITION_METADATA))["topic_id"])
            except FileNotFoundError:
                continue  # never tiered: pylog writes the id before the first copy
            segments = writer.metadata.segments(log.topic, log.partition, topic_id)
            if not segments:
                continue
            for state in ("DELETE_PARTITION_MARKED", "DELETE_PARTITION_STARTED"):
                writer.partition_deleted(log.topic, topic_id, log.partition, state)
            for info in segments:
                self._delete_remote(info)
            writer.partition_deleted(log.topic, topic_id, log.partition, "DELETE_PARTITION_FINISHED")

    # -- topic ids -------------------------------------------------------------------------------
    def _topic_id(self, log) -> bytes:
        """The topic's id from the partition's ``partition.metadata``; where it has none, the
        id another partition of the topic holds, or a new one, written as Kafka writes it."""
        path = os.path.join(log.path, PARTITION_METADATA)
        try:
            return uuid_bytes(read_partition_metadata(path)["topic_id"])
        except FileNotFoundError:
            pass
        text = topic_id_of(self.manager, log.topic) or new_topic_id()
        write_partition_metadata(path, text, io=self.manager.io)
        return uuid_bytes(text)



def _new_uuid() -> bytes:
    """A new segment id, drawn as Kafka's ``Uuid.randomUuid`` draws one (never text starting '-')."""
    return uuid_bytes(new_topic_id())


def _with_next(segments: list) -> list:
    return list(zip(segments, segments[1:] + [None]))


def _epochs_in_range(epochs: list[tuple[int, int]], start: int, end: int) -> list[tuple[int, int]]:
    """The leader epochs of offsets ``[start, end)``: the one in force at ``start`` and those
    beginning below ``end`` (Kafka's LeaderEpochFileCache.epochEntriesInRange)."""
    before = [(e, o) for e, o in epochs if o <= start]
    inside = [(e, o) for e, o in epochs if start < o < end]
    return before[-1:] + inside


def _index_bytes(index) -> bytes:
    """An index's entries as the file holds them, without a preallocated zero tail."""
    size = len(index) * index.entry_bytes
    with open(index.path, "rb") as f:
        return f.read(size)


def _file_bytes(path: str) -> bytes:
    try:
        with open(path, "rb") as f:
            return f.read()
    except FileNotFoundError:
        return b""


def _epoch_checkpoint_bytes(entries: list[tuple[int, int]]) -> bytes:
    """``entries`` as a ``leader-epoch-checkpoint`` file holds them (the plugin's leader-epoch index)."""
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, LEADER_EPOCH_CHECKPOINT)
        LeaderEpochCheckpoint(path).write(entries)
        return _file_bytes(path)
