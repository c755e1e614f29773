"""Producer state: what makes appends idempotent and transactions atomic
(docs/format/snapshot.md; Kafka's ProducerStateManager).

Per producer id the log remembers its epoch, the metadata of its last five batches
(so an exact retry is answered with the original offsets and writes nothing), its
coordinator epoch and the first offset of its open transaction. Snapshots in Kafka's
``.snapshot`` format are taken at every roll and on close; opening loads the newest
valid snapshot and replays the log after it.
"""

from __future__ import annotations

import bisect
import errno
import os
from collections import deque
from dataclasses import dataclass, field
from typing import Callable, Iterable, NamedTuple

from pylog.record import crc

from pylog.errors import (
    CorruptSnapshotError, InvalidTxnStateError, OutOfOrderSequenceError, ProducerFencedError, StorageError,
)
from pylog.index.txn_index import AbortedTxn
from pylog.io import DEFAULT_IO, FileIO
from pylog.listing import Listing
from pylog.record.batch import increment_sequence
from pylog.record.encode import now_ms as clock_ms
from pylog.layout import (
    CONTROL_ABORT, CONTROL_COMMIT, SNAPSHOT_CRC_FROM, SNAPSHOT_ENTRY, SNAPSHOT_ENTRY_BYTES,
    SNAPSHOT_HEADER, SNAPSHOT_SUFFIX, SNAPSHOT_VERSION, segment_file_name,
)

#: Batches remembered per producer for duplicate detection (Kafka's NUM_BATCHES_TO_RETAIN).
BATCHES_TO_RETAIN = 5
#: How far before a snapshot's offset the log is read back on load for each producer's
#: earlier batches (Kafka's snapshot keeps only the last one).
READ_BACK_BYTES = 1 << 20
NO_EPOCH = -1


class BatchInfo(NamedTuple):
    """What producer state needs of one appended v2 batch."""

    producer_id: int
    producer_epoch: int
    base_sequence: int
    last_sequence: int
    first_offset: int
    last_offset: int
    max_timestamp: int
    is_transactional: bool
    is_control: bool
    control_type: int | None
    coordinator_epoch: int | None


def batch_info(batch) -> BatchInfo:
    """BatchInfo of a :class:`RecordBatch` (reads the control record of a marker)."""
    control_type = coordinator_epoch = None
    if batch.is_control:
        recs = batch.records()
        if recs:
            control_type = recs[0].control_type_id
            coordinator_epoch = recs[0].coordinator_epoch
    return BatchInfo(batch.producer_id, batch.producer_epoch, batch.base_sequence, batch.last_sequence,
                     batch.base_offset, batch.last_offset, batch.max_timestamp, batch.is_transactional,
                     batch.is_control, control_type, coordinator_epoch)


class BatchMetadata(NamedTuple):
    first_seq: int
    last_seq: int
    first_offset: int
    last_offset: int
    timestamp: int


class ProducerState(NamedTuple):
    """One producer as Kafka's DescribeProducers answers it (``Log.active_producers``):
    ``current_txn_start_offset`` is the first offset of its open transaction, or None."""
    producer_id: int
    producer_epoch: int
    last_sequence: int
    last_timestamp: int
    coordinator_epoch: int
    current_txn_start_offset: int | None


@dataclass
class ProducerEntry:
    """One producer's state."""

    producer_id: int
    epoch: int = NO_EPOCH
    batches: deque = field(default_factory=lambda: deque(maxlen=BATCHES_TO_RETAIN))
    coordinator_epoch: int = -1
    last_timestamp: int = -1
    current_txn_first_offset: int | None = None

    @property
    def last_sequence(self) -> int:
        return self.batches[-1].last_seq if self.batches else -1

    @property
    def last_offset(self) -> int:
        return self.batches[-1].last_offset if self.batches else -1

    def find_duplicate(self, info: BatchInfo) -> BatchMetadata | None:
        if info.producer_epoch != self.epoch:
            return None
        for b in self.batches:
            if b.first_seq == info.base_sequence and b.last_seq == info.last_sequence:
                return b
        return None


def in_sequence(last_seq: int, next_seq: int) -> bool:
    """``next_seq`` follows ``last_seq`` (wrapping at 2^31 - 1 to 0)."""
    return next_seq == increment_sequence(last_seq, 1)


