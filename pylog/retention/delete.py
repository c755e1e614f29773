"""The delete policy: Kafka's ``deleteOldSegments``.

Oldest segments go first, and only while the rule holds for each in turn; a segment is
deletable only if everything in it is below the high watermark. Three rules:
``retention_ms`` (the segment's largest timestamp is older than now - retention_ms),
``retention_bytes`` (the log is larger than the limit by at least the segment's size),
and the log start offset (the segment lies wholly below it, always applied). If the
active segment itself is expired and not empty, the log rolls first so it can go.

A topic with ``remote_storage_enable`` (pylog/remote/manager.py) keeps its local segments by
``local_retention_ms``/``local_retention_bytes`` instead, and only a segment whose copy to
remote storage has finished may go (Kafka's UnifiedLog with remote storage): the others wait,
however old, so nothing is lost while the store is down. Total retention of a tiered topic
applies to the copies (RemoteLogManager).
"""

from __future__ import annotations

from pylog.record.encode import now_ms as _now_ms
from pylog.retention.view import CleanerView


def enforce_retention(log, now_ms: int | None = None, *, remote_end_offset: int | None = None) -> list[int]:
    """Apply the delete policy to ``log``; returns the base offsets of the segments removed.
    ``remote_end_offset``: for a tiered topic, the last offset whose copy has finished (None:
    none has, and no segment goes by time or size). Idempotent: a second call with the same
    clock removes nothing more."""
    return _enforce(log.cleaner_view, _now_ms() if now_ms is None else now_ms, remote_end_offset)


def _enforce(log: CleanerView, now: int, remote_end_offset: int | None) -> list[int]:
    removed = []
    config = log.config
    tiered = config.remote_storage_enable
    retention_ms = config.resolved_local_retention_ms if tiered else config.retention_ms
    retention_bytes = config.resolved_local_retention_bytes if tiered else config.retention_bytes

    def copied(nxt) -> bool:  # wholly copied to remote storage, or not tiered
        if not tiered:
            return True
        return remote_end_offset is not None and nxt is not None and nxt.base_offset - 1 <= remote_end_offset

    with log.lock:
        removed += _delete_while(log, lambda seg, nxt: nxt is not None and nxt.base_offset <= log.log_start_offset)
        if config.delete:
            if retention_ms >= 0:
                removed += _delete_while(
                    log, lambda seg, nxt: copied(nxt) and now - seg.largest_timestamp() > retention_ms)
            if retention_bytes >= 0:
                removed += _delete_by_size(log, retention_bytes, copied)
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


def _delete_by_size(log, retention_bytes: int, copied) -> list[int]:
    excess = log.size_bytes - retention_bytes
    if excess <= 0:
        return []
    budget = [excess]

    def fits(seg, nxt) -> bool:
        if not copied(nxt) or budget[0] - seg.size_bytes < 0:
            return False
        budget[0] -= seg.size_bytes
        return True

    return _delete_while(log, fits)
