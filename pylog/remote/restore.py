"""Restore: tiered segments in object storage back into partition directories a broker and
pylog open as their own (``pylog tiered pull``; docs/tiered.md).

For each partition found at the URL (Aiven's layout, Kafka's LocalTieredStorage, or a plain
log dir copied to a bucket; pylog/remote/layouts.py), the segments that count are written
oldest first: ``<base offset>.log`` byte for byte, ``.index``, ``.timeindex`` and (where
non-empty) ``.txnindex`` from the segment's indexes; the last segment's producer snapshot as
``<log end offset>.snapshot`` and its leader-epoch index as ``leader-epoch-checkpoint``; and
``partition.metadata`` with the topic id of a tiered layout. Which segments count: the live
ones of ``__remote_log_metadata`` when given, else the listing de-duplicated by start offset
(with a :class:`~pylog.remote.layouts.RemoteLayoutWarning`: retried uploads may be double
counted).

Each partition is written in ``<dest>/<topic>-<partition>.restoring`` (fsynced) and renamed
into place last, so an interrupted restore leaves no partition directory half written; an
existing partition directory is refused before anything is written.
"""

from __future__ import annotations

import os
import shutil
from dataclasses import dataclass

from pylog.checkpoint import LeaderEpochCheckpoint, parse_checkpoint, write_partition_metadata
from pylog.errors import CorruptFileError, InvalidArgumentError, UnknownTopicError
from pylog.layout import (
    INDEX_SUFFIX, LEADER_EPOCH_CHECKPOINT, LOG_SUFFIX, PARTITION_METADATA, SNAPSHOT_SUFFIX, TIME_INDEX_SUFFIX,
    TXN_INDEX_SUFFIX, segment_file_name,
)
from pylog.partition_dir import ensure_directory, partition_dir_name
from pylog.remote.layouts import list_store, live_entries
from pylog.remote.log_dir import open_remote_log_metadata
from pylog.remote.store import ObjectStore, redact

#: Bytes of a ``.log`` fetched per request while copying it down.
COPY_CHUNK_BYTES = 8 * 1024 * 1024
_RESTORING = ".restoring"


@dataclass(frozen=True)
class RestoredPartition:
    """One partition written: its directory, segments' base offsets, and log end offset."""
    topic: str
    partition: int
    path: str
    base_offsets: tuple
    log_end_offset: int


def pull(url, dest, *, topic: str | None = None, remote_log_metadata=None,
         storage_options: dict | None = None) -> list[RestoredPartition]:
    """Rebuild the partitions at ``url`` (only ``topic``'s when given) under the log dir
    ``dest`` (created if missing). ``remote_log_metadata``: the log dir (path or URL) holding
    ``__remote_log_metadata``. Raises :class:`UnknownTopicError` when ``url`` holds no such
    partition, :class:`InvalidArgumentError` for a partition directory already in ``dest``,
    before writing anything. Cost: one listing, then a read of every live segment's
    objects; each partition fsynced before it is renamed into place."""
    store = ObjectStore.from_url(url, storage_options)
    listing = list_store(store)
    metadata = None if remote_log_metadata is None else open_remote_log_metadata(remote_log_metadata, storage_options)
    wanted = [(t, p) for t, p in sorted(listing.partitions) if topic is None or t == topic]
    if not wanted:
        raise UnknownTopicError(f"no partition {'of topic ' + repr(topic) + ' ' if topic else ''}at {redact(str(url))}")
    dest = os.fspath(dest)
    ensure_directory(dest, create=True, what="log dir")
    for t, p in wanted:
        path = os.path.join(dest, partition_dir_name(t, p))
        if os.path.exists(path):
            raise InvalidArgumentError(f"{path} already exists: pull restores into partition directories "
                                       f"that are not there yet")
    return [_restore_partition(listing, metadata, t, p, dest) for t, p in wanted]


def _restore_partition(listing, metadata, topic: str, partition: int, dest: str) -> RestoredPartition:
    entries, _ = live_entries(listing, topic, partition, metadata)
    final = os.path.join(dest, partition_dir_name(topic, partition))
    work = final + _RESTORING
    shutil.rmtree(work, ignore_errors=True)  # what an interrupted restore left
    os.makedirs(work)
    try:
        return _fill(listing, entries, topic, partition, work, final, dest)
    except BaseException:
        shutil.rmtree(work, ignore_errors=True)
        raise


def _fill(listing, entries, topic: str, partition: int, work: str, final: str, dest: str) -> RestoredPartition:
    bases, end, last = [], None, None
    for entry in entries:
        segment = entry.build()
        if end is not None and segment.base_offset < end:
            continue  # overlaps the previous one (a copy from another leader epoch): its offsets are there
        _write_segment(segment, work)
        bases.append(segment.base_offset)
        end, last = segment.end_offset + 1, segment
    if last is not None:
        snapshot = last.indexes.get("producer_snapshot")
        if snapshot:  # an empty one (a segment copied without) is no snapshot: the loader rebuilds the state
            _write_file(os.path.join(work, segment_file_name(end, SNAPSHOT_SUFFIX)), snapshot)
        _write_epochs(work, last.indexes.get("leader_epoch"), segment_file=last.url)
    topic_id = listing.topic_ids.get(topic)
    if topic_id is not None:
        write_partition_metadata(os.path.join(work, PARTITION_METADATA), topic_id)
    _fsync_dir(work)
    os.rename(work, final)
    _fsync_dir(dest)
    return RestoredPartition(topic, partition, final, tuple(bases), end if end is not None else 0)


def _write_segment(segment, directory: str) -> None:
    """The segment's ``.log`` (copied in ``COPY_CHUNK_BYTES`` reads) and indexes, fsynced."""
    source = segment.file.source
    with open(os.path.join(directory, segment_file_name(segment.base_offset, LOG_SUFFIX)), "wb") as f:
        for position in range(0, source.size, COPY_CHUNK_BYTES):
            f.write(source.read(position, COPY_CHUNK_BYTES))
        f.flush()
        os.fsync(f.fileno())
    for kind, suffix in (("offset", INDEX_SUFFIX), ("timestamp", TIME_INDEX_SUFFIX), ("transaction", TXN_INDEX_SUFFIX)):
        data = segment.indexes.get(kind)
        if data or kind != "transaction":
            _write_file(os.path.join(directory, segment_file_name(segment.base_offset, suffix)), data or b"")


def _write_epochs(directory: str, data: bytes | None, *, segment_file: str) -> None:
    """The leader-epoch index (a checkpoint's text), checked, as ``leader-epoch-checkpoint``."""
    if not data:
        return
    try:
        entries = parse_checkpoint(data.decode("utf-8"), lambda parts: (int(parts[0]), int(parts[1])),
                                   path=f"the leader-epoch index of {segment_file}")
    except (UnicodeDecodeError, ValueError, IndexError):
        raise CorruptFileError(f"the leader-epoch index of {segment_file} is not a leader-epoch checkpoint",
                               path=segment_file) from None
    LeaderEpochCheckpoint(os.path.join(directory, LEADER_EPOCH_CHECKPOINT)).write(entries)


def _write_file(path: str, data: bytes | None) -> None:
    if data is None:
        return
    with open(path, "wb") as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())


def _fsync_dir(path: str) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
