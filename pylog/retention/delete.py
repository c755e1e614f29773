"""The delete policy: Kafka's ``deleteOldSegments``.

Oldest segments go first, and only while the rule holds for each in turn; a segment is
deletable only if everything in it is below the high watermark. Three rules:
``retention_ms`` (the segment's largest timestamp is older than now - retention_ms),
``retention_bytes`` (the log is larger than the limit by at least the segment's size),
and the log start offset (the segment lies wholly below it, always applied). If the
active segment itself is expired and not empty, the log rolls first so it can go.
"""

from __future__ import annotations

from pylog.record.encode import now_ms as _now_ms
from pylog.retention.view import CleanerView


def enforce_retention(log, now_ms: int | None = None) -> list[int]:
    """Apply the delete policy to ``log``; returns the base offsets of the segments removed.
    Idempotent: a second call with the same clock removes nothing more."""
    return _enforce(log.cleaner_view, _now_ms() if now_ms is None else now_ms)


def _enforce(log: CleanerView, now: int) -> list[int]:
    removed = []
    with log.lock:
        removed += _delete_while(log, lambda seg, nxt: nxt is not None and nxt.base_offset <= log.log_start_offset)
        if log.config.delete:
            if log.config.retention_ms >= 0:
                removed += _delete_while(log, lambda seg, nxt: now - seg.largest_timestamp() > log.config.retention_ms)
            if log.config.retention_bytes >= 0:
                removed += _delete_by_size(log)
    return removed


def _deletable(log, predicate) -> list:
    segs = log.segments
    out = []
    for i, seg in enumerate(segs):
        nxt = segs[i + 1] if i + 1 < len(segs) else None
        upper = nxt.base_offset if nxt is not None else log.log_end_offset
        if upper > log.high_watermark or not predicate(seg, nxt):
            break
        if nxt is None and seg.size_bytes == 0:
            break
        out.append(seg)
    return out


def _delete_while(log, predicate) -> list[int]:
    doomed = _deletable(log, predicate)
    if not doomed:
        return []
    if doomed[-1] is log.active_segment:
        log.roll()  # Kafka rolls so an expired active segment can be deleted
    return log.delete_segments(doomed)


def _delete_by_size(log) -> list[int]:
    excess = log.size_bytes - log.config.retention_bytes
    if excess <= 0:
        return []
    budget = [excess]

    def fits(seg, nxt) -> bool:
        if budget[0] - seg.size_bytes < 0:
            return False
        budget[0] -= seg.size_bytes
        return True

    return _delete_while(log, fits)
