"""Which layout of Kafka data a store holds, and the remote segments of each partition in it.

Three layouts (docs/tiered.md):

- **log dir**: a Kafka log dir copied as it is, ``<topic>-<partition>/<20-digit base
  offset>.log`` with ``.index``, ``.timeindex`` and ``.txnindex`` beside it; the store's
  root may also be one partition's directory.
- **aiven**: Aiven's tiered storage plugin, ``<prefix><topic>-<topicId>/<partition>/<20-digit
  start offset>-<segmentId>.{log,indexes,rsm-manifest}`` (:mod:`pylog.remote.aiven`).
- **local-tiered**: Kafka's reference ``LocalTieredStorage``,
  ``<topic>-<partition>-<topicId>/<start offset>-<segmentId>.{log,index,timeindex,txnindex,
  snapshot,leader_epoch_checkpoint}``.

In the tiered layouts a listing is not the truth: a retried upload leaves the segment's
objects twice, under two segment ids. With ``__remote_log_metadata``
(:class:`~pylog.remote.metadata.RemoteLogMetadata`) only the segments it says are copied
count; without it, the copies of one start offset count once (the last listed complete
one) and a :class:`RemoteLayoutWarning` says so.
"""

from __future__ import annotations

import re
import warnings
from dataclasses import dataclass, field

from pylog.errors import CorruptFileError, InvalidRecordError, PylogWarning, UnknownTopicError
from pylog.layout import INDEX_SUFFIX, LOG_SUFFIX, OFFSET_DIGITS, TIME_INDEX_SUFFIX, TXN_INDEX_SUFFIX
from pylog.remote import aiven
from pylog.remote.segment import IndexSource, LazyBytes, ObjectBytes, RemoteSegment

LOG_DIR, AIVEN, LOCAL_TIERED = "log dir", "aiven", "local-tiered"

_UUID = r"[A-Za-z0-9_-]{22}"
_LOG_DIR_SEGMENT = re.compile(rf"(?:(?P<dir>.+)/)?(?P<base>\d{{{OFFSET_DIGITS}}})\.log")
_PARTITION_DIR = re.compile(r"(?P<topic>.+)-(?P<partition>\d+)")
_LOCAL_TIERED_SEGMENT = re.compile(rf"(?:(?P<root>.*)/)?(?P<dir>(?P<topic>[^/]+)-(?P<partition>\d+)-"
                                   rf"(?P<topic_id>{_UUID}))/(?P<start>\d+)-(?P<segment_id>{_UUID})\.log")
_LOCAL_TIERED_INDEXES = {"offset": ".index", "timestamp": ".timeindex", "transaction": ".txnindex",
                         "producer_snapshot": ".snapshot", "leader_epoch": ".leader_epoch_checkpoint"}


class RemoteLayoutWarning(PylogWarning):
    """A tiered layout read without ``__remote_log_metadata``: which segments are live was
    guessed from the listing."""


@dataclass
class SegmentEntry:
    """One segment's objects as listed: where it starts, its segment id (tiered layouts),
    and how to build its :class:`RemoteSegment`."""

    start_offset: int
    segment_id: str | None
    build: object  # () -> RemoteSegment


@dataclass
class Listing:
    """A store's contents by layout: ``partitions[(topic, partition)]`` -> its segments'
    entries sorted by start offset; ``topic_ids[topic]`` for the tiered layouts."""

    layout: str
    objects: dict = field(default_factory=dict)  # every listed key -> size
    partitions: dict = field(default_factory=dict)
    topic_ids: dict = field(default_factory=dict)
    dirs: dict = field(default_factory=dict)  # (topic, partition) -> the key prefix of its objects ("" at the root)

    def topics(self) -> list[str]:
        return sorted({t for t, _ in self.partitions})

    def partitions_of(self, topic: str) -> list[int]:
        found = sorted(p for t, p in self.partitions if t == topic)
        if not found:
            raise UnknownTopicError(f"no partition of topic {topic!r} in this {self.layout}")
        return found


