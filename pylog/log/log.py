"""``Log``: one partition directory, laid out exactly as Apache Kafka lays it out
(docs/internals.md).

Segments sit in a sorted map keyed by base offset. Appends go to the last (active)
segment under one lock; reads take the lock only to pick a segment and then read the
file without it. Durability: an append is durable once ``flush()`` returned (or the
flush policy ran one); the recovery point, log start offset and high watermark live in
the log dir's checkpoint files; a clean close leaves a marker so the next open skips
recovery.
"""

from __future__ import annotations

import errno
import os
import threading

from dataclasses import dataclass

from pylog import failpoints
from pylog.arguments import (
    check_append_options, check_choice, check_int, check_records_iterable, check_txn_marker,
)
from pylog.config import LogConfig, build_config
from pylog.errors import (
    CorruptRecordError, IncompleteBatchError, InvalidArgumentError, InvalidOffsetError, InvalidRecordError,
    LogClosedError, OffsetOutOfRangeError, PylogError, ReadOnlyError, RecordTooLargeError, StorageError,
)
from pylog.io import DEFAULT_IO, FileIO
from pylog.layout import INT32_MAX, INT64_MAX, LOG_SUFFIX, OFFSET_RANGE
from pylog.log.loader import LoadedLog, LogLoader, live_segment_bases, lso_after, take_checkpointed_offsets
from pylog.log.segments import SegmentFactory, batches_from, delete_segment
from pylog.partition_dir import PartitionDir
from pylog.producer_state import ProducerStateManager
from pylog.record.batch import RecordBatch, decode_batches
from pylog.record.encode import (
    encode_batch, encode_batch_buffer, now_ms, set_base_offset, set_log_append_time, set_partition_leader_epoch,
)
from pylog.record.record import as_record
from pylog.segment.fetch import FetchData
from pylog.segment.open_files import OpenFiles
from pylog.segment.segment import Segment, segment_paths
from pylog.txn_check import TxnIndexChecker

EARLIEST_TIMESTAMP = -2
LATEST_TIMESTAMP = -1
MAX_TIMESTAMP = -3
ISOLATIONS = ("uncommitted", "high_watermark", "committed")
#: Listings a read-only log takes in a row while files vanish under it (a writer's renames).
RELIST_ATTEMPTS = 100


@dataclass(frozen=True)
class AppendInfo:
    """What an append did: offsets assigned, the batch max timestamp, LogAppendTime (-1
    for CreateTime), record count; ``duplicate`` when an idempotent retry wrote nothing."""

    first_offset: int
    last_offset: int
    max_timestamp: int
    log_append_time: int
    num_records: int
    size_bytes: int = 0
    duplicate: bool = False


