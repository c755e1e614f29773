"""The compact policy: Kafka's log cleaner, one log at a time (docs/retention.md).

A pass: (1) pick the dirty range, from the first dirty offset (``cleaner-offset-checkpoint``)
to the first uncleanable offset (the active segment, the last stable offset, and
``min_compaction_lag_ms``, taken down to the base of the segment holding it); skip unless the dirty share of the cleanable bytes reaches
``min_cleanable_dirty_ratio``; (2) map every key in the dirty range to its latest offset,
skipping the records of aborted transactions (so that they never supersede a committed
value), stopping early if the map is full (the next pass goes on from there); (3) rewrite the
segments below the map's end (whole segments) in groups of at most ``segment_bytes``,
keeping a record only if no later record of its key exists; tombstones stay until ``delete_retention_ms``
after the pass that first kept them (the batch's delete horizon); records of aborted
transactions go, and transaction markers go as Kafka's cleaner lets them
(``txn_markers.py``); batches keep their base and last offsets and producer fields, and a
batch kept with no records is Kafka's 61-byte empty batch (docs/format/batch.md); (4) swap
the cleaned segments in with the ``.cleaned`` -> ``.swap`` protocol, crash-safe at each step.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass, field

from pylog import failpoints
from pylog.errors import StorageError
from pylog.layout import INT32_MAX
from pylog.record.encode import build_batch, encode_records, now_ms as _now_ms
from pylog.retention.offset_map import DEFAULT_BUDGET_BYTES, OffsetMap
from pylog.retention.txn_markers import TxnMarkers
from pylog.retention.view import CleanerView


@dataclass
class CleanResult:
    """What one compaction did."""

    cleaned_segments: list[int] = field(default_factory=list)
    bytes_read: int = 0
    bytes_written: int = 0
    records_removed: int = 0
    first_dirty_offset: int = 0
    end_offset: int = 0
    passes: int = 0
    min_delete_horizon: int | None = None

    @property
    def skipped(self) -> bool:
        return not self.cleaned_segments


def compact(log, now_ms: int | None = None, *, budget_bytes: int = DEFAULT_BUDGET_BYTES,
            force: bool = False, max_passes: int = 1000) -> CleanResult:
    """Compact ``log`` until its dirty range is clean (several passes if the offset map
    fills). ``force`` ignores ``min_cleanable_dirty_ratio``. Returns what was done."""
    total = CleanResult()
    if not log.config.compact:
        return total
    now = _now_ms() if now_ms is None else now_ms
    log = log.cleaner_view
    with log.lock:
        for _ in range(max_passes):
            result = _one_pass(log, now, budget_bytes, force or total.passes > 0)
            if result.skipped:
                break
            total.passes += 1
            total.cleaned_segments += result.cleaned_segments
            total.bytes_read += result.bytes_read
            total.bytes_written += result.bytes_written
            total.records_removed += result.records_removed
            total.end_offset = result.end_offset
            if result.end_offset >= _first_uncleanable_offset(log, now):
                break
    return total


def _first_uncleanable_offset(log: CleanerView, now: int) -> int:
    """Kafka's (LogCleanerManager.cleanableOffsets, then calculateCleanableBytes): the least
    of the active segment's base, the last stable offset and the base of the first segment
    within ``min_compaction_lag_ms``, taken down to the base offset of the segment holding
    it, so that a pass cleans whole segments only and never reaches the unstable part."""
    bound = min(log.active_segment.base_offset, log.last_stable_offset, log.high_watermark)
    lag = log.config.min_compaction_lag_ms
    if lag > 0:
        for seg in log.segments:
            if seg.base_offset >= bound:
                break
            if now - seg.largest_timestamp() < lag:
                bound = seg.base_offset
                break
    holding = [seg.base_offset for seg in log.segments if seg.base_offset <= bound]
    return holding[-1] if holding else bound


@dataclass
class _Pass:
    """What one pass decides with, batch by batch."""

    offset_map: OffsetMap
    map_end: int  # records at or above it stay: the map has not seen their keys
    upper_bound: int  # the first uncleanable offset, a segment's base
    now_ms: int
    delete_horizon_ms: int  # stamped on batches that first keep a tombstone or a removable marker
    markers: TxnMarkers
    last_of_producer: dict  # producer id -> (offset of its last data batch or None, epoch)
    result: CleanResult


def _one_pass(log: CleanerView, now: int, budget_bytes: int, force: bool) -> CleanResult:
    result = CleanResult()
    end = _first_uncleanable_offset(log, now)
    first_dirty = min(log.first_dirty_offset, end)
    result.first_dirty_offset = first_dirty
    segments = [s for s in log.segments if s.base_offset < end and s is not log.active_segment]
    planned = _map_for_pass(log, segments, first_dirty, end, now, budget_bytes, force) if segments else None
    if planned is None:
        return result
    offset_map, map_end = planned
    log.delete_horizon_ms = None
    to_clean = [s for s in segments if s.base_offset < map_end]
    p = _Pass(offset_map, map_end, end, now, now + log.config.delete_retention_ms,
              TxnMarkers(_aborted_txns(log, to_clean[0].base_offset)), log.producer_last_offsets(), result)
    for group in _groups(to_clean, log.config.segment_bytes):
        cleaned = _cleaned_group(log, group, p)
        result.bytes_written += cleaned.size_bytes
        failpoints.hit("compact.cleaned-written")
        log.replace_segments([cleaned], group)
        failpoints.hit("compact.swapped")
        result.cleaned_segments += [s.base_offset for s in group]
    result.end_offset = map_end
    log.delete_horizon_ms = result.min_delete_horizon
    log.first_dirty_offset = map_end
    return result


def _cleaned_group(log: CleanerView, group, p: _Pass):
    """The ``.cleaned`` segment holding what ``group`` keeps, flushed. A write that fails
    (a full disk) removes it again before the error goes on: the log is as before."""
    cleaned = log.new_cleaned_segment(group[0].base_offset)
    try:
        for seg in group:
            p.result.bytes_read += seg.size_bytes
            _clean_segment_into(seg, cleaned, p)
        cleaned.on_become_inactive()
        cleaned.flush()
    except StorageError:
        with contextlib.suppress(StorageError):
            cleaned.delete_files()
        raise
    return cleaned


def _map_for_pass(log: CleanerView, segments, first_dirty: int, end: int, now: int, budget_bytes: int, force: bool):
    """(offset map, map end) for a pass over ``segments`` (those below ``end``), or None
    when the pass is not due: too little of the cleanable bytes is dirty, or the map
    could not take a single batch."""
    cleanable_bytes = sum(s.size_bytes for s in segments)
    dirty_bytes = sum(s.size_bytes for s in segments if s.next_offset > first_dirty) if first_dirty < end else 0
    if dirty_bytes == 0:
        horizon_due = log.delete_horizon_ms is not None and now >= log.delete_horizon_ms
        if not (force or horizon_due):
            return None
        return OffsetMap(1), end  # nothing new: re-clean to drop expired tombstones and markers
    if not force and dirty_bytes / max(cleanable_bytes, 1) < log.config.min_cleanable_dirty_ratio:
        return None
    offset_map, map_end = _build_offset_map(log, segments, first_dirty, end, budget_bytes)
    return (offset_map, map_end) if map_end > first_dirty else None


def _aborted_txns(log: CleanerView, from_offset: int) -> list:
    """The aborted transactions whose ABORT marker is at or above ``from_offset`` (every
    segment's ``.txnindex`` is checked against its markers first, so later reads of
    ``seg.txn_index`` in this pass are trusted)."""
    return [t for seg in log.segments for t in log.trusted_txn_index(seg).entries() if t.last_offset >= from_offset]


def _build_offset_map(log: CleanerView, segments, first_dirty: int, end: int, budget_bytes: int):
    """Latest offset per key in [first_dirty, end), counting committed and non-transactional
    records only: a record of an aborted transaction never supersedes anything, as in
    Kafka's cleaner. Returns (map, map end): ``end``, or the next offset of the last batch
    that fit when the map filled up (the next pass goes on from there)."""
    dirty = [s for s in segments if s.next_offset > first_dirty]
    offset_map = OffsetMap(budget_bytes)
    if not dirty:
        return offset_map, first_dirty
    markers = TxnMarkers(_aborted_txns(log, dirty[0].base_offset))
    map_end = first_dirty
    for seg in dirty:
        for batch in seg.batches():
            if batch.base_offset >= end:
                return offset_map, end
            keys = _mapped_records(batch, markers, first_dirty)
            new_keys = sum(1 for r in keys if offset_map.get(r.key) < 0)
            if len(offset_map) + new_keys > offset_map.capacity and len(offset_map) > 0:
                return offset_map, map_end
            for r in keys:
                offset_map.put(r.key, r.offset)
            map_end = max(map_end, batch.next_offset)
    return offset_map, end


def _mapped_records(batch, markers: TxnMarkers, first_dirty: int) -> list:
    """The keyed records of ``batch`` at or above ``first_dirty`` that go into the offset
    map: none of a marker or of a batch of an aborted transaction. Keeps ``markers`` in
    step with the walk."""
    if batch.is_control:
        markers.on_marker(batch)
        return []
    if markers.on_data(batch) or batch.last_offset < first_dirty:
        return []
    return [r for r in batch.records() if r.key is not None and r.offset >= first_dirty]


def _groups(segments, segment_bytes: int):
    """Consecutive segments whose sizes add up to at most ``segment_bytes`` (at least one each)."""
    group, size = [], 0
    for seg in segments:
        if group and (size + seg.size_bytes > segment_bytes or seg.next_offset - group[0].base_offset > INT32_MAX):
            yield group
            group, size = [], 0
        group.append(seg)
        size += seg.size_bytes
    if group:
        yield group


def _clean_segment_into(seg, cleaned, p: _Pass) -> None:
    """Filter every batch of ``seg`` into ``cleaned`` (a segment wholly below the first
    uncleanable offset)."""
    for batch in seg.batches():
        if batch.magic != 2:
            data = _legacy_retained(batch, p)
        else:
            data = _v2_retained(batch, cleaned, p)
        if data:
            cleaned.append(batch.last_offset, batch.max_timestamp, batch.last_offset, data)


def _keep(record, p: _Pass, delete_horizon_ms: int | None) -> bool:
    """Kafka's record rule: a record the map has not reached stays; otherwise a keyed record
    stays if it is its key's latest, and a tombstone only until its batch's delete horizon."""
    if record.offset >= p.map_end:
        return True
    if record.key is None or p.offset_map.get(record.key) > record.offset:
        return False
    return record.value is not None or delete_horizon_ms is None or p.now_ms < delete_horizon_ms


def _v2_retained(batch, cleaned, p: _Pass) -> bytes | None:
    """Kafka's batch rule (its log cleaner's filter): the bytes to keep for ``batch``, or None.

    A batch of an aborted transaction loses all its records, and a marker that may go
    (``txn_markers.py``) loses its record once its delete horizon has passed. A producer's
    last data batch (or, without one, its last marker) and the last batch below the first
    uncleanable offset stay even when emptied, as a 61-byte header (:func:`_empty_batch`).
    Unchanged batches are copied byte for byte; a batch that first keeps a tombstone or a
    removable marker is stamped with the pass's delete horizon."""
    may_go, discard = _txn_fate(batch, cleaned, p)
    retain_empty = _is_last_of_producer(batch, p.last_of_producer) or batch.next_offset == p.upper_bound
    if discard and not retain_empty:
        p.result.records_removed += len(batch)
        return None
    records = batch.records()
    if discard:
        kept = []
    else:
        kept = records if batch.is_control else [r for r in records if _keep(r, p, batch.delete_horizon_ms)]
    p.result.records_removed += len(records) - len(kept)
    if not kept:
        return _empty_batch(batch) if retain_empty else None
    stamp = batch.delete_horizon_ms is None and ((batch.is_control and may_go) or any(r.value is None for r in kept))
    horizon = p.delete_horizon_ms if stamp else batch.delete_horizon_ms
    if horizon is not None:
        p.result.min_delete_horizon = min(p.result.min_delete_horizon or horizon, horizon)
    if len(kept) == len(records) and not stamp:
        return bytes(batch.raw())
    return _rebuild(batch, kept, horizon)


