"""``LogLoader``: opening a partition directory, the steps Kafka's ``LogLoader`` takes, in
order (docs/internals.md#recovery); ``load()`` returns a ``LoadedLog`` that ``Log`` is
built from.

1. Temp files: remove ``.deleted`` and ``.cleaned`` files; finish an interrupted swap
   (``.swap`` files replace the segments whose offsets they cover).
2. Remove index files that have no ``.log``.
3. Open every segment (indexes lazily).
4. Unless the last close was clean: recover every segment from the one holding the
   recovery point: re-validate batch by batch, rebuild indexes, cut at the first invalid
   or incomplete batch, and drop every later segment. Their ``.txnindex`` files are
   rewritten after the producer-state replay; every other one is checked against its
   segment's markers when first needed (docs/format/txnindex.md), never trusted as found.

A read-only open does none of the writes: it resolves swaps in memory and leaves
damaged tails unread (readers never see past the last whole batch).
"""

from __future__ import annotations

import errno
import logging
import os
import re
import threading
from dataclasses import dataclass, field

from pylog import failpoints
from pylog.config import LogConfig
from pylog.errors import CorruptIndexError, PylogError, StorageError
from pylog.io import FileIO
from pylog.listing import Listing
from pylog.layout import (
    CLEANED_SUFFIX, DELETED_SUFFIX, INDEX_REWRITE_SUFFIX, INDEX_SUFFIX, LOG_START_OFFSET_CHECKPOINT, LOG_SUFFIX,
    RECOVERY_POINT_CHECKPOINT, REPLICATION_OFFSET_CHECKPOINT, SWAP_SUFFIX, TIME_INDEX_SUFFIX, TXN_INDEX_SUFFIX, segment_file_name,
)
from pylog.log.leader_epoch import LeaderEpochFileCache, load_epoch_cache
from pylog.log.offsets import LogOffsets
from pylog.log.segments import LogSegments, SegmentFactory, batches_before, batches_from, delete_segment
from pylog.partition_dir import PartitionDir
from pylog.producer_state import ProducerStateManager
from pylog.record.encode import now_ms
from pylog.segment.open_files import OpenFiles
from pylog.segment.segment import InvalidTail, Segment
from pylog.stat_watch import StatWatch

_INDEX_SUFFIXES = (INDEX_SUFFIX, TIME_INDEX_SUFFIX, TXN_INDEX_SUFFIX)
#: Where a recovery says what it truncated (a warning, as Kafka's ``LogSegment.recover`` logs one).
logger = logging.getLogger(__name__)


@dataclass
class LoadReport:
    """What opening found and did (for logs, ``describe`` and tests)."""

    clean: bool = False
    recovered_segments: list[int] = field(default_factory=list)
    truncated_bytes: int = 0
    #: Each invalid tail found: truncated by a writable open (``truncated_bytes`` counts
    #: them), where reading stops for a read-only one (the bytes stay).
    truncations: list[InvalidTail] = field(default_factory=list)
    deleted_segments: list[int] = field(default_factory=list)
    removed_files: list[str] = field(default_factory=list)
    swapped_segments: list[int] = field(default_factory=list)


_KINDS = (LOG_SUFFIX, INDEX_SUFFIX, TIME_INDEX_SUFFIX, TXN_INDEX_SUFFIX, ".snapshot")


def parse_segment_file(name: str) -> tuple[int, str, str] | None:
    """``00000000000000000042.log.swap`` -> ``(42, ".log", ".swap")``; None for other names."""
    if len(name) < 24 or name[20] != "." or not (name[:20].isascii() and name[:20].isdigit()):
        return None
    rest = name[20:]
    for kind in _KINDS:
        if rest.startswith(kind):
            extra = rest[len(kind):]
            if extra and not (extra.startswith(".") and extra[1:].replace(".", "").isalpha()):
                return None
            return int(name[:20]), kind, extra
    return None


def list_segment_files(directory: str, names: list[str] | None = None) -> list[tuple[int, str, str, str]]:
    """(base offset, kind, extra suffix, file name) of every segment-like file, sorted.
    One ``listdir`` (or the given ``names``) and no regular expressions: this runs on
    every open, over every file of every segment."""
    out = []
    for name in os.listdir(directory) if names is None else names:
        parsed = parse_segment_file(name)
        if parsed is not None:
            out.append((parsed[0], parsed[1], parsed[2], name))
    out.sort()
    return out