class ProducerStateManager:
    """The producer state of one partition directory."""

    def __init__(self, log_dir, *, producer_id_expiration_ms: int, read_only: bool = False,
                 io: FileIO = DEFAULT_IO):
        self.log_dir = os.fspath(log_dir)
        self.producer_id_expiration_ms = producer_id_expiration_ms
        self.read_only = read_only
        self.io = io
        self.producers: dict[int, ProducerEntry] = {}
        self._unreplicated: list[tuple[int, int]] = []  # (first offset, marker offset) of completed txns
        self._snapshots: list[int] | None = None  # offsets of the .snapshot files, ascending
        self._unstable: tuple | None = None  # (high watermark asked, answer) until the state changes

    # -- snapshots -------------------------------------------------------------------------
    # Which snapshots are kept follows Kafka: at load, those of no segment go except the newest
    # when it lies past every segment (the close snapshot), then those past the log end or at or
    # below the log start; retention removes those of deleted segments; and every recovery-point
    # checkpoint removes those below the last two segments (``delete_snapshots_below``).
    def snapshot_offsets(self, names: list[str] | Listing | None = None) -> list[int]:
        """Offsets of the ``.snapshot`` files, ascending (``names``: a listing of the directory,
        if at hand). Known in memory after the first call; O(1) then."""
        if names is not None or self._snapshots is None:
            names = os.listdir(self.log_dir) if names is None else names
            self._snapshots = (names if isinstance(names, Listing) else Listing(names)).offsets(SNAPSHOT_SUFFIX)
        return list(self._snapshots)

    def snapshot_path(self, offset: int) -> str:
        return os.path.join(self.log_dir, segment_file_name(offset, SNAPSHOT_SUFFIX))

    def take_snapshot(self, offset: int, *, fsync: bool = True) -> str | None:
        """Write the state as ``<offset>.snapshot`` (tmp, fsync, rename). None if read-only."""
        if self.read_only:
            return None
        offsets = self.snapshot_offsets()
        path = self.snapshot_path(offset)
        self.io.write_file(path, encode_snapshot(self.producers.values()), fsync=fsync)
        if offset not in offsets:
            bisect.insort(self._snapshots, offset)
        return path

    def _delete_snapshots(self, doomed: Iterable[int]) -> None:
        if self.read_only:
            return
        for off in list(doomed):
            self.io.remove(self.snapshot_path(off))
            self._snapshots.remove(off)

    def delete_snapshots_below(self, offset: int) -> None:
        """Remove every snapshot below ``offset``. O(snapshots removed)."""
        self._delete_snapshots(off for off in self.snapshot_offsets() if off < offset)

    def delete_snapshots_above(self, offset: int) -> None:
        self._delete_snapshots(off for off in self.snapshot_offsets() if off > offset)

    def remove_stray_snapshots(self, segment_base_offsets: list[int], names: list[str] | Listing | None = None) -> None:
        """Kafka's rule at load: a snapshot whose offset is no segment's base offset goes,
        except the newest such one when it lies past every segment (written by the last close)."""
        bases = set(segment_base_offsets)
        strays = [off for off in self.snapshot_offsets(names) if off not in bases]
        keep = strays[-1:] if strays and (not bases or strays[-1] > max(bases)) else []
        self._delete_snapshots(off for off in strays if off not in keep)

    # -- loading -----------------------------------------------------------------------------
    def load(self, log_start_offset: int, log_end_offset: int, read_batches: Callable[[int, int], Iterable], now_ms: int, *, replay_from: int | None = None,
             on_aborted: Callable[[AbortedTxn], None] | None = None, names: list[str] | None = None,
             read_back: Callable[[int, int], Iterable] | None = None) -> None:
        """Newest valid snapshot <= ``log_end_offset`` (and <= ``replay_from`` if given),
        then replay the batches after it. Corrupt snapshots and, as Kafka, those past the log
        end or at or below the log start are skipped (and deleted unless read-only).
        ``read_back(offset, max_bytes)``: the batches of about the last ``max_bytes`` of the
        log before ``offset``, where the batches before each producer's last one in the
        snapshot are found again (:meth:`_restore_earlier_batches`, ``READ_BACK_BYTES``).
        Cost: O(bytes after the snapshot), plus the read-back when a snapshot has producers."""
        self.producers = {}
        self._unreplicated = []
        self._unstable = None
        limit = log_end_offset if replay_from is None else min(replay_from, log_end_offset)
        start = log_start_offset
        self._delete_snapshots(off for off in self.snapshot_offsets(names)
                               if off > log_end_offset or off <= log_start_offset)
        for off in reversed(self.snapshot_offsets()):
            if off > limit or off < log_start_offset:
                continue
            try:
                entries = read_snapshot(self.snapshot_path(off))
            except CorruptSnapshotError:
                self._delete_snapshots([off])
                continue
            self.producers = {e.producer_id: e for e in entries}
            start = off
            if self.producers and read_back is not None:
                self._restore_earlier_batches(b for b in read_back(off, READ_BACK_BYTES)
                                              if b.last_offset >= log_start_offset)
            break
        self.replay((b for b in read_batches(start, log_end_offset) if b.last_offset >= start), on_aborted)
        self.remove_expired(now_ms)

    def _restore_earlier_batches(self, batches: Iterable) -> None:
        """A snapshot holds each producer's last batch only (Kafka's format, version 1); its
        four before are taken from ``batches`` (the log before the snapshot, oldest first):
        those of the same epoch whose sequences chain into it, so the duplicate window
        after a restart is the five batches it was before. O(batches)."""
        earlier = {pid: deque(maxlen=BATCHES_TO_RETAIN - 1) for pid, e in self.producers.items()
                   if len(e.batches) == 1}
        for batch in batches:
            found = earlier.get(batch.producer_id) if batch.magic == 2 else None
            if found is None or batch.is_control or batch.base_sequence < 0:
                continue
            entry = self.producers[batch.producer_id]
            if batch.producer_epoch == entry.epoch and batch.last_offset < entry.batches[0].first_offset:
                found.append(BatchMetadata(batch.base_sequence, batch.last_sequence, batch.base_offset,
                                           batch.last_offset, batch.max_timestamp))
        for pid, found in earlier.items():
            batches = self.producers[pid].batches
            while found and in_sequence(found[-1].last_seq, batches[0].first_seq):
                batches.appendleft(found.pop())

    def truncate_and_reload(self, log_start_offset: int, log_end_offset: int,
                            read_batches: Callable[[int, int], Iterable], now_ms: int, *,
                            read_back: Callable[[int, int], Iterable] | None = None) -> None:
        """After a truncation: drop snapshots past the new end and rebuild (see :meth:`load`)."""
        self.delete_snapshots_above(log_end_offset)
        self.load(log_start_offset, log_end_offset, read_batches, now_ms, read_back=read_back)

    # -- appends -------------------------------------------------------------------------------
    def validate(self, batches, *, from_client: bool):
        """Check the batches of one append before they are written; changes nothing.

        Returns ``(batch, (first, last))`` when a single-batch client append is an exact
        duplicate of one of its producer's last five batches (the retry writes nothing);
        None otherwise. Raises as :meth:`check_append` does. Batches without a producer
        (legacy, or producer id -1) are not checked. O(batches)."""
        for batch in batches:
            if batch.magic != 2 or batch.producer_id < 0:
                continue
            original = self.check_append(batch_info(batch), from_client=from_client)
            if original is not None and len(batches) == 1:
                return batch, original
        return None

    def apply(self, batch) -> AbortedTxn | None:
        """Take in ``batch`` (a ``RecordBatch`` written or replayed, offsets final), as
        :meth:`on_append`; a batch without a producer changes nothing. Returns the
        transaction an ABORT marker ends (its last stable offset for the log to fill in)."""
        if batch.magic != 2 or batch.producer_id < 0:
            return None
        return self.on_append(batch_info(batch))

    def replay(self, batches: Iterable, on_aborted: Callable[[AbortedTxn], None] | None = None) -> None:
        """:meth:`apply` each of ``batches`` in order (opening, a read-only log catching up,
        a ``.txnindex`` check); ``on_aborted`` sees each transaction an ABORT marker ends,
        before the next batch is applied. O(batches)."""
        for batch in batches:
            aborted = self.apply(batch)
            if aborted is not None and on_aborted is not None:
                on_aborted(aborted)

    def check_append(self, info: BatchInfo, *, from_client: bool) -> tuple[int, int] | None:
        """Validate a batch before it is written; changes nothing.

        Returns the original (first, last) offsets if a client batch is an exact duplicate
        of one of the producer's last five. Raises :class:`ProducerFencedError` for an
        older epoch, :class:`OutOfOrderSequenceError` for a gap, :class:`InvalidTxnStateError`
        for a batch that does not fit the producer's transaction state.
        """
        entry = self.producers.get(info.producer_id)
        if entry is None:
            if info.is_control and from_client:
                raise InvalidTxnStateError(f"producer {info.producer_id} has no state to end a transaction of")
            return None
        if info.producer_epoch < entry.epoch:
            raise ProducerFencedError(f"producer {info.producer_id} epoch {info.producer_epoch} is older than "
                                      f"the current epoch {entry.epoch}")
        if info.is_control:
            if info.coordinator_epoch is not None and info.coordinator_epoch < entry.coordinator_epoch:
                raise InvalidTxnStateError(f"transaction marker for producer {info.producer_id} has coordinator "
                                           f"epoch {info.coordinator_epoch}, below {entry.coordinator_epoch}")
            return None
        if not from_client:
            return None
        dup = entry.find_duplicate(info)
        if dup is not None:
            return dup.first_offset, dup.last_offset
        if info.producer_epoch != entry.epoch:
            if info.base_sequence != 0 and entry.epoch != NO_EPOCH:
                raise OutOfOrderSequenceError(
                    f"producer {info.producer_id} starts epoch {info.producer_epoch} at sequence "
                    f"{info.base_sequence}, not 0")
        elif entry.batches and not in_sequence(entry.last_sequence, info.base_sequence):
            raise OutOfOrderSequenceError(
                f"producer {info.producer_id}: sequence {info.base_sequence} does not follow "
                f"{entry.last_sequence}")
        if entry.current_txn_first_offset is not None and not info.is_transactional:
            raise InvalidTxnStateError(f"producer {info.producer_id} has an open transaction; "
                                       f"a non-transactional batch cannot be appended")
        return None

    def on_append(self, info: BatchInfo) -> AbortedTxn | None:
        """Update after the batch was written (offsets final). A COMMIT/ABORT marker ends
        the producer's transaction; an ABORT returns the AbortedTxn to index (its
        ``last_stable_offset`` is filled in by the log)."""
        self._unstable = None
        entry = self.producers.get(info.producer_id)
        if entry is None:
            entry = self.producers[info.producer_id] = ProducerEntry(info.producer_id)
        if info.producer_epoch != entry.epoch:
            entry.epoch = info.producer_epoch
            entry.batches.clear()
        entry.last_timestamp = max(entry.last_timestamp, info.max_timestamp)
        if info.is_control:
            if info.coordinator_epoch is not None:
                entry.coordinator_epoch = info.coordinator_epoch
            first = entry.current_txn_first_offset
            entry.current_txn_first_offset = None
            if first is None or info.control_type not in (CONTROL_ABORT, CONTROL_COMMIT):
                return None
            self._unreplicated.append((first, info.last_offset))
            if info.control_type == CONTROL_ABORT:
                return AbortedTxn(info.producer_id, first, info.last_offset, info.last_offset + 1)
            return None
        if info.base_sequence >= 0:
            entry.batches.append(BatchMetadata(info.base_sequence, info.last_sequence, info.first_offset,
                                               info.last_offset, info.max_timestamp))
        if info.is_transactional and entry.current_txn_first_offset is None:
            entry.current_txn_first_offset = info.first_offset
        return None

    # -- queries ---------------------------------------------------------------------------------
    def active_producers(self) -> list[ProducerState]:
        """Every producer known, by producer id (Kafka's ``activeProducers``). O(producers)."""
        return [ProducerState(e.producer_id, e.epoch, e.last_sequence, e.last_timestamp, e.coordinator_epoch,
                              e.current_txn_first_offset) for _, e in sorted(self.producers.items())]

    def ongoing_transactions(self) -> dict[int, int]:
        return {pid: e.current_txn_first_offset for pid, e in self.producers.items()
                if e.current_txn_first_offset is not None}

    def first_unstable_offset(self, high_watermark: int | None = None,
                              log_start_offset: int | None = None) -> int | None:
        """Smallest first offset of an open transaction, or of a completed one whose marker
        is not yet below ``high_watermark`` (None: the high watermark follows the log end, so
        every completed one is replicated), at least ``log_start_offset`` when given; None
        when everything is stable. The one source of the last stable offset. O(producers)
        after a change of state, O(1) when asked again with the same high watermark."""
        if self._unstable is None or self._unstable[0] != high_watermark:
            if high_watermark is not None:
                self._unreplicated = [t for t in self._unreplicated if t[1] >= high_watermark]
            else:
                self._unreplicated = []
            firsts = [e.current_txn_first_offset for e in self.producers.values()
                      if e.current_txn_first_offset is not None]
            firsts += [t[0] for t in self._unreplicated]
            self._unstable = (high_watermark, min(firsts) if firsts else None)
        first = self._unstable[1]
        return first if first is None or log_start_offset is None else max(first, log_start_offset)

    def remove_expired(self, now_ms: int | None = None) -> list[int]:
        """Forget producers idle for ``producer_id_expiration_ms`` with no open transaction."""
        if now_ms is None:
            now_ms = clock_ms()
        gone = [pid for pid, e in self.producers.items()
                if e.current_txn_first_offset is None and now_ms - e.last_timestamp >= self.producer_id_expiration_ms]
        for pid in gone:
            del self.producers[pid]
        self._unstable = None
        return gone

    def entries(self) -> dict[int, ProducerEntry]:
        return dict(self.producers)


