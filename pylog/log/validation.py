"""Checks a log makes of client batches before it writes them, besides the format's own
(Kafka's ``LogValidator``): here, the CreateTime timestamp bounds
``message_timestamp_before_max_ms`` and ``message_timestamp_after_max_ms``.

Pure functions of the batches, the config and the log's clock: nothing is read or written.
"""

from __future__ import annotations

from pylog.config import LogConfig
from pylog.errors import InvalidTimestampError
from pylog.layout import INT64_MAX, NO_TIMESTAMP


def validate_timestamps(batches, config: LogConfig, now_ms: int, *, from_client: bool = True) -> None:
    """Raise :class:`InvalidTimestampError` when a record of a CreateTime topic has a
    timestamp more than ``message_timestamp_before_max_ms`` before ``now_ms`` or more than
    ``message_timestamp_after_max_ms`` after it, as Kafka's broker refuses it
    (``InvalidTimestampException``); the whole append is refused. Records without a
    timestamp (-1) and control batches pass; so does everything in a LogAppendTime topic,
    whose timestamps the log sets itself, and what a follower copies (``from_client=False``:
    Kafka checks only what it appends as leader). A bound of ``INT64_MAX`` (Kafka's "no limit")
    is no bound.

    Cost: O(batches) when only the future bound applies and each batch's header max
    timestamp is within it (the common case: Kafka's producers and ``Log.append`` write
    the largest record timestamp there, and the log's time index relies on it); otherwise
    the records of the batches concerned are decoded, O(records).
    """
    if not from_client or config.message_timestamp_type != "CreateTime":
        return
    before_ms, after_ms = config.message_timestamp_before_max_ms, config.message_timestamp_after_max_ms
    earliest = None if before_ms == INT64_MAX else now_ms - before_ms
    latest = None if after_ms == INT64_MAX else now_ms + after_ms
    if earliest is None and latest is None:
        return
    for batch in batches:
        if batch.is_control:
            continue
        if earliest is None and batch.max_timestamp <= latest:
            continue  # the header's max bounds every record's timestamp
        for record in batch.records():
            _check_timestamp(record.timestamp, record.offset, earliest, latest, now_ms)
        _check_timestamp(batch.max_timestamp, batch.last_offset, earliest, latest, now_ms, what="batch max timestamp")


def _check_timestamp(timestamp_ms: int, offset: int, earliest: int | None, latest: int | None, now_ms: int, *,
                     what: str = "timestamp") -> None:
    if timestamp_ms == NO_TIMESTAMP:
        return
    if (earliest is not None and timestamp_ms < earliest) or (latest is not None and timestamp_ms > latest):
        low = "-inf" if earliest is None else earliest
        high = "+inf" if latest is None else latest
        raise InvalidTimestampError(
            f"{what} {timestamp_ms} of the record at offset {offset} is out of range: with the log's clock at "
            f"{now_ms}, CreateTime timestamps must be within [{low}, {high}] "
            f"(message_timestamp_before_max_ms, message_timestamp_after_max_ms)")
