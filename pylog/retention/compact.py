"""The compact policy: Kafka's log cleaner, one log at a time (docs/retention.md).

A pass: (1) pick the dirty range, from the first dirty offset (``cleaner-offset-checkpoint``)
to the first uncleanable offset (the active segment, the last stable offset, and
``min_compaction_lag_ms``); skip unless the dirty share of the cleanable bytes reaches
``min_cleanable_dirty_ratio``; (2) map every key in the dirty range to its latest offset,
stopping early if the map is full (the next pass goes on from there); (3) rewrite the
segments below the map's end in groups of at most ``segment_bytes``, keeping a record
only if no later record of its key exists; tombstones stay until ``delete_retention_ms``
after the pass that first kept them (the batch's delete horizon); records of aborted
transactions go, and transaction markers go as Kafka's cleaner lets them
(``txn_markers.py``); batches keep their base and last offsets and producer fields; (4) swap
the cleaned segments in with the ``.cleaned`` -> ``.swap`` protocol, crash-safe at each step.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from pylog import failpoints
from pylog.layout import CLEANER_OFFSET_CHECKPOINT, INT32_MAX
from pylog.record.batch import decode_batches
from pylog.record.encode import build_batch, now_ms as _now_ms
from pylog.retention.offset_map import DEFAULT_BUDGET_BYTES, OffsetMap
from pylog.retention.txn_markers import TxnMarkers


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
    with log._lock:
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


def _first_uncleanable_offset(log, now: int) -> int:
    bound = min(log.active_segment.base_offset, log.last_stable_offset, log.high_watermark)
    lag = log.config.min_compaction_lag_ms
    if lag > 0:
        for seg in log.segments:
            if seg.base_offset >= bound:
                break
            if now - seg.largest_timestamp() < lag:
                return seg.base_offset
    return bound


def _first_dirty_offset(log) -> int:
    from pylog.checkpoint import OffsetCheckpoint
    import os
    try:
        cp = OffsetCheckpoint(os.path.join(log._dir.log_dir, CLEANER_OFFSET_CHECKPOINT)).read()
    except Exception:
        cp = {}
    return max(cp.get(log._dir.key, log.log_start_offset), log.log_start_offset)


def _one_pass(log, now: int, budget_bytes: int, force: bool) -> CleanResult:
    result = CleanResult()
    end = _first_uncleanable_offset(log, now)
    first_dirty = min(_first_dirty_offset(log), end)
    result.first_dirty_offset = first_dirty
    segments = [s for s in log.segments if s.next_offset <= end and s is not log.active_segment]
    if not segments:
        return result
    cleanable_bytes = sum(s.size_bytes for s in segments)
    dirty_bytes = sum(s.size_bytes for s in segments if s.next_offset > first_dirty)
    horizon_due = getattr(log, "_min_delete_horizon", None) is not None and now >= log._min_delete_horizon
    if dirty_bytes == 0:
        if not (force or horizon_due):
            return result
        offset_map, map_end = OffsetMap(1), end  # nothing new: re-clean to drop expired tombstones
    elif not force and dirty_bytes / max(cleanable_bytes, 1) < log.config.min_cleanable_dirty_ratio:
        return result
    else:
        offset_map, map_end = _build_offset_map(log, segments, first_dirty, end, budget_bytes)
    if map_end <= first_dirty and dirty_bytes:
        return result
    log._min_delete_horizon = None
    to_clean = [s for s in segments if s.base_offset < map_end]
    markers = TxnMarkers(txn for seg in log.segments for txn in log._trusted_txn_index(seg).entries())
    last_batch_of_producer = {pid: e.last_offset for pid, e in (log._producers.entries() if log._producers else {}).items()}
    horizon = now + log.config.delete_retention_ms
    for group in _groups(to_clean, log.config.segment_bytes):
        cleaned = log.new_cleaned_segment(group[0].base_offset)
        for seg in group:
            result.bytes_read += seg.size_bytes
            _clean_segment_into(seg, cleaned, offset_map, map_end, now, horizon, markers,
                                last_batch_of_producer, result)
        cleaned.on_become_inactive()
        cleaned.flush()
        result.bytes_written += cleaned.size_bytes
        failpoints.hit("compact.cleaned-written")
        log.replace_segments([cleaned], group)
        failpoints.hit("compact.swapped")
        result.cleaned_segments += [s.base_offset for s in group]
    result.end_offset = map_end
    log._min_delete_horizon = result.min_delete_horizon
    log._dir.write_offsets({CLEANER_OFFSET_CHECKPOINT: map_end})
    return result


def _build_offset_map(log, segments, first_dirty: int, end: int, budget_bytes: int):
    """Latest offset per key in [first_dirty, end); stops at the first batch that does not fit."""
    offset_map = OffsetMap(budget_bytes)
    map_end = first_dirty
    for seg in segments:
        if seg.next_offset <= first_dirty:
            continue
        for batch in _batches(seg):
            if batch.last_offset < first_dirty or batch.is_control:
                map_end = max(map_end, batch.next_offset if batch.last_offset >= first_dirty else map_end)
                continue
            if batch.base_offset >= end:
                return offset_map, map_end
            records = batch.records()
            new_keys = sum(1 for r in records if r.key is not None and offset_map.get(r.key) < 0)
            if len(offset_map) + new_keys > offset_map.capacity and len(offset_map) > 0:
                return offset_map, map_end
            for r in records:
                if r.key is not None:
                    offset_map.put(r.key, r.offset)
            map_end = batch.next_offset
    return offset_map, map_end


def _batches(seg):
    data = seg.read_slice(0, seg.size_bytes)
    return decode_batches(data, allow_incomplete=True, path=seg.log_path)


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


def _clean_segment_into(seg, cleaned, offset_map, map_end, now, horizon, markers, last_of_producer, result):
    for batch in _batches(seg):
        if batch.magic != 2:
            data = _legacy_retained(batch, offset_map, map_end, result)
        elif batch.is_control:
            may_go, txn = markers.on_marker(batch)
            data = _control_retained(batch, may_go, now, horizon, last_of_producer, result)
            if data and txn is not None:
                cleaned.txn_index.append(txn)
        else:
            aborted = markers.on_data(batch)
            data = _v2_retained(batch, aborted, offset_map, map_end, now, horizon, last_of_producer, result)
        if data:
            cleaned.append(batch.last_offset, batch.max_timestamp, batch.last_offset, data)


def _keep(record, offset_map, map_end) -> bool:
    if record.key is None:
        return False  # compacted topics hold keyed records only
    if record.offset >= map_end:
        return True
    return offset_map.get(record.key) <= record.offset


def _control_retained(batch, may_go: bool, now: int, horizon: int, last_of_producer, result):
    """A marker that may go is stamped with a delete horizon, then removed after it (an
    empty batch stays if it is its producer's last, as for data batches)."""
    stamped = batch.delete_horizon_ms
    if not may_go:
        return bytes(batch.raw())
    if stamped is None:
        result.min_delete_horizon = min(result.min_delete_horizon or horizon, horizon)
        return _rebuild(batch, batch.records(), horizon)
    if now < stamped:
        result.min_delete_horizon = min(result.min_delete_horizon or stamped, stamped)
        return bytes(batch.raw())
    result.records_removed += len(batch.records())
    if last_of_producer.get(batch.producer_id) == batch.last_offset:
        return _rebuild(batch, [], None)
    return None


def _v2_retained(batch, aborted: bool, offset_map, map_end, now, horizon, last_of_producer, result):
    records = batch.records()
    if aborted:
        kept = []
    else:
        batch_horizon = batch.delete_horizon_ms
        kept = [r for r in records if _keep(r, offset_map, map_end)
                and not (r.value is None and batch_horizon is not None and now >= batch_horizon)]
    result.records_removed += len(records) - len(kept)
    has_tombstone = any(r.value is None for r in kept)
    if len(kept) == len(records) and (not has_tombstone or batch.delete_horizon_ms is not None):
        if has_tombstone:
            h = batch.delete_horizon_ms
            result.min_delete_horizon = min(result.min_delete_horizon or h, h)
        return bytes(batch.raw())  # nothing changes: copy the batch as it is
    if not kept:
        if batch.producer_id >= 0 and last_of_producer.get(batch.producer_id) == batch.last_offset:
            return _rebuild(batch, [], None)  # an empty batch keeps the producer's sequence
        return None
    new_horizon = batch.delete_horizon_ms
    if has_tombstone and new_horizon is None:
        new_horizon = horizon
    if new_horizon is not None:
        result.min_delete_horizon = min(result.min_delete_horizon or new_horizon, new_horizon)
    return _rebuild(batch, kept, new_horizon)


def _rebuild(batch, kept, delete_horizon):
    """A batch with the same header fields (base/last offset, producer, sequence, max
    timestamp) holding only ``kept`` records, at their original offsets."""
    base_ts = delete_horizon if delete_horizon is not None else (kept[0].timestamp if kept else -1)
    payload = _encode_with_offsets(kept, batch.base_offset, base_ts)
    raw = build_batch(payload, len(kept), base_offset=batch.base_offset, codec=batch.compression_id,
                      base_timestamp=base_ts, max_timestamp=batch.max_timestamp,
                      timestamp_type=batch.timestamp_type, producer_id=batch.producer_id,
                      producer_epoch=batch.producer_epoch, base_sequence=batch.base_sequence,
                      partition_leader_epoch=batch.partition_leader_epoch,
                      is_transactional=batch.is_transactional, is_control=batch.is_control,
                      delete_horizon_ms=delete_horizon,
                      log_append_time=batch.max_timestamp, last_offset_delta=batch.last_offset_delta)
    return raw


def _encode_with_offsets(records, base_offset: int, base_ts: int) -> bytes:
    from pylog.record.varint import varint_bytes as vb
    from pylog.record.encode import _header_bytes
    parts = []
    for r in records:
        key = b"\x01" if r.key is None else vb(len(r.key)) + r.key
        value = b"\x01" if r.value is None else vb(len(r.value)) + r.value
        body = b"\x00" + vb(r.timestamp - base_ts) + vb(r.offset - base_offset) + key + value + _header_bytes(r.headers)
        parts.append(vb(len(body)))
        parts.append(body)
    return b"".join(parts)


def _legacy_retained(batch, offset_map, map_end, result):
    """A legacy entry (or compressed wrapper) is kept whole while any of its records is
    still the latest for its key, and dropped whole otherwise."""
    records = batch.records()
    if any(_keep(r, offset_map, map_end) for r in records):
        return bytes(batch.raw())
    result.records_removed += len(records)
    return None