class Log:
    """One Kafka partition: ``Log.open(path)`` opens or creates ``<topic>-<partition>/``.

    >>> import tempfile, os
    >>> root = tempfile.mkdtemp()
    >>> with Log.open(os.path.join(root, "demo-0")) as log:
    ...     info = log.append([b"a", b"b"])
    ...     [r.value for r in log.read(0).records()]
    [b'a', b'b']
    """

    def __init__(self, pdir: PartitionDir, config: LogConfig, loaded: LoadedLog, *, read_only: bool, io: FileIO,
                 auto_high_watermark: bool, lock: threading.RLock, files):
        self._dir = pdir
        self.config = config
        self.read_only = read_only
        self.io = io
        self.auto_high_watermark = auto_high_watermark
        self._lock = lock
        self._segments = loaded.segments
        self._factory = SegmentFactory(pdir.path, config, io, files, writable=not read_only)
        self._closed = False
        self._offsets = loaded.offsets
        self._epochs = loaded.epochs
        self._leader_epoch = 0
        self.load_report = loaded.report
        self._last_flush_ms = now_ms()
        self._producers = loaded.producers
        self._first_unstable_offset = None
        self._txn_checker = TxnIndexChecker(pdir.path, self._batches_between)
        # read-only logs: what refresh() watches, and how far committed reads replayed producer batches
        self._empty_start = loaded.empty_start
        self._dir_watch = loaded.dir_watch
        self._checkpoint_watch = loaded.checkpoint_watch
        self._txn_replayed_to = 0
        self._update_first_unstable_offset()

    # ==== opening =================================================================================
    @classmethod
    def open(cls, path, config: LogConfig | dict | None = None, *, read_only: bool = False,
             auto_high_watermark: bool = True, io: FileIO | None = None, clean_shutdown: bool | None = None,
             max_open_files: int | None = None, open_files: OpenFiles | None = None, **overrides) -> "Log":
        """Open (or, unless ``read_only``, create) the partition directory ``path``.

        ``read_only=True`` never modifies the directory (inspect a broker's or a backup's
        files; missing indexes are built in memory). A writer takes an exclusive lock; a
        second writer gets :class:`LogLockedError`. After an unclean stop, segments above
        the recovery point are re-validated and cut at the first bad batch.
        ``auto_high_watermark`` keeps the high watermark at the log end (a single-node log).
        ``max_open_files`` bounds the file descriptors its segments hold (default: half the
        process's limit, at most 1,000; see :class:`OpenFiles`); ``open_files`` shares one
        bound among several logs, as a ``LogManager`` does. Running out of descriptors anyway
        raises :class:`StorageError`.
        Cost: O(segments) to list, plus O(bytes above the recovery point) after a crash.
        """
        cfg = build_config(config, overrides)
        io = io or DEFAULT_IO
        pdir = PartitionDir.open(path, io=io, create=not read_only)
        lock = threading.RLock()
        files = (open_files or OpenFiles(max_open_files)).for_owner(lock)
        try:
            if not read_only:
                pdir.lock()
            loaded = LogLoader(pdir, cfg, read_only=read_only, io=io, files=files,
                               auto_high_watermark=auto_high_watermark, clean_shutdown=clean_shutdown).load()
        except BaseException as e:
            pdir.unlock()
            if isinstance(e, OSError) and not isinstance(e, PylogError):
                raise StorageError(e.errno, f"cannot open {pdir.path}: {e.strerror}") from e
            raise
        return cls(pdir, cfg, loaded, read_only=read_only, io=io, auto_high_watermark=auto_high_watermark,
                   lock=lock, files=files)

    def _take_checkpointed_offsets(self) -> None:
        """Read-only logs: log start, recovery point and high watermark as the writer
        checkpointed them, within the segments found."""
        self._empty_start = take_checkpointed_offsets(self._dir, self._segments, self._offsets,
                                                      empty_start=self._empty_start)

    def _ensure_read_only_txn_state(self) -> None:
        """Read-only logs learn open and aborted transactions by replaying producer
        batches: the whole log on the first committed read (O(log bytes)), then only the
        batches appended since (O(new bytes)); from the log start again after a
        truncation or compaction, or once retention passed the replayed part. Aborts
        found are indexed in memory beside the ``.txnindex`` files' entries, and a whole
        replay checks every segment's ``.txnindex`` against them (one that disagrees is
        rebuilt in memory, docs/format/txnindex.md)."""
        if not self.read_only:
            return
        with self._lock:
            whole = self._producers is None or self._txn_replayed_to < self.log_start_offset
            if whole:
                self._producers = ProducerStateManager(self._dir.path, producer_id_expiration_ms=2**62,
                                                       read_only=True)
                self._txn_replayed_to = self.log_start_offset
            end = self.log_end_offset
            found: dict[int, list] = {}
            if self._txn_replayed_to < end:
                for batch in self._batches_between(self._txn_replayed_to, end):
                    aborted = self._producers.apply(batch)
                    if aborted is not None:
                        self._index_aborted_in_memory(aborted, found)
                    self._txn_replayed_to = batch.next_offset  # a failed read resumes here
                self._txn_replayed_to = end
            if whole:
                self._check_txn_indexes(found, end)
            self._update_first_unstable_offset()

    def _index_aborted_in_memory(self, txn, found: dict) -> None:
        base = self._segment_base_of(txn.last_offset)
        entry = txn._replace(last_stable_offset=self._lso_after(txn.last_offset))
        self._segments.get(base).txn_index.add_in_memory(entry)
        found.setdefault(base, []).append(entry)

    def _check_txn_indexes(self, found: dict, end: int) -> None:
        """After a whole replay: trust each segment's ``.txnindex`` that holds exactly the
        aborts found, rebuild (in memory) the others. The last segment may have grown since
        the replay read it."""
        segments = list(self._segments)
        for seg in segments:
            seg.txn_index.verify(found.get(seg.base_offset, []), checked_to=min(seg.next_offset, end),
                                 may_grow=seg is segments[-1])

    def _segment_base_of(self, offset: int) -> int:
        """Base offset of the segment holding ``offset`` (the first one if below all)."""
        return (self._segments.floor(offset) or self._segments.first).base_offset

    def _trusted_txn_index(self, seg: Segment):
        """``seg``'s ``.txnindex``, checked against its ABORT markers on first use and
        rebuilt if it disagrees (docs/format/txnindex.md). O(segment bytes) once per
        segment per open, under the log's lock; O(1) after."""
        index = seg.txn_index
        if not index.trusted:
            with self._lock:
                if not index.trusted:
                    self._txn_checker.check(seg, log_start_offset=self.log_start_offset,
                                            is_current=self._segments.holds,
                                            may_grow=self.read_only and seg is self.active_segment)
        return index

    def _lso_after(self, marker_offset: int) -> int:
        return lso_after(self._producers, self.high_watermark, marker_offset)

    def refresh(self, *, relist: bool = False) -> None:
        """Read-only logs: take in what the writing process did since (appends, rolls,
        retention, truncation, compaction). Reads call it. A poll that finds nothing new
        costs O(1) system calls whatever the number of segments: a ``stat`` of the active
        segment, of the file a roll would create (the next segment starts at the active
        one's next offset), of the directory and of two checkpoints. The directory is
        listed again, O(segments), only when it or the active segment changed otherwise
        than by appends, or ``relist`` asks; moved checkpoints are read again."""
        if not self.read_only:
            return
        with self._lock:
            if self._segments:
                active = self.active_segment
                relist = relist or not active.follow() or os.path.exists(
                    segment_paths(self._dir.path, active.next_offset)[LOG_SUFFIX])
            if relist or self._dir_watch.changed():
                self._relist()
            elif self._checkpoint_watch.changed():
                self._checkpoint_watch.mark()
                self._take_checkpointed_offsets()
            else:
                self._offsets.appended(self.log_end_offset)

    def _relist(self) -> None:
        """Read-only logs: reconcile the segments with a new listing. Segments gone or
        rewritten (truncation, compaction) are dropped or opened anew, and then the
        producer state of committed reads is replayed again. O(segments)."""
        self._checkpoint_watch.mark()
        listed = self._list_live_segments()
        first_listed = min(listed, default=None)
        rewritten = False
        for seg in self._segments:
            base = seg.base_offset
            if listed.get(base) == seg.suffix and (not seg.is_loaded or seg.follow()):
                continue
            rewritten = rewritten or (first_listed is not None and base >= first_listed)
            self._segments.remove(base).close()
        for base, suffix in listed.items():
            if base not in self._segments:
                self._segments.add(self._factory.open(base, suffix))
        if self._segments:
            self.active_segment.follow()  # measured now, so any later rewrite shows
        if rewritten:
            self._producers = None
        self._take_checkpointed_offsets()

    def _list_live_segments(self) -> dict[int, str]:
        """Base offset -> suffix of the live segments. A file gone between the listing and
        its use (a compaction renaming its ``.swap`` files) means the writer moved on:
        list again, up to RELIST_ATTEMPTS times."""
        attempts = 0
        while True:
            self._dir_watch.mark()
            try:
                return dict(live_segment_bases(self._dir.path, read_only=True))
            except OSError as e:
                attempts += 1
                if e.errno != errno.ENOENT or attempts == RELIST_ATTEMPTS:
                    raise

    # ==== basic facts =============================================================================
    @property
    def path(self) -> str:
        """The partition directory (absolute)."""
        return self._dir.path

    @property
    def topic(self) -> str:
        """The topic, from the directory name ``<topic>-<partition>``."""
        return self._dir.topic

    @property
    def partition(self) -> int:
        """The partition number, from the directory name."""
        return self._dir.partition

    @property
    def segments(self) -> list[Segment]:
        """The segments, oldest first."""
        with self._lock:
            return list(self._segments)

    @property
    def active_segment(self) -> Segment:
        """The newest segment, the one appends go to."""
        return self._segments.active

    @property
    def log_end_offset(self) -> int:
        """The next offset to be assigned."""
        if not self._segments:
            return self._empty_start
        return self.active_segment.next_offset

    @property
    def size_bytes(self) -> int:
        """Bytes of all ``.log`` files."""
        with self._lock:
            return self._segments.size_bytes()

    @property
    def log_start_offset(self) -> int:
        """The first readable offset (moved by retention, ``delete_records`` and truncation)."""
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
        self._set_high_watermark(offset, checkpoint=True)

    def _set_high_watermark(self, offset: int, *, checkpoint: bool) -> None:
        """Move the high watermark; ``checkpoint=False`` leaves replication-offset-checkpoint
        to the next flush or checkpoint (replication moves it on every fetch, as Kafka does)."""
        self._check_writable()
        _check_offset(offset, "high_watermark")
        with self._lock:
            self._offsets.set_high_watermark(offset, self.log_end_offset)
            self._update_first_unstable_offset()
            if checkpoint:
                self._offsets.checkpoint_high_watermark(self._dir)

    @property
    def leader_epoch(self) -> int:
        """The partition leader epoch stamped into the batches this log appends as leader:
        the one set, and never below the latest in its ``leader-epoch-checkpoint``."""
        return max(self._leader_epoch, self._epochs.latest_epoch)

    @leader_epoch.setter
    def leader_epoch(self, epoch: int) -> None:
        check_int(epoch, "leader_epoch", (0, INT32_MAX))
        self._leader_epoch = epoch

    def end_offset_for_epoch(self, epoch: int) -> tuple[int, int]:
        """Kafka's OffsetsForLeaderEpoch: ``(the largest epoch <= epoch this log knows, its
        end offset)``: the start of the next epoch, or the log end for the latest; ``(-1, -1)``
        when unknown (pylog/log/leader_epoch.py). O(epochs)."""
        self._check_open()
        check_int(epoch, "epoch", (-1, INT32_MAX))
        with self._lock:
            return self._epochs.end_offset_for(epoch, log_end_offset=self.log_end_offset)

    @property
    def last_stable_offset(self) -> int:
        """min(first offset of an open transaction, high watermark)."""
        if self.read_only:
            self._ensure_read_only_txn_state()
        fuo = self._first_unstable_offset
        high_watermark = self._offsets.high_watermark
        return high_watermark if fuo is None else min(fuo, high_watermark)

    def __repr__(self) -> str:
        return (f"Log({self.path!r}, log_start_offset={self.log_start_offset}, "
                f"log_end_offset={self.log_end_offset}, segments={len(self._segments)})")

    def __enter__(self) -> "Log":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def _check_open(self) -> None:
        if self._closed:
            raise LogClosedError(f"log {self.path} is closed")

    def _check_writable(self) -> None:
        self._check_open()
        if self.read_only:
            raise ReadOnlyError(f"log {self.path} was opened read-only")

    # ==== appends ====================================================================================
    def append(self, records, *, compression: str | None = None, producer_id: int = -1,
               producer_epoch: int = -1, base_sequence: int = -1, is_transactional: bool = False,
               timestamp: int | None = None) -> AppendInfo:
        """Append records as one batch (several if one would pass ``max_message_bytes``),
        atomically: all or nothing is visible.

        ``records``: :class:`Record`\\ s, ``bytes`` values or ``(key, value)`` tuples.
        Offsets are assigned from the log end. With ``producer_id``/``producer_epoch``/
        ``base_sequence`` the append is idempotent: an exact retry returns the original
        offsets and writes nothing. Durable after the next flush (see ``flush_messages``).
        Options outside their fields raise :class:`InvalidArgumentError`, records that cannot
        be encoded :class:`InvalidRecordError`, both before anything is written.
        Cost: O(bytes) to encode, one write.
        """
        self._check_writable()
        check_records_iterable(records)
        check_append_options(compression=compression, producer_id=producer_id, producer_epoch=producer_epoch,
                             base_sequence=base_sequence, is_transactional=is_transactional, timestamp=timestamp)
        records = list(records)
        if not records:
            raise InvalidArgumentError("cannot append an empty list of records")
        codec = self.config.target_compression or compression or "none"
        with self._lock:
            now = now_ms()
            chunks = self._encode_chunks(records, codec, now, timestamp, producer_id, producer_epoch,
                                         base_sequence, is_transactional)
            return self._append_encoded(b"".join(chunks) if len(chunks) > 1 else chunks[0],
                                        from_client=True, now=now)

    def _encode_chunks(self, records, codec, now, timestamp, producer_id, producer_epoch, base_sequence,
                       is_transactional) -> list[bytes]:
        base = self.log_end_offset
        log_append = self.config.message_timestamp_type == "LogAppendTime"
        ts_type = "LogAppendTime" if log_append else "CreateTime"
        if self.config.compact:
            for r in records:
                if as_record(r).key is None:
                    raise InvalidRecordError("compacted topic cannot accept a record without a key")
        out, pending = [], [records]
        seq = base_sequence
        while pending:
            group = pending.pop(0)
            raw = encode_batch_buffer(group, base_offset=base, compression=codec, timestamp_type=ts_type,
                               timestamp=now if timestamp is None else timestamp, log_append_time=now,
                               producer_id=producer_id, producer_epoch=producer_epoch, base_sequence=seq,
                               partition_leader_epoch=self.leader_epoch, is_transactional=is_transactional)
            if len(raw) > self.config.max_message_bytes:
                if len(group) == 1:
                    raise RecordTooLargeError(
                        f"a record of {len(raw)} bytes (as a batch) exceeds max_message_bytes "
                        f"{self.config.max_message_bytes}")
                half = len(group) // 2
                pending[:0] = [group[:half], group[half:]]
                continue
            out.append(raw)
            base += len(group)
            if seq >= 0:
                seq = (seq + len(group)) % (2**31)
        return out

    def append_batches(self, raw) -> AppendInfo:
        """Append pre-encoded Kafka batches (magic 2), assigning offsets from the log end.

        Each batch's CRC is checked; control batches are refused, as are batches whose
        offset range does not match their record count. Cost: O(bytes).
        """
        self._check_writable()
        data = bytearray(raw)
        batches = _parse_client_batches(data, self.config.max_message_bytes)
        with self._lock:
            now = now_ms()
            target = self.config.target_compression
            if target is not None and any(b.compression != target for b in batches):
                data = bytearray(b"".join(_recompress(b, target) for b in batches))
                batches = list(decode_batches(data))
            offset = self.log_end_offset
            for b in batches:
                set_base_offset(data, b.position, offset)
                set_partition_leader_epoch(data, b.position, self.leader_epoch)
                if self.config.message_timestamp_type == "LogAppendTime":
                    set_log_append_time(data, b.position, b.size, now)
                offset += b.last_offset_delta + 1
            return self._append_encoded(bytes(data), from_client=True, now=now)

    def append_as_follower(self, raw) -> AppendInfo:
        """Append batches keeping their offsets (replication, copying a log). Offsets must
        be increasing and not below the log end; CRCs are checked; sizes are not limited by
        ``max_message_bytes``. Cost: O(bytes)."""
        self._check_writable()
        data = bytes(raw)
        batches = _whole_batches(data)
        with self._lock:
            expected = self.log_end_offset
            for b in batches:
                b.ensure_valid()
                if b.base_offset < expected or b.last_offset < b.base_offset:
                    raise InvalidOffsetError(
                        f"follower batch at offset {b.base_offset} is below the expected next offset {expected}")
                expected = b.last_offset + 1
            return self._append_encoded(data, from_client=False, now=now_ms())

    def _append_encoded(self, data: bytes, *, from_client: bool, now: int) -> AppendInfo:
        """Write whole batches (offsets final) to the active segment, rolling first if needed."""
        batches = list(decode_batches(data))
        first, last = batches[0], batches[-1]
        first_offset = first.base_offset if first.magic == 2 else first.last_offset
        max_ts, offset_of_max = -1, last.last_offset
        num_records = 0
        for b in batches:
            if b.max_timestamp > max_ts:
                max_ts, offset_of_max = b.max_timestamp, b.last_offset
            num_records += b.record_count if b.magic == 2 else 1
        if len(data) > self.config.segment_bytes:
            raise RecordTooLargeError(
                f"append of {len(data)} bytes exceeds segment_bytes {self.config.segment_bytes}")
        if self._producers is not None and (first.magic == 2 and first.producer_id >= 0 or len(batches) > 1):
            duplicate = self._producers.validate(batches, from_client=from_client)
            if duplicate is not None:
                batch, (first_offset, last_offset) = duplicate
                return AppendInfo(first_offset, last_offset, batch.max_timestamp, -1, batch.record_count, 0,
                                  duplicate=True)
        self._maybe_roll(len(data), max_ts, first_offset, last.last_offset, now)
        high_watermark, recovery_point = self.high_watermark, self.recovery_point
        self.active_segment.append(last.last_offset, max_ts, offset_of_max, data)
        try:
            self._epochs.assign_batches(batches)
            if self._producers is not None:
                self._producers_update(batches)
            self._offsets.appended(self.log_end_offset)
            self._update_first_unstable_offset()
            self._maybe_flush(now)
        except StorageError:
            self._undo_append(batches, first_offset, high_watermark, recovery_point)
            raise
        log_append = last.magic == 2 and last.timestamp_type == "LogAppendTime"
        return AppendInfo(first_offset, last.last_offset, max_ts, max_ts if log_append else -1,
                          num_records, len(data))

    def _undo_append(self, batches, first_offset: int, high_watermark: int, recovery_point: int) -> None:
        """Take back an append whose transaction index or flush failed: the log is as
        before it (an unflushed cut; a crash may bring the unacknowledged batches back)."""
        self.active_segment.truncate_to(first_offset)
        self._offsets.restored(high_watermark=high_watermark, recovery_point=recovery_point,
                               log_end_offset=self.log_end_offset)
        if self._producers is not None and any(b.magic == 2 and b.producer_id >= 0 for b in batches):
            self._producers.truncate_and_reload(self.log_start_offset, self.log_end_offset,
                                                self._segments.bases(), self._batches_between, now_ms())
        self._update_first_unstable_offset()
        self._epochs.truncate_from_end(first_offset)  # last: a failed write leaves only the file stale

    def _producers_update(self, batches) -> None:
        for b in batches:
            aborted = self._producers.apply(b)
            if aborted is not None:
                self._index_aborted(aborted._replace(last_stable_offset=self._lso_after(aborted.last_offset)))

    def _index_aborted(self, txn) -> None:
        """Add ``txn`` to the active segment's ``.txnindex``, checked first if this open did
        not write it (a check that replayed the new marker has indexed it already)."""
        index = self.active_segment.txn_index
        if not index.trusted:
            self._trusted_txn_index(self.active_segment)
            if any(t.last_offset >= txn.last_offset for t in index.entries()):
                return
        index.append(txn)

    def _update_first_unstable_offset(self) -> None:
        if self._producers is None:
            self._first_unstable_offset = None
            return
        fuo = self._producers.first_unstable_offset(None if self.auto_high_watermark else self.high_watermark)
        self._first_unstable_offset = None if fuo is None else max(fuo, self.log_start_offset)

    # ==== rolling and flushing =====================================================================
    def _maybe_roll(self, append_bytes: int, max_ts: int, first_offset: int, last_offset: int, now: int) -> None:
        seg = self.active_segment
        if seg.should_roll(append_bytes=append_bytes, max_timestamp_in_append=max_ts, last_offset=last_offset,
                           segment_bytes=self.config.segment_bytes, max_segment_ms=self.config.max_segment_ms,
                           now_ms=now):
            self.roll(max(first_offset, self.log_end_offset))

    def roll(self, new_base_offset: int | None = None) -> Segment:
        """Start a new active segment (at the log end unless given). The old one gets its
        final time-index entry and trimmed indexes, and is flushed: everything before the
        new segment is durable when this returns."""
        self._check_writable()
        with self._lock:
            old = self.active_segment
            base = max(new_base_offset if new_base_offset is not None else 0, self.log_end_offset)
            if base == old.base_offset and old.size_bytes == 0:
                return old
            old.on_become_inactive()
            if self._producers is not None:
                self._producers.take_snapshot(base)
            self._flush_to(self.log_end_offset)  # a failure up to here leaves the old segment active
            new = self._factory.create(base)
            self._segments.add(new)
            self._prune_snapshots()  # the old active segment is now one of the last two
            return new

    def _maybe_flush(self, now: int) -> None:
        unflushed = self.log_end_offset - self.recovery_point
        if unflushed >= self.config.flush_messages or now - self._last_flush_ms >= self.config.flush_ms:
            self.flush()

    def flush(self) -> None:
        """fsync every segment above the recovery point (log and indexes), then move the
        recovery point to the log end and checkpoint it. On return every append made so far
        is durable."""
        self._check_writable()
        with self._lock:
            self._flush_to(self.log_end_offset)

    def _flush_to(self, offset: int) -> None:
        if offset <= self.recovery_point and offset != self.log_end_offset:
            return
        active = self.active_segment
        for seg in self._segments.from_floor(self.recovery_point):
            if seg.base_offset >= offset and seg is not active:
                break
            seg.flush()
        self.io.fsync_dir(self._dir.path)
        self._offsets.flushed_to(offset, self.log_end_offset)
        self._last_flush_ms = now_ms()
        self._write_checkpoints()
        self._prune_snapshots()

    def _prune_snapshots(self) -> None:
        if self._producers is not None:
            self._producers.delete_snapshots_below(self._min_snapshot_offset_to_retain())

    def _min_snapshot_offset_to_retain(self) -> int:
        """Kafka's bound after a recovery-point checkpoint: snapshots of the last two segments
        stay (a truncation into either reloads from them), and none at or above the segment
        below the recovery point goes (recovery starts there)."""
        active = self._segments.active
        two_segments = (self._segments.lower(active.base_offset) or active).base_offset
        below_rp = self._segments.lower(self.recovery_point)
        return min(below_rp.base_offset if below_rp is not None else self.recovery_point, two_segments)

    def _write_checkpoints(self) -> None:
        self._offsets.checkpoint(self._dir)

    # ==== reads =======================================================================================
    def read(self, offset: int, max_bytes: int = 1 << 20, *, isolation: str = "uncommitted",
             max_offset: int | None = None, min_one_message: bool = True) -> FetchData:
        """Fetch whole batches from ``offset`` on, at most ``max_bytes`` (but at least one
        batch when ``min_one_message``), bounded by the log end (``"uncommitted"``), the
        high watermark (``"high_watermark"``) or the last stable offset (``"committed"``),
        and by ``max_offset`` (exclusive) when given.

        Raises :class:`OffsetOutOfRangeError` below the log start or past the log end;
        at the bound the fetch is empty. A read-only log first takes in what its writer
        did since (:meth:`refresh`). Cost: O(log segments + log index entries +
        index_interval_bytes); the bytes are not read until asked for.
        """
        self._check_open()
        _check_offset(offset, "offset")
        check_int(max_bytes, "max_bytes", OFFSET_RANGE)
        check_choice(isolation, "isolation", ISOLATIONS)
        if not self.read_only:
            return self._read_segments(offset, max_bytes, isolation, max_offset, min_one_message)
        attempts = 0
        while True:
            try:
                self.refresh(relist=attempts > 0)  # again: a file was deleted or replaced since the listing
                return self._read_segments(offset, max_bytes, isolation, max_offset, min_one_message)
            except OSError as e:
                attempts += 1
                if e.errno not in (errno.ENOENT, errno.ESTALE) or attempts == RELIST_ATTEMPTS:
                    raise

    def _read_segments(self, offset: int, max_bytes: int, isolation: str, max_offset: int | None,
                       min_one_message: bool) -> FetchData:
        if isolation == "committed" and self.read_only:
            self._ensure_read_only_txn_state()
        with self._lock:
            leo = self.log_end_offset
            start = self.log_start_offset
            bound = (leo if isolation == "uncommitted" else self.high_watermark if isolation == "high_watermark"
                     else self.last_stable_offset)
            if max_offset is not None:
                _check_offset(max_offset, "max_offset")
                bound = min(bound, max_offset)
            candidates = self._segments.from_floor(offset)
        if offset < start or offset > leo:
            raise OffsetOutOfRangeError(
                f"offset {offset} is outside the log [{start}, {leo}] of {self.path}")
        if offset >= bound:
            return self._stamp(FetchData(offset, isolation=isolation), isolation)
        for seg in candidates:
            header = seg.translate_offset(offset)
            if header is None:
                continue
            end_position = self._bound_position(seg, bound)
            if header.position >= end_position:
                break
            limit = end_position - header.position
            size = min(limit, max(max_bytes, header.size) if min_one_message else max_bytes)
            if size <= 0:
                break
            self._segments.touch(seg)
            fetch = FetchData(offset, handle=seg.log.handle(), position=header.position, size_bytes=size,
                              path=seg.log_path, bound=bound, isolation=isolation,
                              offset_range=(seg.base_offset, self._next_base_offset(seg)))
            if isolation == "committed":
                fetch.aborted_transactions = self._collect_aborted(seg, offset, header.position + size)
            return self._stamp(fetch, isolation)
        return self._stamp(FetchData(offset, isolation=isolation), isolation)

    def _stamp(self, fetch: FetchData, isolation: str) -> FetchData:
        fetch.high_watermark = self.high_watermark
        fetch.log_start_offset = self.log_start_offset
        if isolation == "committed" or not self.read_only:  # a read-only log learns it by a replay
            fetch.last_stable_offset = self.last_stable_offset
        if isolation == "committed" and fetch.aborted_transactions is None:
            fetch.aborted_transactions = []
        return fetch

    def _bound_position(self, seg: Segment, bound: int) -> int:
        """Byte position in ``seg`` where offsets >= ``bound`` begin (its size if later)."""
        if bound >= seg.next_offset:
            return seg.size_bytes
        for h in seg.headers(seg._safe_lookup(bound)[1]):
            if h.base_offset >= bound or (h.last_offset >= bound and h.magic < 2):
                return h.position
            if h.last_offset >= bound:
                return h.position + h.size
        return seg.size_bytes

    def _next_base_offset(self, seg: Segment) -> int | None:
        """Base offset of the segment after ``seg``: where its offsets must end (None for the last)."""
        with self._lock:
            later = self._segments.higher(seg.base_offset)
            return None if later is None else later.base_offset

    def _collect_aborted(self, seg: Segment, offset: int, end_position: int) -> list:
        upper = self.log_end_offset
        out = []
        with self._lock:
            later = self._segments.from_floor(seg.base_offset)
        for s in later:
            found, complete = self._trusted_txn_index(s).collect(offset, upper)
            out.extend(found)
            if complete:
                break
        return out

    def records(self, start_offset: int | None = None, end_offset: int | None = None, *,
                isolation: str = "uncommitted", max_bytes: int = 4 << 20):
        """Iterate data records in ``[start_offset, end_offset)`` (defaults: the whole log).
        Reads ``max_bytes`` at a time."""
        offset = self.log_start_offset if start_offset is None else max(start_offset, self.log_start_offset)
        while True:
            fetch = self.read(offset, max_bytes, isolation=isolation, max_offset=end_offset)
            if fetch.size_bytes == 0:
                return
            for r in fetch.records():
                yield r
            nxt = fetch.next_offset
            if nxt <= offset:
                return
            offset = nxt

    def _batches_between(self, start: int, end: int):
        """Batches whose offsets overlap [start, end) (for producer-state replay)."""
        with self._lock:
            segs = self._segments.from_floor(start)
        yield from batches_from(segs, start, end)

    def offset_for_timestamp(self, timestamp: int) -> int | None:
        """The earliest offset whose record timestamp is >= ``timestamp`` (Kafka's
        ListOffsets): -2 means the log start, -1 the log end, -3 the record with the
        largest timestamp. None when no record is that late. O(segments + index_interval)."""
        self._check_open()
        check_int(timestamp, "timestamp", (MAX_TIMESTAMP, INT64_MAX))
        if timestamp == EARLIEST_TIMESTAMP:
            return self.log_start_offset
        if timestamp == LATEST_TIMESTAMP:
            return self.log_end_offset
        segs = self.segments
        if timestamp == MAX_TIMESTAMP:
            best = max(segs, key=lambda s: s.max_timestamp, default=None)
            if best is None or best.max_timestamp < 0:
                return None
            found = best.find_offset_by_timestamp(best.max_timestamp, self.log_start_offset)
            return None if found is None else found[0]
        for seg in segs:
            if seg.next_offset <= self.log_start_offset or seg.largest_timestamp() < timestamp:
                continue
            found = seg.find_offset_by_timestamp(timestamp, self.log_start_offset)
            if found is not None:
                return found[0]
        return None

    # ==== truncation and deletion ========================================================================
    def truncate_to(self, offset: int) -> None:
        """Remove every offset >= ``offset`` (whole batches: the batch holding ``offset``
        goes). Durable after the next flush; the recovery point moves down with it."""
        self._check_writable()
        _check_offset(offset, "offset")
        with self._lock:
            if offset >= self.log_end_offset:
                return
            if offset < self.active_segment.base_offset and offset <= self._segments.first_base_offset:
                self._truncate_fully_and_start_at(offset)
            else:
                for base in self._segments.bases():
                    if base > offset:
                        self._delete_segment(self._segments.remove(base), delay=False)
                seg = self.active_segment
                seg.truncate_to(offset)
                seg.offset_index.resize(self.config.segment_index_bytes)
                seg.time_index.resize(self.config.segment_index_bytes)
            leo = self.log_end_offset
            self._epochs.truncate_from_end(leo)
            self._offsets.truncated(leo)
            if self._producers is not None:
                self._producers.truncate_and_reload(self.log_start_offset, leo, self._segments.bases(),
                                                    self._batches_between, now_ms())
            self._update_first_unstable_offset()
            self.active_segment.flush()
            self._write_checkpoints()

    def _truncate_fully_and_start_at(self, offset: int) -> None:
        for base in self._segments.bases():
            self._delete_segment(self._segments.remove(base), delay=False)
        self._segments.add(self._factory.create(offset))
        self._offsets.started_at(offset)
        self._epochs.clear()

    def delete_records(self, before_offset: int) -> int:
        """Move the log start offset to ``before_offset`` (Kafka's DeleteRecords): older
        offsets become unreadable, and whole segments below it are deleted. Must not pass
        the high watermark. Persisted before returning. Returns the new log start offset."""
        self._check_writable()
        _check_offset(before_offset, "before_offset")
        with self._lock:
            if before_offset > self.high_watermark:
                raise OffsetOutOfRangeError(
                    f"cannot delete records before {before_offset}: past the high watermark {self.high_watermark}")
            if before_offset <= self.log_start_offset:
                return self.log_start_offset
            self._offsets.delete_records_before(before_offset, self.log_end_offset)
            self._epochs.truncate_from_start(self.log_start_offset)
            self.delete_segments([s for s in self.segments[:-1] if s.next_offset <= before_offset])
            self._write_checkpoints()
            return self.log_start_offset

    def delete_segments(self, segments: list[Segment]) -> list[int]:
        """Remove whole inactive segments (oldest first): they are renamed ``.deleted`` at
        once and their files removed after ``file_delete_delay_ms``; a fetch that holds one
        still reads it. Moves the log start offset past them. Returns their base offsets."""
        self._check_writable()
        removed = []
        with self._lock:
            active = self.active_segment
            for seg in segments:
                if seg is active or not self._segments.holds(seg):
                    continue
                self._segments.remove(seg.base_offset)
                self._delete_segment(seg, delay=True)
                removed.append(seg.base_offset)
            if removed:
                first = self._segments.first_base_offset
                self._offsets.advance_log_start(first, self.log_end_offset)
                self._epochs.truncate_from_start(self.log_start_offset)
                if self._producers is not None:
                    self._producers.delete_snapshots_below(first)
                self._write_checkpoints()
        return removed

    def _delete_segment(self, seg: Segment, *, delay: bool) -> None:
        delete_segment(seg, delay_ms=self.config.file_delete_delay_ms if delay else 0)

    def replace_segments(self, new_segments: list[Segment], old_segments: list[Segment]) -> None:
        """Swap cleaned segments in for ``old_segments`` (Kafka's replace protocol).

        ``new_segments`` were written with the ``.cleaned`` suffix and flushed. Each is renamed
        ``.swap`` (from here a crash completes the swap on the next open), the old segments
        are renamed ``.deleted`` and dropped from the map, and the new ones lose their suffix.
        A crash at any step leaves a log that opens with nothing lost.
        """
        from pylog.layout import SWAP_SUFFIX
        self._check_writable()
        with self._lock:
            for seg in new_segments:
                seg.change_suffix(SWAP_SUFFIX)
            self.io.fsync_dir(self._dir.path)
            failpoints.hit("swap.renamed")
            for seg in old_segments:
                if self._segments.holds(seg):
                    self._segments.remove(seg.base_offset)
                self._delete_segment(seg, delay=True)
            failpoints.hit("swap.old-deleted")
            for seg in new_segments:
                seg.change_suffix("")
                self._segments.add(seg)
            self.io.fsync_dir(self._dir.path)

    def new_cleaned_segment(self, base_offset: int) -> Segment:
        """An empty segment written with the ``.cleaned`` suffix (input to ``replace_segments``)."""
        return self._factory.cleaned(base_offset)

    def expire_producers(self, now_ms: int | None = None) -> list[int]:
        """Forget producers idle for ``producer_id_expiration_ms`` (judged by their last
        batch's timestamp) that have no open transaction, as Kafka's periodic check does;
        returns their ids. A later batch from one of them starts afresh (sequence 0 is
        accepted, a duplicate is no longer recognised). In memory until the next snapshot."""
        self._check_writable()
        with self._lock:
            if self._producers is None:
                return []
            return self._producers.remove_expired(now_ms)

    def enforce_retention(self, now_ms: int | None = None) -> list[int]:
        """Apply the delete policy (``retention_ms``, ``retention_bytes``, log start
        offset breach); returns the base offsets of the segments removed. Idempotent."""
        from pylog.retention import enforce_retention
        return enforce_retention(self, now_ms)

    def compact(self, now_ms: int | None = None, *, force: bool = False):
        """Compact the log (keep the latest record per key) if its policy includes compact;
        ``force`` ignores ``min_cleanable_dirty_ratio``. Returns a ``CleanResult``."""
        from pylog.retention import compact
        return compact(self, now_ms, force=force)

    # ==== idempotence and transactions ===================================================================
    def append_txn_marker(self, producer_id: int, producer_epoch: int, commit: bool,
                          coordinator_epoch: int = 0) -> AppendInfo:
        """Write a COMMIT or ABORT control batch ending the producer's open transaction.
        ``producer_id`` and ``producer_epoch`` must name a producer (>= 0), ``commit`` be a
        bool; else :class:`InvalidArgumentError` and nothing is written."""
        from pylog.record.encode import encode_control_batch
        self._check_writable()
        check_txn_marker(producer_id, producer_epoch, commit, coordinator_epoch)
        with self._lock:
            raw = encode_control_batch(1 if commit else 0, producer_id=producer_id, producer_epoch=producer_epoch,
                                       coordinator_epoch=coordinator_epoch, base_offset=self.log_end_offset,
                                       partition_leader_epoch=self.leader_epoch)
            return self._append_encoded(raw, from_client=False, now=now_ms())

    # ==== invariants ==================================================================================
    def check(self, *, deep: bool = True) -> list[str]:
        """Every invariant violation found (empty when clean): batch CRCs (``deep``),
        offsets increasing within and across segments, index entries pointing at batch
        starts holding their offsets, time index monotonic, offsets within [log start, end].
        Shared with ``pylog verify``. Cost: reads every byte when ``deep``."""
        from pylog.check import check_log
        return check_log(self, deep=deep)

    # ==== closing ======================================================================================
    def close(self) -> None:
        """Flush everything, write the final time-index entry, trim indexes, snapshot
        producer state, checkpoint, and release the writer lock; the last writer of the log
        dir to close cleanly writes its clean-shutdown marker (pylog/log_dir.py). Idempotent."""
        if self._closed:
            return
        with self._lock:
            clean = False
            try:
                if not self.read_only:
                    try:
                        self.active_segment.on_become_inactive()
                    finally:  # the data is made durable even if its last index entry fails
                        self._flush_to(self.log_end_offset)
                    if self._producers is not None:
                        self._producers.take_snapshot(self.log_end_offset)
                    clean = True
            finally:
                self._closed = True
                self._release_all()
                self._dir.unlock(clean=clean)

    def _release_all(self) -> None:
        self._segments.close_all()


