"""``Log``: one partition directory in Apache Kafka's layout (docs/internals.md); Kafka's
``UnifiedLog``. The public API and the lock, composing ``LocalLog`` (segments and files),
``LogOffsets`` (log start, high watermark, recovery point) and ``ProducerStateManager``;
``LogAppender`` takes the steps of an append, a roll and a flush (pylog/log/appender.py).

Appends go to the active segment under the lock; reads take it only to pick a segment.
An append is durable once ``flush()`` returned (or the flush policy ran one); the offsets
live in the log dir's checkpoint files; a clean close lets the next open skip recovery.
"""

from __future__ import annotations

import contextlib

from pylog import retention
from pylog.arguments import check_choice, check_int, check_txn_marker
from pylog.check import check_log
from pylog.config import LogConfig, build_config
from pylog.io import DEFAULT_IO, FileIO
from pylog.layout import INT64_MAX, OFFSET_RANGE
from pylog.log.appender import LogAppender
from pylog.log.appends import AppendInfo, assign_offsets, check_follower_batches, check_offset, checked_records
from pylog.log.appends import client_batches, encode_records, whole_batches
from pylog.log.cleaner_view import LogCleanerView
from pylog.log.committed import CommittedReadState, following_the_writer, last_stable_offset
from pylog.log.loader import LoadedLog, open_partition
from pylog.log.local import LATEST_TIERED_TIMESTAMP, LocalLog, unclosed_finalizer
from pylog.log import tiered
from pylog.log.reading import RecordReads
from pylog.log.replica_view import LogReplicaView
from pylog.producer_state import ProducerState
from pylog.record.encode import encode_control_batch, now_ms
from pylog.remote.location import check_read_only, local_path, remote_target
from pylog.segment.fetch import FetchData
from pylog.segment.open_files import OpenFiles
from pylog.segment.segment import Segment

ISOLATIONS = ("uncommitted", "high_watermark", "committed")


