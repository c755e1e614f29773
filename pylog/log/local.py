"""``LocalLog``: the physical log of one partition directory (Kafka's ``LocalLog``): its
segments and what is done to their files: append bytes, roll, flush, truncate, delete,
swap cleaned segments in, plan reads, walk batches, keep the ``.txnindex`` files honest,
and, for a read-only log, follow what its writer does to the directory.

It knows no producer, offset checkpoint or high watermark: ``Log`` composes it with
``LogOffsets`` and ``ProducerStateManager`` and passes in what it needs. Not thread-safe by
contract: ``Log`` calls it under its lock, except for the read path, which takes that lock
itself only to look segments up, so that reading a file never blocks an append.
"""

from __future__ import annotations

import os
import warnings
import weakref

from pylog import failpoints
from pylog.config import LogConfig
from pylog.errors import LogClosedError, OffsetOutOfRangeError, ReadOnlyError
from pylog.io import FileIO
from pylog.layout import LEADER_EPOCH_CHECKPOINT, SWAP_SUFFIX
from pylog.log.leader_epoch import LeaderEpochFileCache, read_writers_epochs
from pylog.log.loader import LoadedLog, live_segment_bases, take_checkpointed_offsets, while_files_vanish
from pylog.log.offsets import LogOffsets
from pylog.log.segments import DelayedDeletes, batches_before, batches_from, delete_segment
from pylog.record.encode import now_ms
from pylog.segment.fetch import FetchData, NextRead
from pylog.segment.file import check_offsets_follow
from pylog.segment.segment import Segment
from pylog.stat_watch import StatWatch
from pylog.txn_check import TxnIndexChecker

EARLIEST_TIMESTAMP = -2
LATEST_TIMESTAMP = -1
MAX_TIMESTAMP = -3
#: Kafka's ListOffsets for tiered logs: the first local offset, and the last tiered one.
EARLIEST_LOCAL_TIMESTAMP = -4
LATEST_TIERED_TIMESTAMP = -5