def _txn_fate(batch, cleaned, p: _Pass) -> tuple[bool, bool]:
    """(whether the transaction rules let ``batch`` go, whether its records go in this
    pass): a batch of an aborted transaction goes at once, a marker that may go only after
    its delete horizon. Appends the ``.txnindex`` entry of an ABORT marker that stays."""
    if not batch.is_control:
        aborted = p.markers.on_data(batch)
        return aborted, aborted
    may_go, txn = p.markers.on_marker(batch)
    if txn is not None:
        cleaned.txn_index.append(txn)
    horizon = batch.delete_horizon_ms
    return may_go, may_go and horizon is not None and p.now_ms >= horizon


def _is_last_of_producer(batch, last_of_producer) -> bool:
    if not batch.has_producer_id or batch.producer_id not in last_of_producer:
        return False
    last_data_offset, epoch = last_of_producer[batch.producer_id]
    if last_data_offset is not None:
        return batch.last_offset == last_data_offset
    return batch.is_control and batch.producer_epoch == epoch


def _empty_batch(batch) -> bytes:
    """The header-only batch Kafka's cleaner writes for a batch kept with no records: 61
    bytes, uncompressed, no delete horizon, base timestamp -1, record count 0; base and
    last offsets, producer id, epoch and base sequence, leader epoch, timestamp type, max
    timestamp and the transactional and control flags as in ``batch``."""
    return build_batch(b"", 0, base_offset=batch.base_offset, codec=0, base_timestamp=-1,
                       max_timestamp=batch.max_timestamp, timestamp_type=batch.timestamp_type,
                       producer_id=batch.producer_id, producer_epoch=batch.producer_epoch,
                       base_sequence=batch.base_sequence, partition_leader_epoch=batch.partition_leader_epoch,
                       is_transactional=batch.is_transactional, is_control=batch.is_control,
                       log_append_time=batch.max_timestamp, last_offset_delta=batch.last_offset_delta)