_TEMP_SUFFIXES = (DELETED_SUFFIX, CLEANED_SUFFIX, SWAP_SUFFIX, INDEX_REWRITE_SUFFIX)
_TEMP_NAME = re.compile("(?:" + "|".join(map(re.escape, _TEMP_SUFFIXES)) + ")$", re.M)


def has_temp_files(names: list[str]) -> bool:
    """Whether any ``.deleted``, ``.cleaned``, ``.swap`` or index ``.tmp`` file is present. One search of
    the joined names (1 ms for 30,000)."""
    return _TEMP_NAME.search("\n".join(names)) is not None


def lowest_cleaned_base(files: list[tuple[int, str, str, str]]) -> int | None:
    """Base offset of the lowest ``.cleaned`` file: ``.swap`` files at or above it are an
    interrupted split, to be dropped (the original segments are still whole)."""
    return min((base for base, _, extra, _ in files if extra == CLEANED_SUFFIX), default=None)


def clean_temp_files(directory: str, io: FileIO, report: LoadReport) -> None:
    """Step 1: delete ``.deleted``/``.cleaned`` files and index rewrites a crash left
    (``.tmp``), complete ``.swap`` renames."""
    files = list_segment_files(directory)
    min_cleaned = lowest_cleaned_base(files)
    for base, kind, extra, name in files:
        if extra in (DELETED_SUFFIX, CLEANED_SUFFIX, INDEX_REWRITE_SUFFIX):
            io.remove(os.path.join(directory, name))
            report.removed_files.append(name)
        elif extra == SWAP_SUFFIX and min_cleaned is not None and base >= min_cleaned:
            io.remove(os.path.join(directory, name))  # an interrupted split: start again
            report.removed_files.append(name)
    swaps = [f for f in list_segment_files(directory) if f[2] == SWAP_SUFFIX and f[1] == LOG_SUFFIX]
    for base, _, _, _ in swaps:
        seg = Segment(directory, base, index_bytes=1 << 20, index_interval_bytes=4096, writable=False,
                      suffix=SWAP_SUFFIX, io=io)
        end = seg.next_offset
        seg.close()
        for obase, okind, oextra, oname in list_segment_files(directory):
            if oextra == "" and base <= obase < max(end, base + 1) and okind != ".snapshot":
                io.remove(os.path.join(directory, oname))
                report.removed_files.append(oname)
    for base, kind, extra, name in list_segment_files(directory):
        if extra == SWAP_SUFFIX:
            io.rename(os.path.join(directory, name), os.path.join(directory, name[: -len(SWAP_SUFFIX)]))
            if base not in report.swapped_segments:
                report.swapped_segments.append(base)
    if swaps:
        io.fsync_dir(directory)


def remove_orphan_indexes(directory: str, io: FileIO, report: LoadReport,
                          names: list[str] | Listing) -> tuple[list[int], set[int]]:
    """Step 2: index files whose ``.log`` is gone are deleted, as Kafka does. Returns the
    sorted base offsets of the ``.log`` files and those of the ones lacking an ``.index``
    or ``.timeindex``. Set operations over the names only: this runs over every file of
    every segment on each open."""
    listing = names if isinstance(names, Listing) else Listing(names)
    logs = set(listing.bases(LOG_SUFFIX))
    indexed = set(listing.bases(INDEX_SUFFIX))
    timed = set(listing.bases(TIME_INDEX_SUFFIX))
    for suffix, have in ((INDEX_SUFFIX, indexed), (TIME_INDEX_SUFFIX, timed),
                         (TXN_INDEX_SUFFIX, set(listing.bases(TXN_INDEX_SUFFIX)))):
        for base in sorted(have - logs):
            name = segment_file_name(base, suffix)
            io.remove(os.path.join(directory, name))
            report.removed_files.append(name)
    return sorted(logs), logs - (indexed & timed)


def live_segment_bases(directory: str, names: list[str] | None = None) -> list[tuple[int, str]]:
    """(base offset, suffix) of the segments a read-only open sees, ascending. An
    unfinished swap is resolved in memory: ``.swap`` files stand in for the range they
    cover. Without leftover files of a swap, a cleaning or a deletion (the usual case) the
    names are only grouped (``Listing``: in C when built); else each is parsed."""
    names = os.listdir(directory) if names is None else names
    if not has_temp_files(names):
        return [(b, "") for b in Listing(names).offsets(LOG_SUFFIX)]
    files = list_segment_files(directory, names)
    plain = sorted(b for b, kind, extra, _ in files if kind == LOG_SUFFIX and extra == "")
    min_cleaned = lowest_cleaned_base(files)
    swaps = sorted(b for b, kind, extra, _ in files if kind == LOG_SUFFIX and extra == SWAP_SUFFIX
                   and (min_cleaned is None or b < min_cleaned))  # at or above: an interrupted split
    if not swaps:
        return [(b, "") for b in plain]
    ends = {s: _swap_end(directory, s) for s in swaps}
    out = [(b, SWAP_SUFFIX) for b in swaps]
    out += [(b, "") for b in plain if not any(s <= b < end for s, end in ends.items())]
    return sorted(out)


