"""``list_offset``: Kafka's ListOffsets for one partition (``Partition.fetchOffsetForTimestamp``),
the one answer to "where is the earliest, the latest, the record at a time" for every reader
in pylog: the consumer's ``beginning_offsets``, ``end_offsets``, ``offsets_for_times``,
``seek_to_end`` and ``auto_offset_reset``; the Spark readers; the CLI tools.

A spec is ``"earliest"`` (the log start), ``"latest"``, ``"max-timestamp"`` (the first
record with the largest timestamp), a timestamp in ms (the first record stamped at or after
it), or Kafka's negative timestamps -1 latest, -2 earliest, -3 max-timestamp, -4
earliest-local (the local log start) and -5 latest-tiered (the last offset in remote storage).

The isolation level says where "latest" is, as Kafka's ``lastFetchableOffset``: ``None`` the
log end (Kafka's ``case None``: a replica's question), ``"uncommitted"`` the high watermark,
``"committed"`` the last stable offset (before the first open transaction). With an isolation
level, a record found by time (or the largest timestamp, or the last tiered offset) at or past
that bound is not yet readable, so there is none (None), as Kafka answers a consumer.
"""

from __future__ import annotations

from pylog.arguments import check_choice, check_int
from pylog.errors import InvalidArgumentError
from pylog.layout import INT64_MAX
from pylog.log.local import (
    EARLIEST_LOCAL_TIMESTAMP, EARLIEST_TIMESTAMP, LATEST_TIERED_TIMESTAMP, LATEST_TIMESTAMP, MAX_TIMESTAMP as MAX_TS,
)

EARLIEST, LATEST, MAX_TIMESTAMP = "earliest", "latest", "max-timestamp"
#: each named spec as Kafka's ListOffsets timestamp
SPEC_TIMESTAMPS = {LATEST: LATEST_TIMESTAMP, EARLIEST: EARLIEST_TIMESTAMP, MAX_TIMESTAMP: MAX_TS,
                   "earliest-local": EARLIEST_LOCAL_TIMESTAMP, "latest-tiered": LATEST_TIERED_TIMESTAMP}
#: None: the log end; "uncommitted": the high watermark; "committed": the last stable offset
ISOLATIONS = (None, "uncommitted", "committed")


def spec_timestamp(spec) -> int:
    """``spec`` (a name of :data:`SPEC_TIMESTAMPS`, or a timestamp in ms, or -1 to -5) as
    Kafka's ListOffsets timestamp; :class:`InvalidArgumentError` naming it otherwise.

    >>> spec_timestamp("latest"), spec_timestamp("max-timestamp"), spec_timestamp(1700000000000)
    (-1, -3, 1700000000000)
    """
    if isinstance(spec, str):
        if spec in SPEC_TIMESTAMPS:
            return SPEC_TIMESTAMPS[spec]
        raise InvalidArgumentError(f"offset spec {spec!r} is not one of {', '.join(SPEC_TIMESTAMPS)} or a timestamp "
                                   f"in ms")
    return check_int(spec, "offset spec (a timestamp in ms, or -1 to -5)", (LATEST_TIERED_TIMESTAMP, INT64_MAX))


def last_fetchable_offset(log, isolation: str | None) -> int:
    """Where ``log`` ends for a reader at ``isolation``: the log end (None), the last stable
    offset (``"committed"``), else the high watermark. A single-node log keeps its high
    watermark at the log end; a replica's is what its leader committed. Cost: O(1);
    committed, O(producers), and a read-only log first replays the producer batches it has
    not seen."""
    if isolation is None:
        return log.log_end_offset
    return log.last_stable_offset if isolation == "committed" else log.high_watermark


def list_offset(log, spec, isolation: str | None = None) -> int | None:
    """Kafka's ListOffsets answer of ``log`` for ``spec`` at ``isolation`` (see the module's
    doc); None when no record matches. A read-only log first catches up with its writer
    (the caller checked that ``log`` is open: :meth:`RecordReads.list_offset
    <pylog.log.reading.RecordReads.list_offset>`).
    Cost: O(1) for earliest and latest; by time, O(segments + index interval)."""
    timestamp = spec_timestamp(spec)
    if isolation is not None:
        check_choice(isolation, "isolation", ISOLATIONS[1:])
    log.refresh()
    if timestamp == LATEST_TIMESTAMP:
        return last_fetchable_offset(log, isolation)
    found = log.offset_for_timestamp(timestamp)
    if found is None or isolation is None or timestamp in (EARLIEST_TIMESTAMP, EARLIEST_LOCAL_TIMESTAMP):
        return found
    return found if found < last_fetchable_offset(log, isolation) else None