class LocalLog:
    """The segments of one partition and the operations on their files (Kafka's
    ``LocalLog``; it leaves out the recovery point and the offset metadata that Kafka's
    keeps, which are ``LogOffsets``' here). Takes over what ``LogLoader`` opened; the
    lock is the ``Log``'s."""

    def __init__(self, loaded: LoadedLog, config: LogConfig, io: FileIO, *, read_only: bool):
        self.path = loaded.pdir.path
        self.config = config
        self.io = io
        self.read_only = read_only
        self.segments = loaded.segments
        self.closed = False
        self._dir = loaded.pdir
        self._lock = loaded.lock
        self._factory = loaded.factory
        self._txn_checker = TxnIndexChecker(self.path, self.batches_between)
        # read-only logs: the log end while there is no segment, and what refresh() watches
        self._empty_start = loaded.empty_start
        self._dir_watch = loaded.dir_watch
        self._checkpoint_watch = loaded.checkpoint_watch
        self._epoch_watch = StatWatch([os.path.join(self.path, LEADER_EPOCH_CHECKPOINT)]) if read_only else None
        self._epochs_stale = True  # the directory was listed since follow_epochs() last looked
        # the checkpoints are replaced by rename in the log dir: its stamp moves with them
        self._log_dir_watch = StatWatch([loaded.pdir.log_dir]) if read_only else None
        self._deletes = DelayedDeletes()
        self._last_fetch = None  # read-only logs: (segment, NextRead) of the last fetch planned

    def check_open(self) -> None:
        """:class:`LogClosedError` once closed."""
        if self.closed:
            raise LogClosedError(f"log {self.path} is closed")

    def check_writable(self) -> None:
        """:class:`LogClosedError` once closed, :class:`ReadOnlyError` when opened read-only."""
        self.check_open()
        if self.read_only:
            raise ReadOnlyError(f"log {self.path} was opened read-only")

    @property
    def active(self) -> Segment:
        """The newest segment, the one appends go to."""
        return self.segments.active

    @property
    def log_end_offset(self) -> int:
        """The next offset to be assigned."""
        return self.segments.active.next_offset if self.segments else self._empty_start

    # ==== writes ====================================================================================
    def should_roll(self, *, append_bytes: int, max_timestamp: int, last_offset: int, now: int) -> bool:
        """Whether an append of ``append_bytes`` must go to a new segment (size, age, index
        space or relative offsets of the active one, Kafka's rule)."""
        return self.active.should_roll(append_bytes=append_bytes, max_timestamp_in_append=max_timestamp,
                                       last_offset=last_offset, segment_bytes=self.config.segment_bytes,
                                       max_segment_ms=self.config.max_segment_ms, now_ms=now)

    def append(self, data, *, last_offset: int, max_timestamp: int, offset_of_max_timestamp: int) -> None:
        """Write whole batches (offsets final) to the active segment. Not durable until :meth:`flush`."""
        self.active.append(last_offset, max_timestamp, offset_of_max_timestamp, data)

    def roll(self, base_offset: int) -> Segment:
        """Add a new empty active segment at ``base_offset`` (the caller finished the old one)."""
        segment = self._factory.create(base_offset)
        self.segments.add(segment)
        return segment

    def flush(self, recovery_point: int) -> None:
        """fsync every segment from the one holding ``recovery_point`` on, then the directory."""
        for seg in self.segments.from_floor(recovery_point):
            seg.flush()
        self.io.fsync_dir(self.path)

    def segments_below(self, offset: int) -> list:
        """The segments wholly below ``offset`` (the next one starts at or below it): what a
        log start moved to ``offset`` deletes. O(segments)."""
        segments = list(self.segments)
        return [s for s, nxt in zip(segments, segments[1:]) if nxt.base_offset <= offset]

    def min_snapshot_offset_to_retain(self, recovery_point: int) -> int:
        """Kafka's bound after a recovery-point checkpoint: snapshots of the last two segments
        stay (a truncation into either reloads from them), and none at or above the segment
        below the recovery point goes (recovery starts there)."""
        active = self.segments.active
        two_segments = (self.segments.lower(active.base_offset) or active).base_offset
        below_rp = self.segments.lower(recovery_point)
        return min(below_rp.base_offset if below_rp is not None else recovery_point, two_segments)

    def truncate_to(self, offset: int) -> bool:
        """Remove every offset >= ``offset`` (whole batches). True when nothing below it was
        left: the log then starts afresh, empty, at ``offset``. Durable after a flush."""
        if offset < self.active.base_offset and offset <= self.segments.first_base_offset:
            self.truncate_fully_and_start_at(offset)
            return True
        for base in self.segments.bases():
            if base > offset:
                delete_segment(self.segments.remove(base), delay_ms=0)
        seg = self.active
        seg.truncate_to(offset)
        seg.offset_index.resize(self.config.segment_index_bytes)
        seg.time_index.resize(self.config.segment_index_bytes)
        return False

    def truncate_fully_and_start_at(self, offset: int) -> None:
        """Delete every segment and start afresh with one empty segment at ``offset``
        (Kafka's ``truncateFullyAndStartAt``). The files go at once; durable after a flush."""
        for base in self.segments.bases():
            delete_segment(self.segments.remove(base), delay_ms=0)
        self.roll(offset)

    def delete_segments(self, segments: list[Segment]) -> list[int]:
        """Remove whole inactive segments: renamed ``.deleted`` at once, their files removed
        after ``file_delete_delay_ms`` (a fetch that holds one still reads it). Segments no
        longer in the log, and the active one, are left alone. Returns the base offsets removed."""
        removed = []
        active = self.active
        for seg in segments:
            if seg is active or not self.segments.holds(seg):
                continue
            self._deletes.delete(self.segments.remove(seg.base_offset), delay_ms=self.config.file_delete_delay_ms)
            removed.append(seg.base_offset)
        return removed

    def new_cleaned_segment(self, base_offset: int) -> Segment:
        """An empty segment written with the ``.cleaned`` suffix (input to ``replace_segments``)."""
        return self._factory.cleaned(base_offset)

    def replace_segments(self, new_segments: list[Segment], old_segments: list[Segment]) -> None:
        """Swap cleaned segments in for ``old_segments`` (Kafka's replace protocol).

        ``new_segments`` were written with the ``.cleaned`` suffix and flushed. Each is renamed
        ``.swap`` (from here a crash completes the swap on the next open), the old segments
        are renamed ``.deleted`` and dropped from the map, and the new ones lose their suffix.
        A crash at any step leaves a log that opens with nothing lost.
        """
        for seg in new_segments:
            seg.change_suffix(SWAP_SUFFIX)
        self.io.fsync_dir(self.path)
        failpoints.hit("swap.renamed")
        for seg in old_segments:
            if self.segments.holds(seg):
                self.segments.remove(seg.base_offset)
            self._deletes.delete(seg, delay_ms=self.config.file_delete_delay_ms)
        failpoints.hit("swap.old-deleted")
        for seg in new_segments:
            seg.change_suffix("")
            self.segments.add(seg)
        self.io.fsync_dir(self.path)

    def close(self) -> None:
        """Release every segment's files and remove those of deleted segments still
        waiting for ``file_delete_delay_ms`` (``DelayedDeletes``); the log refuses use from
        now on."""
        self.closed = True
        try:
            self._deletes.finish()
        finally:
            self.segments.close_all()

    def update_config(self, config) -> None:
        """Settings from now on: for rolls, deletions and the segments made from here
        (those made keep their index sizes and interval)."""
        self.config = self._factory.config = config

    # ==== reads =====================================================================================
    def read(self, offset: int, limits, *, max_bytes: int, isolation: str, min_one_message: bool,
             refresh) -> FetchData:
        """Plan a fetch of whole batches from ``offset``: under the lock, ``limits()`` gives
        (log start, bound) and the segments from the one holding ``offset`` are looked up;
        the files are then read without the lock. Empty when nothing is below the bound;
        :class:`OffsetOutOfRangeError` outside [log start, log end]. ``refresh(relist=...)``
        runs first (a read-only log following its writer), and again, listing the
        directory, while files vanish under the read (up to RELIST_ATTEMPTS times).
        Cost: O(log segments + log index entries + index_interval_bytes); no record is read.
        A read-only log's read from where its last fetch ended reads one batch header instead."""
        def plan(attempt: int) -> FetchData:
            refresh(relist=attempt > 1)  # again: a file was deleted or replaced since the listing
            with self._lock:
                leo = self.log_end_offset
                start, bound = limits()
                candidates = self.segments.from_floor(offset)
            if offset < start or offset > leo:
                raise OffsetOutOfRangeError(f"offset {offset} is outside the log [{start}, {leo}] of {self.path}")
            fetch = None if offset >= bound else self._plan_read(
                offset, candidates, max_bytes=max_bytes, bound=bound, isolation=isolation,
                min_one_message=min_one_message, log_start_offset=start)
            if fetch is None:  # nothing below the bound: an empty fetch
                fetch = FetchData(offset, isolation=isolation,
                                  aborted_transactions=[] if isolation == "committed" else None)
            return fetch
        return while_files_vanish(plan, read_only=self.read_only)

    def _plan_read(self, offset: int, candidates: list[Segment], *, max_bytes: int, bound: int, isolation: str,
                   min_one_message: bool, log_start_offset: int) -> FetchData | None:
        """The byte range of the first of ``candidates`` holding batches from ``offset`` below
        ``bound``; None if there is none."""
        for seg in candidates:
            header = self._header_after_last_fetch(seg, offset) or seg.translate_offset(offset)
            if header is None:
                continue
            end_position = self._bound_position(seg, bound)
            if header.position >= end_position:
                break
            limit = end_position - header.position
            size = min(limit, max(max_bytes, header.size) if min_one_message else max_bytes)
            if size <= 0:
                break
            self.segments.touch(seg)
            next_read = NextRead() if self.read_only else None
            fetch = FetchData(offset, handle=seg.log.handle(), position=header.position, size_bytes=size,
                              path=seg.log_path, bound=bound, isolation=isolation,
                              offset_range=(seg.base_offset, self._next_base_offset(seg)), next_read=next_read)
            if isolation == "committed":
                fetch.aborted_transactions = self._collect_aborted(seg, offset, log_start_offset)
            if next_read is not None:
                self._last_fetch = (seg, next_read)
            return fetch
        return None

    def _header_after_last_fetch(self, seg: Segment, offset: int):
        """A sequential reader's shortcut: when the last fetch planned in ``seg`` ended at
        ``offset`` (its ``next_offset`` known: see ``NextRead``), the batch right after its bytes, one
        header read instead of an index lookup and a walk; None otherwise. Read-only logs
        only: their segments are never cut in place (``refresh`` opens a rewritten file as
        a new ``Segment``), so a position found in ``seg`` stays a batch start while ``seg``
        is in the log."""
        last = self._last_fetch
        if last is None or last[0] is not seg or last[1].offset != offset:
            return None
        header = next(seg.headers(last[1].position), None)
        if header is not None:
            check_offsets_follow(header, offset - 1, path=seg.log_path)
        return header

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
            later = self.segments.higher(seg.base_offset)
            return None if later is None else later.base_offset

    def _collect_aborted(self, seg: Segment, offset: int, log_start_offset: int) -> list:
        upper = self.log_end_offset
        out = []
        with self._lock:
            later = self.segments.from_floor(seg.base_offset)
        for s in later:
            found, complete = self.trusted_txn_index(s, log_start_offset).collect(offset, upper)
            out.extend(found)
            if complete:
                break
        return out

    def batches_between(self, start: int, end: int):
        """Batches whose offsets overlap ``[start, end)`` (producer-state replay), walked in
        chunks from the batch holding ``start``. O(bytes walked); memory one chunk."""
        with self._lock:
            segments = self.segments.from_floor(start)
        yield from batches_from(segments, start, end)

    def batches_before(self, end: int, max_bytes: int):
        """The batches of about the last ``max_bytes`` before offset ``end``, oldest first
        (producer state reading back each producer's earlier batches). O(max_bytes)."""
        with self._lock:
            return batches_before(self.segments, end, max_bytes)

    def reload_producers(self, producers, log_start_offset: int) -> None:
        """Rebuild ``producers`` (a writer's ``ProducerStateManager``) from the batches kept
        after a cut: its newest snapshot at or below the log end, then the batches after it."""
        producers.truncate_and_reload(log_start_offset, self.log_end_offset, self.batches_between, now_ms(),
                                      read_back=self.batches_before)

    def offset_for_timestamp(self, timestamp: int, log_start_offset: int) -> int | None:
        """The earliest offset at or above the log start whose record timestamp is >=
        ``timestamp``, or EARLIEST_TIMESTAMP, LATEST_TIMESTAMP, MAX_TIMESTAMP as
        ``Log.offset_for_timestamp`` takes them. MAX_TIMESTAMP is Kafka's (UnifiedLog): in the
        first segment holding the largest timestamp, the first record with it, even below
        the log start that ``delete_records`` moved into that segment. None when no record
        is that late. O(segments + index_interval)."""
        if timestamp in (EARLIEST_TIMESTAMP, LATEST_TIMESTAMP):
            return log_start_offset if timestamp == EARLIEST_TIMESTAMP else self.log_end_offset
        with self._lock:
            segs = list(self.segments)
        if timestamp == MAX_TIMESTAMP:  # Kafka's rule: never compared with the log start
            best = max(segs, key=lambda s: s.max_timestamp, default=None)
            if best is None or best.max_timestamp < 0:
                return None
            found = best.find_offset_by_timestamp(best.max_timestamp, best.base_offset)
            return None if found is None else found[0]
        for seg in segs:
            if seg.next_offset <= log_start_offset or seg.largest_timestamp() < timestamp:
                continue
            found = seg.find_offset_by_timestamp(timestamp, log_start_offset)
            if found is not None:
                return found[0]
        return None

    # ==== transaction indexes =======================================================================
    def trusted_txn_index(self, seg: Segment, log_start_offset: int):
        """``seg``'s ``.txnindex``, checked against its ABORT markers on first use and
        rebuilt if it disagrees (docs/format/txnindex.md). O(segment bytes) once per
        segment per open, under the log's lock; O(1) after."""
        index = seg.txn_index
        if not index.trusted:
            with self._lock:
                if not index.trusted:
                    self._txn_checker.check(seg, log_start_offset=log_start_offset, is_current=self.segments.holds,
                                            may_grow=self.read_only and seg is self.active)
        return index

    def index_aborted(self, txn, log_start_offset: int) -> None:
        """Add ``txn`` to the active segment's ``.txnindex``, checked first if this open did
        not write it (a check that replayed the new marker has indexed it already)."""
        index = self.active.txn_index
        if not index.trusted:
            self.trusted_txn_index(self.active, log_start_offset)
            if any(t.last_offset >= txn.last_offset for t in index.entries()):
                return
        index.append(txn)

    def index_aborted_in_memory(self, txn, found: dict) -> None:
        """Read-only logs: index ``txn`` in memory beside its segment's ``.txnindex``
        entries, and note it in ``found`` (base offset -> entries) for :meth:`check_txn_indexes`."""
        base = (self.segments.floor(txn.last_offset) or self.segments.first).base_offset
        self.segments.get(base).txn_index.add_in_memory(txn)
        found.setdefault(base, []).append(txn)

    def check_txn_indexes(self, found: dict, end: int) -> None:
        """After a whole replay: trust each segment's ``.txnindex`` that holds exactly the
        aborts found, rebuild (in memory) the others. The last segment may have grown since
        the replay read it."""
        segments = list(self.segments)
        for seg in segments:
            seg.txn_index.verify(found.get(seg.base_offset, []), checked_to=min(seg.next_offset, end),
                                 may_grow=seg is segments[-1])

    # ==== read-only logs: following the writer ======================================================
    def refresh(self, offsets: LogOffsets, *, relist: bool = False) -> bool:
        """Take in what the writing process did since (see ``Log.refresh``) and move
        ``offsets`` to match. True when segments were truncated or rewritten, so that
        producer state replayed for committed reads must start again."""
        if self.segments:
            relist = relist or not self.segments.active.follow()
        if relist or self._dir_watch.changed():  # a roll, a deletion: a file came or went
            return self._relist(offsets)
        if self._checkpoints_changed():
            self._checkpoint_watch.mark()
            self._take_checkpointed_offsets(offsets)
        else:
            offsets.appended(self.log_end_offset)
        return False

    def _checkpoints_changed(self) -> bool:
        """Whether the log-start or high-watermark checkpoint may have changed: one ``stat``
        of the log dir while it does not change (a checkpoint is replaced by rename there),
        else one of each file."""
        if not self._log_dir_watch.changed():
            return False
        self._log_dir_watch.mark()  # before the files are looked at: a later rename shows
        return self._checkpoint_watch.changed()

    def follow_epochs(self, epochs: LeaderEpochFileCache, log_start_offset: int) -> LeaderEpochFileCache:
        """Read-only logs: the leader-epoch cache as the writer keeps it, read again when its
        ``leader-epoch-checkpoint`` changed (:func:`read_writers_epochs`; never written), and
        once at the first call (it may have changed while the log was opened). The file is
        replaced by rename in the partition directory, which :meth:`refresh` lists again
        when it changes: no system call until a listing, then one ``stat``."""
        if not self._epochs_stale:
            return epochs
        self._epochs_stale = False
        if not self._epoch_watch.changed():
            return epochs
        self._epoch_watch.mark()
        return read_writers_epochs(self.path, lambda start: self.batches_between(start, self.log_end_offset),
                                   log_start_offset=log_start_offset, io=self.io)

    def _relist(self, offsets: LogOffsets) -> bool:
        """Reconcile the segments with a new listing: segments gone or rewritten
        (truncation, compaction) are dropped or opened anew. O(segments)."""
        self._epochs_stale = True
        self._checkpoint_watch.mark()
        listed = self._list_live_segments()
        first_listed = min(listed, default=None)
        rewritten = False
        for seg in self.segments:
            base = seg.base_offset
            if listed.get(base) == seg.suffix and (not seg.is_loaded or seg.follow()):
                continue
            rewritten = rewritten or (first_listed is not None and base >= first_listed)
            self.segments.remove(base).close()
        for base, suffix in listed.items():
            if base not in self.segments:
                self.segments.add(self._factory.open(base, suffix))
        if self.segments:
            self.active.zero_tail_is_end = True  # a crash's zero-filled tail ends the log
            self.active.follow()  # measured now, so any later rewrite shows
        self._take_checkpointed_offsets(offsets)
        return rewritten

    def _take_checkpointed_offsets(self, offsets: LogOffsets) -> None:
        """Log start, recovery point and high watermark as the writer checkpointed them,
        within the segments found."""
        self._empty_start = take_checkpointed_offsets(self._dir, self.segments, offsets,
                                                      empty_start=self._empty_start)

    def _list_live_segments(self) -> dict[int, str]:
        """Base offset -> suffix of the live segments. A file gone between the listing and
        its use (a compaction renaming its ``.swap`` files) means the writer moved on:
        list again, up to RELIST_ATTEMPTS times."""
        def listed(attempt: int) -> dict[int, str]:
            self._dir_watch.mark()
            return dict(live_segment_bases(self.path))
        return while_files_vanish(listed)


def unclosed_finalizer(log, local: LocalLog, pdir) -> weakref.finalize:
    """What releases a ``Log`` garbage-collected without ``close()``, as Python closes a
    dropped file: its segments' descriptors and its writer lock, with a ``ResourceWarning``.
    Nothing is flushed, so the release counts as unclean and the next open recovers above
    the recovery point. Calling it with ``warn=False`` releases quietly (a dropped
    ``LogManager`` warns once for all its logs). Not run at interpreter exit."""
    finalizer = weakref.finalize(log, release_unclosed, local, pdir)
    finalizer.atexit = False
    return finalizer


def release_unclosed(local: LocalLog, pdir, warn: bool = True) -> None:
    """Release what a dropped log held (see :func:`unclosed_finalizer`)."""
    if warn:
        warnings.warn(f"unclosed log {local.path} (released unflushed: its next open recovers it)",
                      ResourceWarning, stacklevel=2)
    try:
        local.close()
    finally:
        pdir.unlock(clean=False)


def release_unflushed(log) -> None:
    """Release ``log`` as a dropped one is, without its warning (its owner warned once)."""
    detached = log._release_unclosed.detach()
    if detached is not None:
        _, release, args, _ = detached
        release(*args, warn=False)