def list_store(store, prefix: str = "", *, encryption_key=None) -> Listing:
    """List ``store`` once (one LIST walk) and tell its layout and partitions. A root that
    holds none of the layouts' files is an empty log dir. ``encryption_key``: the
    :class:`~pylog.remote.aiven.KeyPair` (or key ring) of encrypted Aiven segments. Cost: the
    listing's requests."""
    objects = store.list(prefix)
    for finder in (_aiven, _local_tiered, _log_dir):
        found = finder(store, objects, encryption_key)
        if found is not None:
            found.objects = objects
            return found
    return Listing(LOG_DIR, objects)


# -- a plain log dir ---------------------------------------------------------------------------

def _log_dir(store, objects: dict, _encryption_key=None) -> Listing | None:
    out = Listing(LOG_DIR)
    for key in objects:
        m = _LOG_DIR_SEGMENT.fullmatch(key)
        if m is None:
            continue
        directory = m["dir"] or ""
        where = _PARTITION_DIR.fullmatch(directory.rsplit("/", 1)[-1] if directory else _root_name(store))
        if where is None or "/" in directory:
            continue
        base = int(m["base"])
        prefix = f"{directory}/{m['base']}" if directory else m["base"]
        out.dirs[(where["topic"], int(where["partition"]))] = f"{directory}/" if directory else ""
        out.partitions.setdefault((where["topic"], int(where["partition"])), []).append(
            SegmentEntry(base, None, _plain_builder(store, objects, prefix, base)))
    for entries in out.partitions.values():
        entries.sort(key=lambda e: e.start_offset)
    return out if out.partitions else None


def _root_name(store) -> str:
    return store.url().rstrip("/").rsplit("/", 1)[-1]


def _plain_builder(store, objects: dict, prefix: str, base: int):
    suffixes = {"offset": INDEX_SUFFIX, "timestamp": TIME_INDEX_SUFFIX, "transaction": TXN_INDEX_SUFFIX}

    def load(kind: str) -> bytes | None:
        key = prefix + suffixes[kind] if kind in suffixes else None
        return _read_listed(store, objects, key)

    def build() -> RemoteSegment:
        log_key = prefix + LOG_SUFFIX
        return RemoteSegment(base, ObjectBytes(store, log_key, objects[log_key]), IndexSource(load))
    return build


def _read_listed(store, objects: dict, key: str | None) -> bytes | None:
    """The listed object ``key`` (None when not listed; no request when empty)."""
    if key not in objects:
        return None
    return store.read(key) if objects[key] else b""


# -- Aiven's plugin ----------------------------------------------------------------------------

def _aiven(store, objects: dict, encryption_key=None) -> Listing | None:

    out = Listing(AIVEN)
    for key in objects:
        if not key.endswith(".rsm-manifest"):
            continue
        try:
            k = aiven.parse_object_key(key)
        except InvalidRecordError:
            continue
        base_key = key[: -len("rsm-manifest")]
        if base_key + "log" not in objects or base_key + "indexes" not in objects:
            continue  # a copy that never finished (the manifest is written last, but be safe)
        where = (k.topic, k.partition)
        out.topic_ids[k.topic] = k.topic_id
        out.dirs[where] = key[: len(key) - len(key.rsplit("/", 1)[-1])]
        out.partitions.setdefault(where, []).append(SegmentEntry(
            k.start_offset, k.segment_id, _aiven_builder(store, aiven, base_key, k.start_offset, k.segment_id,
                                                         encryption_key)))
    for entries in out.partitions.values():
        entries.sort(key=lambda e: e.start_offset)
    return out if out.partitions else None