class Log(RecordReads, contextlib.AbstractContextManager):
    """One Kafka partition: ``Log.open(path)`` opens or creates ``<topic>-<partition>/``.
    ``path``, ``topic`` and ``partition`` name it (from the directory name); ``cleaner_view``
    is what retention and compaction use of it (:class:`pylog.retention.view.CleanerView`),
    ``replica_view`` what replication does (:class:`pylog.log.replica_view.LogReplicaView`).

    >>> import tempfile, os
    >>> root = tempfile.mkdtemp()
    >>> with Log.open(os.path.join(root, "demo-0")) as log:
    ...     info = log.append([b"a", b"b"])
    ...     [r.value for r in log.read(0).records()]
    [b'a', b'b']
    """

    #: The partition's tiered segments (a :class:`~pylog.remote.log.RemoteLog`), read below
    #: the local log start (:mod:`pylog.log.tiered`); None for a log kept on disk only.
    remote = None

    def __init__(self, loaded: LoadedLog, config: LogConfig, *, read_only: bool, io: FileIO,
                 auto_high_watermark: bool):
        self.path, self.topic, self.partition = loaded.pdir.path, loaded.pdir.topic, loaded.pdir.partition
        self.config, self.read_only, self.io, self.auto_high_watermark = config, read_only, io, auto_high_watermark
        self._epochs, self.load_report = loaded.epochs, loaded.report
        self._dir = loaded.pdir
        self._lock = loaded.lock
        self._local = LocalLog(loaded, config, io, read_only=read_only)
        self._offsets = loaded.offsets
        self._producers = loaded.producers
        self._committed = CommittedReadState() if read_only else None
        self._appender = LogAppender(self._local, self._offsets, self._producers, self._epochs, self._dir)
        self.cleaner_view = LogCleanerView(self)
        self.replica_view = LogReplicaView(self)
        self._release_unclosed = unclosed_finalizer(self, self._local, self._dir)

    @classmethod
    def open(cls, path, config: LogConfig | dict | None = None, *, read_only: bool = False,
             auto_high_watermark: bool = True, io: FileIO | None = None, clean_shutdown: bool | None = None,
             max_open_files: int | None = None, open_files: OpenFiles | None = None,
             storage_options: dict | None = None, remote_log_metadata=None, encryption_key=None,
             **overrides) -> "Log":
        """Open (or, unless ``read_only``, create) the partition directory ``path``.

        ``read_only=True`` never modifies the directory (missing indexes are built in
        memory). A writer takes an exclusive lock (a second one gets :class:`LogLockedError`);
        after an unclean stop, segments above the recovery point are re-validated and cut at
        the first bad batch. ``auto_high_watermark`` keeps the high watermark at the log end.
        ``max_open_files`` bounds the descriptors its segments hold (see :class:`OpenFiles`;
        ``open_files`` shares one bound among logs); running out raises :class:`StorageError`.
        Cost: O(segments) to list, plus O(bytes above the recovery point) after a crash.

        An object-store URL (``s3://``, ``gs://``, ``az://``, ``abfss://``; ``file://`` of a
        tiered layout) opens a read-only :class:`~pylog.remote.log.RemoteLog` of the partition
        there (``storage_options``: fsspec's, as pandas takes them; docs/tiered.md)."""
        if remote_target(path) is not None:
            check_read_only(read_only, path)
            from pylog.remote.log_dir import open_remote_log
            return open_remote_log(path, storage_options=storage_options, remote_log_metadata=remote_log_metadata,
                                   encryption_key=encryption_key)
        path = local_path(path) if isinstance(path, str) else path
        cfg, io = build_config(config, overrides), io or DEFAULT_IO
        loaded = open_partition(path, cfg, read_only=read_only, io=io, auto_high_watermark=auto_high_watermark,
                                clean_shutdown=clean_shutdown, open_files=open_files or OpenFiles(max_open_files))
        return cls(loaded, cfg, read_only=read_only, io=io, auto_high_watermark=auto_high_watermark)

    def refresh(self, *, relist: bool = False) -> None:
        """Read-only logs: take in what the writing process did since (appends, rolls,
        retention, truncation, compaction); reads call it. O(1) system calls when nothing
        changed, O(segments) to list again (``relist`` forces it): ``LocalLog.refresh``."""
        if self.read_only:
            with self._lock:
                if self._local.refresh(self._offsets, relist=relist):  # rewritten: replay producers again
                    self._committed.forget()
                self._epochs = self._local.follow_epochs(self._epochs, self.local_log_start_offset)

    def _check_open(self) -> None:
        self._local.check_open()

    @property
    def segments(self) -> list[Segment]:
        """The segments, oldest first."""
        with self._lock:
            return list(self._local.segments)

    @property
    def active_segment(self) -> Segment:
        """The newest segment, the one appends go to."""
        return self._local.active

    @property
    def log_end_offset(self) -> int:
        """The next offset to be assigned."""
        return self._local.log_end_offset

    @property
    def size_bytes(self) -> int:
        """Bytes of all ``.log`` files."""
        with self._lock:
            return self._local.segments.size_bytes()

    @property
    def log_start_offset(self) -> int:
        """The first readable offset (moved by retention, ``delete_records`` and truncation);
        with a :attr:`remote` part reaching the local start, the remote log's start."""
        local = self._offsets.log_start_offset
        return local if self.remote is None else tiered.log_start_offset(self.remote, local)

    @property
    def local_log_start_offset(self) -> int:
        """The first offset in the local segments (:attr:`log_start_offset` without a remote part)."""
        return self._offsets.log_start_offset

    @property
    def recovery_point(self) -> int:
        """Everything below it is flushed; recovery after a crash starts at its segment."""
        return self._offsets.recovery_point

    @property
    def high_watermark(self) -> int:
        """Last committed offset + 1: reads with ``isolation="high_watermark"`` stop here."""
        return self._offsets.high_watermark

    @high_watermark.setter
    def high_watermark(self, offset: int) -> None:
        self.replica_view.update_high_watermark(offset)

    @property
    def last_stable_offset(self) -> int:
        """min(first offset of an open transaction, high watermark); a read-only log first
        replays the producer batches it has not seen, after its newest producer snapshot
        the first time (``CommittedReadState``)."""
        return self._last_stable_offset(aborts=False)

    def active_producers(self) -> list[ProducerState]:
        """Kafka's DescribeProducers of this partition: each producer the log knows (by
        producer id) with its epoch, last sequence, last timestamp, coordinator epoch and
        the first offset of its open transaction (None without one). A read-only log
        first catches up as :attr:`last_stable_offset` does. O(producers)."""
        self._local.check_open()
        self._producers_caught_up(aborts=False)
        with self._lock:
            return self._producers.active_producers()

    def _last_stable_offset(self, *, aborts: bool) -> int:
        """``aborts``: a read-only log also learns every aborted transaction (committed reads)."""
        self._producers_caught_up(aborts=aborts)
        return last_stable_offset(self._producers, self._offsets, auto_high_watermark=self.auto_high_watermark)

    def _producers_caught_up(self, *, aborts: bool) -> None:
        """A read-only log replays the producer batches it has not seen (``CommittedReadState``)."""
        if self.read_only:
            self._producers = self._committed.caught_up(self._local, self._offsets, self._lock, aborts=aborts,
                                                        relist=self._relist)

    def _relist(self) -> None:
        self.refresh(relist=True)

    def __repr__(self) -> str:
        return (f"Log({self.path!r}, log_start_offset={self.log_start_offset}, "
                f"log_end_offset={self.log_end_offset}, segments={len(self._local.segments)})")

    def __exit__(self, *exc) -> None:
        self.close()

    def append(self, records, *, compression: str | None = None, producer_id: int = -1,
               producer_epoch: int = -1, base_sequence: int = -1, is_transactional: bool = False,
               timestamp: int | list[int] | None = None) -> AppendInfo:
        """Append records (:class:`Record`\\ s, ``bytes`` values or ``(key, value)`` tuples)
        as one batch (several if one would pass ``max_message_bytes``), atomically, offsets
        from the log end. With ``producer_id``/``producer_epoch``/``base_sequence`` it is
        idempotent: an exact retry returns the original offsets and writes nothing.
        ``timestamp``: the create time of the records without their own (default: now), or
        a list holding each record's. Durable after the next flush. Bad options raise
        :class:`InvalidArgumentError`, records that cannot be encoded
        :class:`InvalidArgumentError` too, before anything is written.
        Cost: O(bytes) to encode, one write."""
        self._local.check_writable()
        options = dict(producer_id=producer_id, producer_epoch=producer_epoch, base_sequence=base_sequence,
                       is_transactional=is_transactional, timestamp=timestamp)
        records = checked_records(records, compression=compression, **options)
        codec = self.config.target_compression or compression or "none"
        with self._lock:
            now = now_ms()
            data, batches = encode_records(records, self.config, base_offset=self.log_end_offset,
                                           leader_epoch=self.replica_view.leader_epoch, now=now, codec=codec, **options)
            return self._appender.append(data, self.config, from_client=True, now=now, batches=batches)

    def append_batches(self, raw) -> AppendInfo:
        """Append pre-encoded Kafka batches (magic 2), assigning offsets from the log end.
        CRCs are checked; control batches are refused, as are batches whose offset range
        does not match their record count. Cost: O(bytes)."""
        self._local.check_writable()
        data, batches = client_batches(raw, self.config.max_message_bytes)
        with self._lock:
            now = now_ms()
            data = assign_offsets(data, batches, self.config, base_offset=self.log_end_offset,
                                  leader_epoch=self.replica_view.leader_epoch, now=now)
            return self._appender.append(data, self.config, from_client=True, now=now)

    def append_as_follower(self, raw) -> AppendInfo:
        """Append batches keeping their offsets (replication, copying a log). Offsets must
        be increasing and not below the log end; CRCs are checked; sizes are not limited by
        ``max_message_bytes``. Cost: O(bytes)."""
        self._local.check_writable()
        data = bytes(raw)
        batches = whole_batches(data)
        with self._lock:
            check_follower_batches(batches, self.log_end_offset)
            return self._appender.append(data, self.config, from_client=False, now=now_ms(), batches=batches)

    def append_txn_marker(self, producer_id: int, producer_epoch: int, commit: bool,
                          coordinator_epoch: int = 0) -> AppendInfo:
        """Write a COMMIT or ABORT control batch ending the producer's open transaction.
        ``producer_id`` and ``producer_epoch`` must name a producer (>= 0), ``commit`` be a
        bool; else :class:`InvalidArgumentError` and nothing is written."""
        self._local.check_writable()
        check_txn_marker(producer_id, producer_epoch, commit, coordinator_epoch)
        marker = dict(producer_id=producer_id, producer_epoch=producer_epoch, coordinator_epoch=coordinator_epoch)
        with self._lock:
            raw = encode_control_batch(1 if commit else 0, base_offset=self.log_end_offset,
                                       partition_leader_epoch=self.replica_view.leader_epoch, **marker)
            return self._appender.append(raw, self.config, from_client=False, now=now_ms())

    def roll(self, new_base_offset: int | None = None) -> Segment:
        """Start a new active segment (at the log end unless given). The old one gets its
        final time-index entry and trimmed indexes, and is flushed: everything before the
        new segment is durable when this returns."""
        self._local.check_writable()
        with self._lock:
            return self._appender.roll(new_base_offset)

    def update_config(self, config: LogConfig | dict) -> None:
        """Take new settings now, as a Kafka broker takes a topic's altered configs
        (``UnifiedLog.updateConfig``): appends, rolls, flushes, retention and compaction
        use them from the next call; segments already made keep their index sizes and
        interval. ``config``: a LogConfig, or a dict of changes to this log's settings,
        checked whole before anything changes (:class:`InvalidConfigError`)."""
        self._local.check_open()
        config = build_config(self.config, config) if isinstance(config, dict) else build_config(config, {})
        with self._lock:
            self.config = config
            self._local.update_config(config)
            if self._producers is not None:
                self._producers.producer_id_expiration_ms = config.producer_id_expiration_ms

    def flush(self) -> None:
        """fsync every segment above the recovery point (log and indexes), then move the
        recovery point to the log end and checkpoint it. On return every append made so far
        is durable."""
        self._local.check_writable()
        with self._lock:
            self._appender.flush()

    def read(self, offset: int, max_bytes: int = 1 << 20, *, isolation: str = "uncommitted",
             max_offset: int | None = None, min_one_message: bool = True) -> FetchData:
        """Fetch whole batches from ``offset`` on, at most ``max_bytes`` (but at least one
        batch when ``min_one_message``), bounded by the log end (``"uncommitted"``), the
        high watermark (``"high_watermark"``) or the last stable offset (``"committed"``),
        and by ``max_offset`` (exclusive). :class:`OffsetOutOfRangeError` below the log start
        or past the log end; empty at the bound. A read-only log first :meth:`refresh`\\ es.
        Cost: O(log segments + index entries + index_interval_bytes); no byte is read yet."""
        self._local.check_open()
        check_offset(offset, "offset")
        check_int(max_bytes, "max_bytes", OFFSET_RANGE)
        check_choice(isolation, "isolation", ISOLATIONS)
        if self.remote is not None or self.config.remote_storage_enable:  # tiered, or its first copy may land now
            return tiered.read_either(self, offset, max_bytes, isolation=isolation, max_offset=max_offset,
                                      min_one_message=min_one_message, read_local=self._read_local, lock=self._lock)
        return self._read_local(offset, max_bytes, isolation=isolation, max_offset=max_offset,
                                min_one_message=min_one_message)

    def _read_local(self, offset: int, max_bytes: int, *, isolation: str, max_offset: int | None,
                    min_one_message: bool) -> FetchData:
        """:meth:`read` from the local segments."""

        def limits() -> tuple[int, int]:  # under the lock: the log start, and where this read stops
            bound = {"uncommitted": self.log_end_offset, "high_watermark": self.high_watermark}.get(isolation)
            bound = self._last_stable_offset(aborts=True) if bound is None else bound
            if max_offset is not None:
                check_offset(max_offset, "max_offset")
                bound = min(bound, max_offset)
            return self.local_log_start_offset, bound

        fetch = self._local.read(offset, limits, max_bytes=max_bytes, isolation=isolation,
                                 min_one_message=min_one_message, refresh=self.refresh)
        fetch.high_watermark, fetch.log_start_offset = self.high_watermark, self.log_start_offset
        fetch.topic, fetch.partition = self.topic, self.partition  # the place of its records
        if isolation == "committed" or not self.read_only:  # a read-only log learns it by a replay
            fetch.last_stable_offset = self.last_stable_offset
        return fetch

    def offset_for_timestamp(self, timestamp: int) -> int | None:
        """The earliest offset with a record timestamp >= ``timestamp`` (Kafka's ListOffsets; -2: the log
        start, -1: the log end, -3: the largest timestamp's, -4: the local log start, -5: the last
        offset in remote storage); None if none. O(segments + index_interval)."""
        self._local.check_open()
        check_int(timestamp, "timestamp", (LATEST_TIERED_TIMESTAMP, INT64_MAX))
        return tiered.offset_for_timestamp(self.remote, timestamp, self.local_log_start_offset, self._local_offset,
                                           lambda: max((s.max_timestamp for s in self.segments), default=-1))

    def _local_offset(self, timestamp: int) -> int | None:
        """:meth:`offset_for_timestamp` in the local segments (again if the writer removed a file)."""
        return following_the_writer(lambda: self._local.offset_for_timestamp(timestamp, self.local_log_start_offset),
                                    read_only=self.read_only, relist=self._relist)

    def truncate_to(self, offset: int) -> None:
        """Remove every offset >= ``offset`` (whole batches: the batch holding ``offset``
        goes). Durable after the next flush; the recovery point moves down with it."""
        self._local.check_writable()
        check_offset(offset, "offset")
        with self._lock:
            if offset >= self.log_end_offset:
                return
            if self._local.truncate_to(offset):
                self._offsets.started_at(offset)
                self._epochs.clear()
            self._epochs.truncate_from_end(self.log_end_offset)
            self._offsets.truncated(self.log_end_offset)
            self._local.reload_producers(self._producers, self.local_log_start_offset)
            self._local.active.flush()
            self._offsets.checkpoint(self._dir)

    def delete_records(self, before_offset: int) -> int:
        """Move the log start offset to ``before_offset`` (Kafka's DeleteRecords): older
        offsets become unreadable, and whole segments below it are deleted. Must not pass
        the high watermark. Persisted before returning. Returns the new log start offset."""
        self._local.check_writable()
        check_offset(before_offset, "before_offset")
        with self._lock:
            if not self._offsets.delete_records_before(before_offset, self.log_end_offset):
                return self.local_log_start_offset
            self._epochs.truncate_from_start(self.local_log_start_offset)
            self.cleaner_view.delete_segments(self._local.segments_below(before_offset))
            self._offsets.checkpoint(self._dir)
            return self.local_log_start_offset

    # Operations whose code and documentation live with their module; each takes the log first.
    enforce_retention, compact, check = retention.enforce_retention, retention.compact, check_log

    def close(self) -> None:
        """Flush everything, write the final time-index entry, trim indexes, snapshot producer
        state, checkpoint and release the writer lock (the last writer of the log dir to close
        cleanly writes its clean-shutdown marker, pylog/log_dir.py). Idempotent."""
        if self._local.closed:
            return
        with self._lock:
            clean = False
            try:
                if not self.read_only:
                    try:
                        self._local.active.on_become_inactive()
                    finally:  # the data is made durable even if its last index entry fails
                        self.flush()
                    self._producers.take_snapshot(self.log_end_offset)
                    clean = True
            finally:
                self._release_unclosed.detach()
                self._local.close()
                self._dir.unlock(clean=clean)
