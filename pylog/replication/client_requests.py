"""What a leader answers its clients, in a ``ReplicaSet``'s process or a replica process
(pylog/replication/broker.py): Produce with Kafka's ``acks`` and its errors, and a consumer's
Fetch, bounded by the high watermark (docs/replication.md). Also the one table between
Kafka's error names and pylog's exceptions, for both ends of the wire."""

from __future__ import annotations

from typing import Callable

from pylog.arguments import check_int

from pylog.errors import (
    FencedLeaderEpochError, InvalidArgumentError, NotEnoughReplicasAfterAppendError, NotEnoughReplicasError,
    NotLeaderOrFollowerError, OffsetOutOfRangeError, PylogError, ReplicationTimeoutError,
)
from pylog.layout import INT32_MAX
from pylog.replication.protocol import (
    DEBUGGING_CONSUMER_ID, FENCED_LEADER_EPOCH, INVALID_REQUEST, NOT_ENOUGH_REPLICAS,
    NOT_ENOUGH_REPLICAS_AFTER_APPEND, NOT_LEADER_OR_FOLLOWER, OFFSET_OUT_OF_RANGE, REQUEST_TIMED_OUT,
    FetchRequest, FetchResponse,
)
from pylog.replication.replica import LEADER

ACKS = (0, 1, -1, "all")
#: Kafka's error names and the exceptions pylog raises for them, most specific first.
ERROR_CLASSES = {
    NOT_ENOUGH_REPLICAS: NotEnoughReplicasError,
    NOT_ENOUGH_REPLICAS_AFTER_APPEND: NotEnoughReplicasAfterAppendError,
    REQUEST_TIMED_OUT: ReplicationTimeoutError,
    FENCED_LEADER_EPOCH: FencedLeaderEpochError,
    NOT_LEADER_OR_FOLLOWER: NotLeaderOrFollowerError,
    INVALID_REQUEST: PylogError,
}


def check_acks(acks) -> int:
    """``acks`` as Kafka's number (0, 1 or -1); :class:`InvalidArgumentError` otherwise."""
    if acks not in ACKS or isinstance(acks, bool):
        raise InvalidArgumentError(f"acks must be 0, 1, -1 or 'all', not {acks!r}")
    return -1 if acks == "all" else acks


def check_timeout_ms(timeout_ms) -> None:
    """:class:`InvalidArgumentError` unless ``timeout_ms`` (a produce's wait for its acks) is
    an int in [0, INT32_MAX], as Kafka's Produce request carries it."""
    check_int(timeout_ms, "timeout_ms", (0, INT32_MAX))


def produce(leader, append: Callable, *, acks, timeout_ms: int, min_insync_replicas: int, name: str,
            leader_epoch: int | None = None, wait_for_high_watermark: Callable | None = None):
    """Append through ``append()`` at the ``leader`` replica and return its ``AppendInfo``
    once ``acks`` is met (Kafka's rules, docs/replication.md): :func:`append_at_leader`
    then :func:`acknowledge`."""
    info, epoch = append_at_leader(leader, append, acks=acks, min_insync_replicas=min_insync_replicas, name=name,
                                   leader_epoch=leader_epoch)
    return acknowledge(leader, info, epoch, acks=acks, timeout_ms=timeout_ms, min_insync_replicas=min_insync_replicas,
                       name=name, wait_for_high_watermark=wait_for_high_watermark)


def append_at_leader(leader, append: Callable, *, acks, min_insync_replicas: int, name: str,
                     leader_epoch: int | None = None):
    """The checks before a Produce writes, then ``append()``: returns (``AppendInfo``, the
    leader epoch it was written in). ``acks`` -1 (``"all"``) is refused with
    :class:`NotEnoughReplicasError` when the ISR is smaller than ``min_insync_replicas``;
    a replica that does not lead (that epoch) raises :class:`NotLeaderOrFollowerError` /
    :class:`FencedLeaderEpochError`."""
    acks = check_acks(acks)
    leader.check_leader(-1 if leader_epoch is None else leader_epoch)
    epoch = leader.leader_epoch if leader_epoch is None else leader_epoch
    if acks == -1 and len(leader.isr) < min_insync_replicas:
        raise NotEnoughReplicasError(
            f"ISR {leader.isr} of {name} is smaller than min_insync_replicas {min_insync_replicas}")
    return append(), epoch


def acknowledge(leader, info, epoch: int, *, acks, timeout_ms: float, min_insync_replicas: int, name: str,
                wait_for_high_watermark: Callable | None = None):
    """``info`` once ``acks`` is met: at once for 0 and 1; for -1 once the high watermark
    passed the records, else :class:`ReplicationTimeoutError` after ``timeout_ms``,
    :class:`NotEnoughReplicasAfterAppendError` when the ISR shrank below the minimum
    meanwhile, :class:`NotLeaderOrFollowerError` when leadership of ``epoch`` moved first.
    ``wait_for_high_watermark(offset, epoch, timeout_ms)`` replaces the leader's own wait."""
    if check_acks(acks) != -1:
        return info
    if wait_for_high_watermark is None:
        reached = leader.wait_for_high_watermark(info.last_offset + 1, epoch, timeout_ms / 1000)
    else:
        reached = wait_for_high_watermark(info.last_offset + 1, epoch, timeout_ms)
    offsets = f"offsets {info.first_offset}-{info.last_offset} of {name}"
    if reached is None:
        raise NotLeaderOrFollowerError(f"leadership of {name} moved before {offsets} were committed")
    if not reached:
        raise ReplicationTimeoutError(f"{offsets} not on every ISR replica {leader.isr} in time")
    if len(leader.isr) < min_insync_replicas:
        raise NotEnoughReplicasAfterAppendError(
            f"{offsets} written, but the ISR {leader.isr} is smaller than min_insync_replicas {min_insync_replicas}")
    return info


def error_name(exc: PylogError) -> str:
    """Kafka's error name for ``exc`` (INVALID_REQUEST when none is closer)."""
    for name, cls in ERROR_CLASSES.items():
        if isinstance(exc, cls):
            return name
    return INVALID_REQUEST


def error_from(name: str, message: str) -> PylogError:
    """The exception for an error a replica answered."""
    return ERROR_CLASSES.get(name, PylogError)(message or name)


def consumer_fetch(replica, req: FetchRequest) -> FetchResponse:
    """A client's Fetch (``replica_id`` < 0; never waits): Kafka's consumer reads from the
    leader up to its high watermark; the debugging consumer reads any replica up to its log
    end (to compare replicas). The response carries the replica's epoch, high watermark,
    log start and log end."""
    log = replica.log
    debugging = req.replica_id == DEBUGGING_CONSUMER_ID
    if log is None or not (debugging or replica.role == LEADER):
        return FetchResponse(NOT_LEADER_OR_FOLLOWER, replica.leader_epoch)
    if not debugging and req.current_leader_epoch not in (-1, replica.leader_epoch):
        return FetchResponse(FENCED_LEADER_EPOCH if req.current_leader_epoch < replica.leader_epoch
                             else NOT_LEADER_OR_FOLLOWER, replica.leader_epoch)
    try:
        records = log.read(req.fetch_offset, req.max_bytes,
                           isolation="uncommitted" if debugging else "high_watermark")
    except OffsetOutOfRangeError:
        return FetchResponse(OFFSET_OUT_OF_RANGE, replica.leader_epoch, log.high_watermark, log.log_start_offset,
                             log.log_end_offset)
    return FetchResponse(None, replica.leader_epoch, log.high_watermark, log.log_start_offset, log.log_end_offset,
                         records)