def _swap_end(directory: str, base: int) -> int:
    """One past the last offset of the ``.swap`` segment at ``base`` (at least ``base + 1``).
    ``FileNotFoundError`` when the writer renamed it since the listing: list again."""
    seg = Segment(directory, base, index_bytes=1 << 20, index_interval_bytes=4096, writable=False,
                  suffix=SWAP_SUFFIX)
    try:
        os.stat(seg.log.path)  # a missing file would read as an empty segment
        return max(seg.next_offset, base + 1)
    finally:
        seg.close()


def index_needs_rebuild(segment: Segment) -> bool:
    """True if the segment's ``.index`` or ``.timeindex`` fails its sanity check (loads them)."""
    try:
        segment._raw_offset_index().sanity_check()
        segment._raw_time_index().sanity_check()
    except (CorruptIndexError, OSError):
        return True
    return False


@dataclass
class LoadedLog:
    """What ``LogLoader.load()`` opened, for ``Log`` to own: the segments, the offsets,
    the producer state (None for a read-only log until a committed read replays it), the
    report, and for a read-only log the log end when it has no segment and the watches
    that tell it when its writer changed the directory or the checkpoints."""

    segments: LogSegments
    offsets: LogOffsets
    producers: ProducerStateManager | None
    report: LoadReport
    factory: SegmentFactory
    pdir: PartitionDir
    empty_start: int = 0
    dir_watch: StatWatch | None = None
    checkpoint_watch: StatWatch | None = None
    epochs: LeaderEpochFileCache | None = None
    lock: object = None  # the threading.RLock that guards all of the above from now on (``open_partition``)


#: How often a read-only log lists its directory again when a file it found is gone before
#: it read it (the writer's compaction renamed it, its retention deleted it): at its open,
#: a read, a relist.
RELIST_ATTEMPTS = 100


def while_files_vanish(step, *, read_only: bool = True):
    """``step(attempt)`` (attempt 1, 2, ...; from 2 on it lists the directory again), run
    again while it fails on a file gone since it was listed (ENOENT, ESTALE), at most
    RELIST_ATTEMPTS times. A writable log's files do not vanish under it: its step runs once."""
    attempts = RELIST_ATTEMPTS if read_only else 1
    for attempt in range(1, attempts + 1):
        try:
            return step(attempt)
        except OSError as e:
            if e.errno not in (errno.ENOENT, errno.ESTALE) or attempt == attempts:
                raise


def open_partition(path, config: LogConfig, *, read_only: bool, io: FileIO, auto_high_watermark: bool,
                   clean_shutdown: bool | None, open_files: OpenFiles) -> LoadedLog:
    """Open (or, unless ``read_only``, create) the partition directory ``path``, lock it
    for a writer, and load it under a new lock whose segments share ``open_files``. On
    failure the directory is released again, and an ``OSError`` becomes
    :class:`StorageError` naming the directory."""
    pdir = PartitionDir.open(path, io=io, create=not read_only)
    lock = threading.RLock()
    try:
        if not read_only:
            pdir.lock()
        def load(attempt: int) -> LoadedLog:  # each attempt lists the directory anew
            loader = LogLoader(pdir, config, read_only=read_only, io=io, files=open_files.for_owner(lock),
                               auto_high_watermark=auto_high_watermark, clean_shutdown=clean_shutdown)
            try:
                return loader.load()
            except OSError:
                loader.segments.close_all()
                raise
        loaded = while_files_vanish(load, read_only=read_only)
    except BaseException as e:
        pdir.unlock()
        if isinstance(e, OSError) and not isinstance(e, PylogError):
            raise StorageError(e.errno, f"cannot open {pdir.path}: {e.strerror}") from e
        raise
    loaded.lock = lock
    return loaded