def _aiven_builder(store, aiven, base_key: str, start: int, segment_id: str, encryption_key):
    """A segment whose manifest is read on its first read (one GET), its indexes on the
    first lookup (one GET of ``.indexes``)."""
    def build() -> RemoteSegment:
        manifest_key = base_key + "rsm-manifest"
        manifest: list = []

        def the_manifest():
            if not manifest:
                manifest.append(aiven.SegmentManifest.parse(store.read(manifest_key), path=store.url(manifest_key)))
            return manifest[0]

        def load(kind: str) -> bytes | None:
            if not indexes:
                indexes.update(aiven.read_indexes(store, base_key + "indexes", the_manifest(),
                                                  encryption_key=encryption_key))
            return indexes.get(kind)
        indexes: dict = {}
        log = LazyBytes(store.url(base_key + "log"), lambda: aiven.ChunkedSegmentBytes(
            store, base_key + "log", the_manifest(), encryption_key=encryption_key))
        return RemoteSegment(start, log, IndexSource(load), segment_id=segment_id)
    return build


# -- Kafka's LocalTieredStorage ------------------------------------------------------------------

def _local_tiered(store, objects: dict, _encryption_key=None) -> Listing | None:
    out = Listing(LOCAL_TIERED)
    for key in objects:
        m = _LOCAL_TIERED_SEGMENT.fullmatch(key)
        if m is None or "/" in (m["root"] or ""):
            continue
        where = (m["topic"], int(m["partition"]))
        out.topic_ids[m["topic"]] = m["topic_id"]
        out.dirs[where] = key[: len(key) - len(key.rsplit("/", 1)[-1])]
        prefix = key[: -len(LOG_SUFFIX)]
        out.partitions.setdefault(where, []).append(
            SegmentEntry(int(m["start"]), m["segment_id"], _local_tiered_builder(store, objects, prefix,
                                                                                  int(m["start"]), m["segment_id"])))
    for entries in out.partitions.values():
        entries.sort(key=lambda e: e.start_offset)
    return out if out.partitions else None


def _local_tiered_builder(store, objects: dict, prefix: str, start: int, segment_id: str):
    def load(kind: str) -> bytes | None:
        return _read_listed(store, objects, prefix + _LOCAL_TIERED_INDEXES[kind])

    def build() -> RemoteSegment:
        log_key = prefix + LOG_SUFFIX
        return RemoteSegment(start, ObjectBytes(store, log_key, objects[log_key]), IndexSource(load),
                             segment_id=segment_id)
    return build


# -- which segments are live ---------------------------------------------------------------------

def live_entries(listing: Listing, topic: str, partition: int, metadata=None) -> tuple[list[SegmentEntry], list]:
    """The entries of ``topic``-``partition`` that count, oldest first, and (with
    ``metadata``) the matching :class:`~pylog.remote.metadata.RemoteSegmentInfo` of each
    (None entries without it). A segment the metadata says is copied but whose objects are
    not listed raises :class:`CorruptFileError` naming it."""
    entries = listing.partitions.get((topic, partition), [])
    if listing.layout == LOG_DIR:
        return entries, [None] * len(entries)
    if metadata is None:
        chosen = _deduplicated(entries, topic, partition)
        return chosen, [None] * len(chosen)
    by_id = {e.segment_id: e for e in entries}
    chosen, infos = [], []
    for info in metadata.live_segments(topic, partition):
        entry = by_id.get(info.segment_id_text)
        if entry is None:
            raise CorruptFileError(f"remote segment {info.segment_id_text} of {topic}-{partition} "
                                   f"(offsets {info.start_offset}..{info.end_offset}) is listed as copied in "
                                   f"__remote_log_metadata, but its objects are missing from the store")
        chosen.append(entry)
        infos.append(info)
    return chosen, infos


def _deduplicated(entries: list[SegmentEntry], topic: str, partition: int) -> list[SegmentEntry]:
    by_start: dict[int, SegmentEntry] = {}
    for e in entries:
        by_start[e.start_offset] = e  # a retried upload: the copies hold the same bytes
    warnings.warn(f"{topic}-{partition} is read without remote_log_metadata= (the __remote_log_metadata "
                  f"partitions): retried uploads may be double-counted, so the listing is de-duplicated by "
                  f"offset range ({len(entries) - len(by_start)} copies left out)", RemoteLayoutWarning, stacklevel=4)
    return [by_start[k] for k in sorted(by_start)]