# -- the .snapshot file ---------------------------------------------------------------------------------

def encode_snapshot(entries: Iterable[ProducerEntry]) -> bytes:
    """Kafka's producer snapshot, version 1: header (version, CRC-32C of the rest, count), 46-byte entries."""
    body = [SNAPSHOT_ENTRY.pack(e.producer_id, e.epoch, e.last_sequence, e.last_offset,
                                (e.batches[-1].last_offset - e.batches[-1].first_offset) if e.batches else 0,
                                e.last_timestamp, e.coordinator_epoch,
                                -1 if e.current_txn_first_offset is None else e.current_txn_first_offset)
            for e in entries]
    count_and_entries = len(body).to_bytes(4, "big", signed=True) + b"".join(body)
    checksum = crc.crc32c(count_and_entries)
    return SNAPSHOT_VERSION.to_bytes(2, "big") + checksum.to_bytes(4, "big") + count_and_entries


def read_snapshot(path) -> list[ProducerEntry]:
    """Parse a ``.snapshot``; raises :class:`CorruptSnapshotError` for a bad version,
    CRC or size."""
    try:
        with open(path, "rb") as f:
            data = f.read()
    except OSError as e:
        if e.errno in (errno.EMFILE, errno.ENFILE):  # no descriptor left: the file is not damaged
            raise StorageError(e.errno, f"cannot read {os.fspath(path)}: {e.strerror}") from None
        raise CorruptSnapshotError(f"cannot read snapshot: {e}", path=os.fspath(path)) from None
    return parse_snapshot(data, os.fspath(path))