class LogLoader:
    """Opens one partition directory (Kafka's ``LogLoader``). A writer's load takes the
    steps above and writes what they fix; a read-only load only lists and reads. On
    failure every segment opened is closed again (the caller releases the directory).
    Cost: O(segments) to list, plus O(bytes above the recovery point) after a crash."""

    def __init__(self, pdir: PartitionDir, config: LogConfig, *, read_only: bool, io: FileIO, files,
                 auto_high_watermark: bool, clean_shutdown: bool | None = None):
        self._dir = pdir
        self.config = config
        self.read_only = read_only
        self.io = io
        self.clean_shutdown = clean_shutdown
        self.segments = LogSegments(files)
        self.factory = SegmentFactory(pdir.path, config, io, files, writable=not read_only)
        self.offsets = LogOffsets(auto_high_watermark=auto_high_watermark)
        self.report = LoadReport()
        self.producers: ProducerStateManager | None = None

    def load(self) -> LoadedLog:
        try:
            if self.read_only:
                return self._load_read_only()
            return self._load_writable()
        except BaseException:
            self.segments.close_all()
            raise

    def _loaded(self, **fields) -> LoadedLog:
        return LoadedLog(self.segments, self.offsets, self.producers, self.report, self.factory, self._dir,
                         epochs=self._epochs(), **fields)

    def _epochs(self) -> LeaderEpochFileCache:
        """The leader-epoch cache, cut to the loaded offsets and rebuilt over recovered segments."""
        segments, leo = self.segments, self.segments.active.next_offset if self.segments else 0
        return load_epoch_cache(self._dir.path, lambda start: batches_from(segments.from_floor(start), start, leo),
                                log_start_offset=self.offsets.log_start_offset, log_end_offset=leo,
                                rebuild_from=min(self.report.recovered_segments, default=None), io=self.io,
                                read_only=self.read_only)

    def _load_writable(self) -> LoadedLog:
        report = self.report
        marker = self._dir.take_clean_shutdown_marker()
        report.clean = marker if self.clean_shutdown is None else (self.clean_shutdown or marker)
        names = os.listdir(self._dir.path)
        if has_temp_files(names):
            clean_temp_files(self._dir.path, self.io, report)
            names = os.listdir(self._dir.path)
        listing = Listing(names)
        bases, missing_indexes = remove_orphan_indexes(self._dir.path, self.io, report, listing)
        self.segments.add_all(self.factory.open_all((base, "") for base in bases))
        offsets = self._dir.read_offsets()
        checkpoint_rp = offsets[RECOVERY_POINT_CHECKPOINT] or 0
        checkpoint_lso = offsets[LOG_START_OFFSET_CHECKPOINT]
        self._recover(checkpoint_rp, missing_indexes)
        if not self.segments:
            self.segments.add(self.factory.create(checkpoint_lso or 0))
        leo = self.segments.active.next_offset
        if checkpoint_lso is not None and leo < checkpoint_lso:
            self._start_at(checkpoint_lso)
            leo = checkpoint_lso
        self.offsets.loaded(log_start_offset=checkpoint_lso, recovery_point=leo if report.clean else checkpoint_rp,
                            high_watermark=offsets[REPLICATION_OFFSET_CHECKPOINT],
                            first_base_offset=self.segments.first_base_offset, log_end_offset=leo)
        self._load_producer_state(None if report.removed_files else listing)
        return self._loaded()

    def _recover(self, recovery_point: int, missing_indexes: set[int]) -> None:
        """Recover segments from the one holding ``recovery_point`` (none after a clean
        close), plus any whose index is missing, and the active one if its index is damaged."""
        report, segments = self.report, self.segments
        if not segments:
            return
        last = segments.active.base_offset
        above = [] if report.clean else segments.from_floor(recovery_point)
        todo = sorted(missing_indexes | {s.base_offset for s in above})
        if not todo or todo[-1] != last:  # the marker vouches for the active segment: check its index and tail
            if index_needs_rebuild(segments.active) or segments.active.check_tail() is not None:
                todo.append(last)
        for base in todo:
            seg = segments.get(base)
            invalid = seg.recover()
            failpoints.hit("recover.segment-recovered")
            report.recovered_segments.append(base)
            if invalid is not None:
                logger.warning(invalid.message(truncated=True))
                report.truncations.append(invalid)
                report.truncated_bytes += invalid.bytes
                for later in segments.from_floor(base)[1:]:
                    segments.remove(later.base_offset).delete_files()
                    report.deleted_segments.append(later.base_offset)
                break
            if base != last:
                seg.on_become_inactive()
        if report.recovered_segments:
            self.io.fsync_dir(self._dir.path)

    def _start_at(self, offset: int) -> None:
        """The checkpointed log start is past every segment: start empty at it."""
        for base in self.segments.bases():
            delete_segment(self.segments.remove(base), delay_ms=0)
        self.segments.add(self.factory.create(offset))
        self.offsets.started_at(offset)

    def _load_producer_state(self, names_at_open: Listing | None) -> None:
        """Load producer state; segments recovered just now get their aborted-transaction
        index rebuilt from the replay (each file rewritten in one write at the end).
        ``names_at_open`` is the directory listing, if nothing was removed since."""
        segments = self.segments
        self.producers = ProducerStateManager(self._dir.path,
                                              producer_id_expiration_ms=self.config.producer_id_expiration_ms,
                                              read_only=False, io=self.io)
        rebuilt = {base: [] for base in self.report.recovered_segments if base in segments}

        def index_aborted(txn) -> None:
            entries = rebuilt.get((segments.floor(txn.last_offset) or segments.first).base_offset)
            if entries is not None:
                lso = lso_after(self.producers, self.offsets.high_watermark, txn.last_offset)
                entries.append(txn._replace(last_stable_offset=lso))

        bases = segments.bases()
        self.producers.remove_stray_snapshots(bases, None if rebuilt else names_at_open)
        self.producers.load(self.offsets.log_start_offset, segments.active.next_offset,
                            lambda start, end: batches_from(segments.from_floor(start), start, end), now_ms(),
                            replay_from=min(rebuilt) if rebuilt else None, on_aborted=index_aborted,
                            read_back=lambda end, max_bytes: batches_before(segments, end, max_bytes))
        for base, entries in rebuilt.items():
            segments.get(base).txn_index.replace(entries)

    def _load_read_only(self) -> LoadedLog:
        dir_watch = StatWatch([self._dir.path])
        checkpoint_watch = StatWatch([os.path.join(self._dir.log_dir, name) for name in
                                      (LOG_START_OFFSET_CHECKPOINT, REPLICATION_OFFSET_CHECKPOINT)])
        dir_watch.mark()
        checkpoint_watch.mark()
        self.segments.add_all(self.factory.open_all(live_segment_bases(self._dir.path)))
        if self.segments:
            self.segments.active.zero_tail_is_end = True  # a crash's zero-filled tail ends the log
        self.report.clean = self._dir.has_clean_shutdown_marker()
        if self.segments and (self.report.clean or not self._dir.has_live_writer()):
            # no writer (closed cleanly, or crashed): a tail that does not validate is damage
            self._stop_before_invalid_tail(self.segments.active)
        empty_start = take_checkpointed_offsets(self._dir, self.segments, self.offsets, empty_start=0)
        return self._loaded(empty_start=empty_start, dir_watch=dir_watch, checkpoint_watch=checkpoint_watch)

    def _stop_before_invalid_tail(self, segment: Segment) -> None:
        """Read-only, with no writer alive (under a clean-shutdown marker that may lie, or
        after a crash): if the segment's last batches do not validate, reading stops at the
        last valid one, and the log says so; the file is left for a writable open (or
        ``pylog verify --repair``) to recover."""
        invalid = segment.check_tail()
        if invalid is not None:
            logger.warning(invalid.message(truncated=False))
            self.report.truncations.append(invalid)
            segment.stop_at(invalid.position)


