"""The offsets a Spark read of a partition skips, and why (docs/spark.md, "Data loss and
offset gaps").

An offset range ``[start, end)`` may hold offsets with no record to return:

- **data loss**: offsets that are no longer in the log: below its start (deleted by
  retention or ``delete_records``) or past its end (a truncated or recreated partition).
  With ``failOnDataLoss=true`` the read fails with :class:`DataLossError` naming the first
  missing offset and why; with ``false`` each skipped range is logged once, at WARNING.
- **gaps the log holds by design**, never data loss (a Kafka consumer skips them too):
  records compaction removed, transaction markers (one offset each, committed or aborted),
  and with ``read_committed`` the records of aborted transactions. Each range is logged
  once, at INFO, whatever ``failOnDataLoss`` says.

Every range is logged by the task that reads it (a Spark executor's Python worker), on the
logger ``pylog.spark.gaps``, as ``<topic>-<partition>: skipped offsets [a, b): <reason>``.
Pure Python and numpy; no pyspark.
"""

from __future__ import annotations

import logging

import numpy as np

from pylog.errors import DataLossError
from pylog.segment.fetch import _AbortFilter

LOGGER = logging.getLogger(__name__)

COMPACTED = "compacted away"
MARKERS = "transaction markers"
ABORTED = "records of an aborted transaction (read_committed)"


def retention_reason(log_start_offset: int) -> str:
    """Why offsets below ``log_start_offset`` are missing.

    >>> retention_reason(250)
    'deleted by retention or delete_records (the log now starts at 250)'
    """
    return f"deleted by retention or delete_records (the log now starts at {log_start_offset})"


def truncation_reason(log_end_offset: int) -> str:
    """Why offsets at or past ``log_end_offset`` are missing."""
    return f"past the log end {log_end_offset} (the partition was truncated or recreated)"


def lost(topic: str, partition: int, start: int, end: int, reason: str, *, fail: bool) -> int:
    """Data loss of ``[start, end)``: :class:`DataLossError` naming ``start`` when ``fail``,
    else a WARNING; returns ``end``, where the read goes on."""
    if fail:
        raise DataLossError(topic, partition, start, reason)
    LOGGER.warning("%s-%d: skipped offsets [%d, %d): %s", topic, partition, start, end, reason)
    return end


def check_lost(log, topic: str, partition: int, offset: int, end: int, *, fail: bool) -> int | None:
    """Where a read of ``log`` at ``offset`` (of a range ending at ``end``) goes on when
    ``offset`` is outside the log: the log start or ``end``, after :func:`lost`; None when
    it is inside. Cost: the log's start and end offsets."""
    start, log_end = log.log_start_offset, log.log_end_offset
    if offset < start:
        return lost(topic, partition, offset, min(start, end), retention_reason(start), fail=fail)
    if offset >= log_end and end > log_end:
        return lost(topic, partition, offset, end, truncation_reason(log_end), fail=fail)
    return None


def log_gaps(topic: str, partition: int, fetch, offsets, lo: int, hi: int) -> None:
    """Log (INFO) each range of ``[lo, hi)`` that holds no offset of ``offsets`` (the sorted
    record offsets a read of ``fetch`` returns), with its reason from ``fetch``'s batch
    headers. Nothing is computed unless INFO is enabled for :data:`LOGGER`. Cost: O(records)
    in numpy, plus O(batches + gaps)."""
    if hi <= lo or not LOGGER.isEnabledFor(logging.INFO):
        return
    for a, b, reason in gap_ranges(fetch, np.asarray(offsets, dtype=np.int64), lo, hi):
        LOGGER.info("%s-%d: skipped offsets [%d, %d): %s", topic, partition, a, b, reason)


def gap_ranges(fetch, offsets: np.ndarray, lo: int, hi: int) -> list[tuple[int, int, str]]:
    """``[(a, b, reason)]``: the ranges of ``[lo, hi)`` without a record in ``offsets``,
    each cut by the batches that explain it: a control batch (:data:`MARKERS`), an aborted
    transaction's batch in a committed read (:data:`ABORTED`), else :data:`COMPACTED`
    (records a batch lost, or whole batches gone); adjacent pieces of one reason merged."""
    edges = np.concatenate(([lo - 1], offsets, [hi]))
    holes = [(int(edges[i]) + 1, int(edges[i + 1])) for i in np.flatnonzero(np.diff(edges) > 1)]
    if not holes:
        return []
    skipped = _skipped_batches(fetch, lo, hi)
    out: list[tuple[int, int, str]] = []
    for a, b in holes:
        cursor = a
        for sa, sb, reason in skipped:
            if sb <= cursor or sa >= b:
                continue
            if sa > cursor:
                _add(out, cursor, sa, COMPACTED)
            cursor = min(sb, b)
            _add(out, max(sa, a), cursor, reason)
        if cursor < b:
            _add(out, cursor, b, COMPACTED)
    return out


def _skipped_batches(fetch, lo: int, hi: int) -> list[tuple[int, int, str]]:
    """``[(first, end, reason)]`` of the batches of ``fetch`` in ``[lo, hi)`` whose records a
    read leaves out whole: control batches, and aborted ones in a committed read."""
    aborted = _AbortFilter(fetch.aborted_transactions) if fetch.isolation == "committed" else None
    out = []
    for batch in fetch.batches():
        if batch.next_offset <= lo or batch.base_offset >= hi:
            continue
        dropped = aborted.skip(batch) if aborted is not None else False
        if batch.is_control:
            out.append((batch.base_offset, batch.next_offset, MARKERS))
        elif dropped:
            out.append((batch.base_offset, batch.next_offset, ABORTED))
    return out


def _add(out: list, a: int, b: int, reason: str) -> None:
    if b <= a:
        return
    if out and out[-1][1] == a and out[-1][2] == reason:
        out[-1] = (out[-1][0], b, reason)
    else:
        out.append((a, b, reason))
