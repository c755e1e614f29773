"""The tiered part of a log: reads below the local log start served by its remote
segments, so a consumer sees one partition, as Kafka's does (UnifiedLog with a
RemoteLogManager). A :class:`~pylog.log.log.Log` holds its remote part in ``log.remote``
(a :class:`~pylog.remote.log.RemoteLog`, set by ``LogManager(root, remote_storage=url)``).
"""

from __future__ import annotations

from pylog.errors import OffsetOutOfRangeError
from pylog.log.local import EARLIEST_LOCAL_TIMESTAMP, EARLIEST_TIMESTAMP, LATEST_TIERED_TIMESTAMP, MAX_TIMESTAMP


def log_start_offset(remote, local_start: int) -> int:
    """The partition's first offset: the remote start when its segments reach the local
    start (no gap between them), else the local one."""
    if not remote.segments or remote.log_end_offset < local_start:
        return local_start
    return min(remote.log_start_offset, local_start)


def reads_remote(remote, offset: int, local_start: int) -> bool:
    """Whether a read at ``offset`` is served by the remote part."""
    return remote is not None and offset < local_start and offset >= log_start_offset(remote, local_start)


def read_either(log, offset: int, max_bytes: int, *, isolation: str, max_offset: int | None, min_one_message: bool,
                read_local, lock):
    """``log.read`` of a tiered log: the remote part below the local start, else the local
    one; a local read that local retention overtook (the offset fell below the local start
    while it ran, its segment now copied) is read again from the remote part: retention
    moves the local start with the deletion, under the log's ``lock``, so a read that started
    before sees it moved once it is done: the local read plans without the lock, so the
    start is read again under it, after any deletion that began during the read. The local
    start is read before the remote part, so a copy the remote part lists is never missed."""
    for attempt in range(2):
        local_start, remote = log.local_log_start_offset, log.remote
        if reads_remote(remote, offset, local_start):
            return read(remote, offset, local_start, max_bytes, isolation=isolation, max_offset=max_offset,
                        min_one_message=min_one_message)
        try:
            fetch = read_local(offset, max_bytes, isolation=isolation, max_offset=max_offset,
                               min_one_message=min_one_message)
        except OffsetOutOfRangeError:
            if attempt or offset >= log.local_log_start_offset:
                raise
            continue
        with lock:  # a deletion under way holds it until the local start has moved
            local_start = log.local_log_start_offset
        if attempt or offset >= local_start:
            return fetch
        # local retention deleted the segment while the read planned on it (a read of a
        # deleted segment may skip to the next one): what was there is in the remote part now
    raise AssertionError("unreachable")


def read(remote, offset: int, local_start: int, max_bytes: int, *, isolation: str, max_offset: int | None,
         min_one_message: bool):
    """A fetch from the remote segments, stopping at the local start (what follows is local)."""
    bound = local_start if max_offset is None else min(max_offset, local_start)
    return remote.read(offset, max_bytes, isolation=isolation, max_offset=bound, min_one_message=min_one_message)


def offset_for_timestamp(remote, timestamp: int, local_start: int, local_answer, local_max_timestamp):
    """Kafka's ListOffsets over both parts (``remote`` None: the local one alone): the remote
    segments answer first for a timestamp they hold, the local ones after
    (``local_answer(timestamp)``); the largest timestamp is the earlier part's when both hold
    it (``local_max_timestamp()``: the local segments' largest); -4 and -5 as
    :func:`local_or_tiered_offset`."""
    if timestamp in (EARLIEST_LOCAL_TIMESTAMP, LATEST_TIERED_TIMESTAMP):
        return local_or_tiered_offset(remote, timestamp, local_start)
    if remote is None:
        return local_answer(timestamp)
    start = log_start_offset(remote, local_start)
    if timestamp == EARLIEST_TIMESTAMP:
        return start
    if start == local_start:
        return local_answer(timestamp)
    if timestamp == MAX_TIMESTAMP:
        remote_max = max((s.max_timestamp for s in remote.segments), default=-1)
        return remote.offset_for_timestamp(timestamp) if 0 <= remote_max >= local_max_timestamp() \
            else local_answer(timestamp)
    if timestamp >= 0:
        found = remote.offset_for_timestamp(timestamp)
        if found is not None and found < local_start:
            return found
    return local_answer(timestamp)


def local_or_tiered_offset(remote, timestamp: int, local_start: int) -> int | None:
    """Kafka's EARLIEST_LOCAL_TIMESTAMP (-4): the local log start; LATEST_TIERED_TIMESTAMP
    (-5): the last offset in remote storage (None when nothing is tiered)."""
    if timestamp == EARLIEST_LOCAL_TIMESTAMP:
        return local_start
    return None if remote is None or not remote.segments else remote.log_end_offset - 1