def parse_snapshot(data: bytes, path: str | None = None) -> list[ProducerEntry]:
    """The entries of a ``.snapshot``'s bytes (``path`` names it in errors); raises
    :class:`CorruptSnapshotError` for a bad version, CRC or size."""
    if len(data) < SNAPSHOT_HEADER.size:
        raise CorruptSnapshotError(f"snapshot of {len(data)} bytes is shorter than its header", path=path)
    version, stored_crc, count = SNAPSHOT_HEADER.unpack_from(data)
    if version != SNAPSHOT_VERSION:
        raise CorruptSnapshotError(f"snapshot version {version} is not {SNAPSHOT_VERSION}", path=path)
    if crc.crc32c(memoryview(data)[SNAPSHOT_CRC_FROM:]) != stored_crc:
        raise CorruptSnapshotError("snapshot CRC does not match", path=path)
    if count < 0 or len(data) != SNAPSHOT_HEADER.size + count * SNAPSHOT_ENTRY_BYTES:
        raise CorruptSnapshotError(f"snapshot declares {count} entries but holds {len(data)} bytes",
                                   path=path)
    out = []
    for i in range(count):
        (pid, epoch, last_seq, last_offset, offset_delta, ts, coord_epoch,
         txn_first) = SNAPSHOT_ENTRY.unpack_from(data, SNAPSHOT_HEADER.size + i * SNAPSHOT_ENTRY_BYTES)
        entry = ProducerEntry(pid, epoch, coordinator_epoch=coord_epoch, last_timestamp=ts,
                              current_txn_first_offset=None if txn_first < 0 else txn_first)
        if last_offset >= 0 and last_seq >= 0:
            first_seq = increment_sequence(last_seq, -offset_delta)
            entry.batches.append(BatchMetadata(first_seq, last_seq, last_offset - offset_delta, last_offset, ts))
        out.append(entry)
    return out
