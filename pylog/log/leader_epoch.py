"""``LeaderEpochFileCache``: which leader epoch wrote which offsets, kept in the partition's
``leader-epoch-checkpoint`` file (docs/format/leader-epoch-checkpoint.md), as Kafka's class
of the same name keeps it.

An entry ``(epoch, start_offset)`` says the leader of ``epoch`` wrote its first batch at
``start_offset``; entries increase in both fields. Every append records the epoch of each
magic-2 batch at its base offset (leaders stamp their epoch, followers copy it), the log's
truncations cut it at the end and the start, and recovery rebuilds it from the batches.
Followers of a new leader ask ``end_offset_for`` (Kafka's OffsetsForLeaderEpoch) to find
where their log diverges.

Durability: every change is written at once (tmp, fsync, rename, fsync dir), so the file
never misses an entry whose batch was acknowledged. The file is only written once the
cache has something to say; an untouched, unknown directory gets none.
Not thread-safe by itself: the ``Log``'s lock guards it.
"""

from __future__ import annotations

import bisect
import os

from pylog.checkpoint import LeaderEpochCheckpoint
from pylog.errors import CorruptCheckpointError, InvalidArgumentError
from pylog.io import DEFAULT_IO, FileIO
from pylog.layout import INT32_MAX, LEADER_EPOCH_CHECKPOINT

#: Kafka's ``UNDEFINED_EPOCH`` and ``UNDEFINED_EPOCH_OFFSET``: no epoch, no end offset known.
UNDEFINED_EPOCH = -1
UNDEFINED_EPOCH_OFFSET = -1


class LeaderEpochFileCache:
    """The ``(epoch, start_offset)`` entries of one partition, oldest first.

    >>> cache = LeaderEpochFileCache(None)
    >>> cache.assign(0, 0); cache.assign(2, 5); cache.assign(2, 9)
    >>> cache.entries, cache.end_offset_for(1, log_end_offset=12), cache.end_offset_for(2, log_end_offset=12)
    ([(0, 0), (2, 5)], (0, 5), (2, 12))
    """

    def __init__(self, path: str | None, entries=(), *, io: FileIO = DEFAULT_IO, read_only: bool = False):
        self.path = path
        self.io = io
        self.read_only = read_only or path is None
        self._epochs: list[int] = []
        self._starts: list[int] = []
        for epoch, start in entries:
            self._assign(epoch, start)

    @classmethod
    def load(cls, partition_dir: str, *, io: FileIO = DEFAULT_IO, read_only: bool = False) -> "LeaderEpochFileCache":
        """The cache from ``<partition_dir>/leader-epoch-checkpoint``. Raises
        :class:`CorruptCheckpointError` for a malformed file or entries that do not increase
        (the loader then rebuilds it from the batches). O(entries)."""
        path = os.path.join(partition_dir, LEADER_EPOCH_CHECKPOINT)
        entries = LeaderEpochCheckpoint(path, io=io).read()
        for (e0, s0), (e1, s1) in zip(entries, entries[1:]):
            if e1 <= e0 or s1 < s0:
                raise CorruptCheckpointError(f"entries ({e0}, {s0}) then ({e1}, {s1}) do not increase", path=path)
        if any(e < 0 or s < 0 for e, s in entries):
            raise CorruptCheckpointError("negative epoch or start offset", path=path)
        return cls(path, entries, io=io, read_only=read_only)

    # -- queries -----------------------------------------------------------------------------------
    @property
    def entries(self) -> list[tuple[int, int]]:
        """``(epoch, start_offset)`` pairs, oldest first (a copy). O(entries)."""
        return list(zip(self._epochs, self._starts))

    @property
    def latest_epoch(self) -> int:
        """The newest epoch recorded, ``UNDEFINED_EPOCH`` (-1) when none. O(1)."""
        return self._epochs[-1] if self._epochs else UNDEFINED_EPOCH

    def end_offset_for(self, epoch: int, *, log_end_offset: int) -> tuple[int, int]:
        """Kafka's OffsetsForLeaderEpoch answer: ``(the largest epoch <= epoch known here,
        the start offset of the next epoch)``; the log end for the latest epoch; the start of
        the first epoch for an epoch older than all; ``(-1, -1)`` for an undefined epoch or
        one newer than all. O(log entries)."""
        if epoch == UNDEFINED_EPOCH or not self._epochs:
            return UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET
        if epoch == self._epochs[-1]:
            return epoch, log_end_offset
        higher = bisect.bisect_right(self._epochs, epoch)
        if higher == len(self._epochs):
            return UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET
        if higher == 0:
            return epoch, self._starts[0]
        return self._epochs[higher - 1], self._starts[higher]

    def epoch_for_offset(self, offset: int) -> int:
        """The epoch that wrote ``offset`` (-1 if before every entry). O(log entries)."""
        i = bisect.bisect_right(self._starts, offset)
        return self._epochs[i - 1] if i else UNDEFINED_EPOCH

    # -- changes (each written through when it changed anything) -------------------------------------
    def assign(self, epoch: int, start_offset: int) -> None:
        """Record that ``epoch`` starts at ``start_offset``. Nothing changes for the latest
        epoch at a later offset; otherwise later or newer entries that would break the order
        are removed first. Writes the file when it changed. O(entries) then."""
        if self._assign(epoch, start_offset):
            self._write()

    def assign_batches(self, batches) -> None:
        """Record the epoch of each magic-2 batch at its base offset (an append). The common
        case, every batch in the latest epoch, costs one comparison per batch and no write."""
        changed = False
        for b in batches:
            if b.magic >= 2 and b.partition_leader_epoch >= 0:
                changed = self._assign(b.partition_leader_epoch, b.base_offset) or changed
        if changed:
            self._write()

    def assign_newer(self, batches) -> None:
        """Recovery: record the epochs of ``batches`` newer than the latest one (Kafka's
        recovery rule; older entries read from the file stay). O(batches), one write."""
        changed = False
        for b in batches:
            if b.magic >= 2 and b.partition_leader_epoch > self.latest_epoch:
                changed = self._assign(b.partition_leader_epoch, b.base_offset) or changed
        if changed:
            self._write()

    def truncate_from_end(self, end_offset: int) -> None:
        """Remove the entries starting at or after ``end_offset`` (the log was cut there)."""
        cut = bisect.bisect_left(self._starts, end_offset)
        if cut < len(self._starts):
            del self._epochs[cut:], self._starts[cut:]
            self._write()

    def truncate_from_start(self, start_offset: int) -> None:
        """The log now starts at ``start_offset``: entries starting at or before it go, and
        the last of them comes back starting at ``start_offset``."""
        cut = bisect.bisect_right(self._starts, start_offset)
        if cut == 0 or (cut == 1 and self._starts[0] == start_offset):
            return
        kept_epoch = self._epochs[cut - 1]
        del self._epochs[:cut], self._starts[:cut]
        self._epochs.insert(0, kept_epoch)
        self._starts.insert(0, start_offset)
        self._write()

    def clear(self) -> None:
        """Forget every entry (the log was emptied)."""
        if self._epochs:
            self._epochs.clear()
            self._starts.clear()
            self._write()

    def _assign(self, epoch: int, start_offset: int) -> bool:
        if not (0 <= epoch <= INT32_MAX and start_offset >= 0):
            raise InvalidArgumentError(f"invalid leader epoch entry ({epoch}, {start_offset})")
        if self._epochs and epoch == self._epochs[-1] and start_offset >= self._starts[-1]:
            return False
        while self._epochs and (self._epochs[-1] >= epoch or self._starts[-1] >= start_offset):
            self._epochs.pop()
            self._starts.pop()
        self._epochs.append(epoch)
        self._starts.append(start_offset)
        return True

    def flush(self) -> None:
        """Write the file now (tmp, fsync, rename, fsync dir), even when nothing changed."""
        self._write()

    def _write(self) -> None:
        if not self.read_only:
            LeaderEpochCheckpoint(self.path, io=self.io).write(self.entries)

    def __repr__(self) -> str:
        return f"LeaderEpochFileCache({self.entries})"