def _check_offset(value, name: str) -> None:
    check_int(value, name, OFFSET_RANGE, error=InvalidOffsetError)


def _whole_batches(data) -> list:
    """The batches of appended bytes; bytes that end inside a batch, or hold none, are refused."""
    try:
        batches = list(decode_batches(data))
    except IncompleteBatchError as e:
        raise CorruptRecordError(f"appended bytes end inside a batch: {e.reason}", position=e.position) from None
    if not batches:
        raise InvalidRecordError("nothing to append: no batch in the given bytes")
    return batches


def _parse_client_batches(data: bytearray, max_message_bytes: int) -> list[RecordBatch]:
    batches = _whole_batches(data)
    for b in batches:
        if b.magic != 2:
            raise InvalidRecordError(f"pylog appends magic-2 batches only; found magic {b.magic}",
                                     position=b.position)
        b.ensure_valid()
        if b.is_control:
            raise InvalidRecordError("clients may not append control batches", position=b.position)
        if b.record_count <= 0 or b.last_offset_delta + 1 != b.record_count:
            raise InvalidRecordError(
                f"batch offset range ({b.last_offset_delta + 1}) does not match its record count "
                f"({b.record_count})", position=b.position)
        if b.size > max_message_bytes:
            raise RecordTooLargeError(f"batch of {b.size} bytes exceeds max_message_bytes {max_message_bytes}")
    return batches


def _recompress(batch: RecordBatch, codec: str) -> bytes:
    recs = batch.records()
    return encode_batch(recs, compression=codec, timestamp_type=batch.timestamp_type,
                        log_append_time=batch.max_timestamp, producer_id=batch.producer_id,
                        producer_epoch=batch.producer_epoch, base_sequence=batch.base_sequence,
                        is_transactional=batch.is_transactional)