def _rebuild(batch, kept, delete_horizon):
    """A batch with the same header fields (base/last offset, producer, sequence, max
    timestamp, codec) holding only ``kept`` (at least one record), at their original offsets."""
    base_ts = delete_horizon if delete_horizon is not None else kept[0].timestamp
    payload, _, _ = encode_records(kept, base_ts, offset_deltas=[r.offset - batch.base_offset for r in kept])
    raw = build_batch(payload, len(kept), base_offset=batch.base_offset, codec=batch.compression_id,
                      base_timestamp=base_ts, max_timestamp=batch.max_timestamp,
                      timestamp_type=batch.timestamp_type, producer_id=batch.producer_id,
                      producer_epoch=batch.producer_epoch, base_sequence=batch.base_sequence,
                      partition_leader_epoch=batch.partition_leader_epoch,
                      is_transactional=batch.is_transactional, is_control=batch.is_control,
                      delete_horizon_ms=delete_horizon,
                      log_append_time=batch.max_timestamp, last_offset_delta=batch.last_offset_delta)
    return raw


def _legacy_retained(batch, p: _Pass):
    """A legacy entry (or compressed wrapper) is kept whole while any of its records is
    still the latest for its key, and dropped whole otherwise."""
    records = batch.records()
    if any(_keep(r, p, None) for r in records):
        return bytes(batch.raw())
    p.result.records_removed += len(records)
    return None