def epochs_of_batches(batches) -> list[tuple[int, int]]:
    """The entries a cache holds for ``batches`` alone (what the file should say). O(batches)."""
    cache = LeaderEpochFileCache(None)
    cache.assign_batches(batches)
    return cache.entries


def load_epoch_cache(partition_dir: str, batches_from, *, log_start_offset: int, log_end_offset: int,
                     rebuild_from: int | None, io: FileIO = DEFAULT_IO,
                     read_only: bool = False) -> LeaderEpochFileCache:
    """The cache an opened log uses, as Kafka's loader makes it: the file's entries cut to
    ``[log_start_offset, log_end_offset]`` (keeping an epoch a leader began at the log end,
    so the next leader append stamps at least that epoch), plus the newer epochs of the
    batches from ``rebuild_from`` (the first recovered segment; None after a clean close). A missing file for a log
    that has data, or a malformed one, is rebuilt from every batch. A ``read_only`` load takes
    the file as the writer wrote it (:func:`read_writers_epochs`). ``batches_from(offset)``
    yields the batches from ``offset`` to the log end. O(entries), plus O(bytes) rebuilt."""
    if read_only:
        return read_writers_epochs(partition_dir, batches_from, log_start_offset=log_start_offset, io=io)
    path = os.path.join(partition_dir, LEADER_EPOCH_CHECKPOINT)
    try:
        cache = LeaderEpochFileCache.load(partition_dir, io=io)
        exists = os.path.exists(path)
    except CorruptCheckpointError:
        cache, exists = LeaderEpochFileCache(path, io=io), False
    missing = not exists and log_end_offset > log_start_offset
    if missing:
        rebuild_from = log_start_offset
    cache.truncate_from_end(log_end_offset + 1)  # an epoch begun at the log end, with no batch yet, stays
    cache.truncate_from_start(log_start_offset)
    if rebuild_from is not None:
        cache.assign_newer(batches_from(max(rebuild_from, log_start_offset)))
    if missing:
        cache.flush()  # even empty (batches without epochs), so the next open does not rebuild again
    return cache


def read_writers_epochs(partition_dir: str, batches_from, *, log_start_offset: int,
                        io: FileIO = DEFAULT_IO) -> LeaderEpochFileCache:
    """A read-only log's cache, following the writer's: the file's entries as written (one
    starting past the reader's log end names a batch its next refresh will see), cut at
    ``log_start_offset``; rebuilt in memory from ``batches_from(offset)`` when the file is
    missing or malformed. Never writes. O(entries), or O(bytes) rebuilt."""
    try:
        cache = LeaderEpochFileCache.load(partition_dir, io=io, read_only=True)
        found = os.path.exists(cache.path)
    except CorruptCheckpointError:
        cache, found = LeaderEpochFileCache(None), False
    if not found:
        cache = LeaderEpochFileCache(None)
        cache.assign_batches(batches_from(log_start_offset))
    cache.truncate_from_start(log_start_offset)
    return cache