def take_checkpointed_offsets(pdir: PartitionDir, segments: LogSegments, offsets: LogOffsets, *,
                              empty_start: int) -> int:
    """Read-only logs: take log start, recovery point and high watermark as the writer
    checkpointed them, within the segments found. Returns the log end to use while there
    is no segment (the checkpointed log start then, else ``empty_start`` unchanged)."""
    read = pdir.read_offsets()
    if not segments:
        empty_start = read[LOG_START_OFFSET_CHECKPOINT] or 0
    leo = segments.active.next_offset if segments else empty_start
    offsets.loaded(log_start_offset=read[LOG_START_OFFSET_CHECKPOINT], recovery_point=read[RECOVERY_POINT_CHECKPOINT],
                   high_watermark=read[REPLICATION_OFFSET_CHECKPOINT],
                   first_base_offset=segments.first_base_offset if segments else leo, log_end_offset=leo)
    return empty_start


def lso_after(producers: ProducerStateManager | None, high_watermark: int, marker_offset: int) -> int:
    """The last stable offset to record with an aborted transaction whose marker is at
    ``marker_offset``: the first offset still unstable then, at most the offset after it."""
    fuo = producers.first_unstable_offset(high_watermark) if producers else None
    return marker_offset + 1 if fuo is None else min(fuo, marker_offset + 1)
