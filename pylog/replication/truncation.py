"""Where a follower's log diverges from its new leader's, found by leader epochs (Kafka's
KIP-101 and KIP-279), never by the high watermark alone.

The follower asks the leader for the end offset of its own latest epoch
(OffsetsForLeaderEpoch). If the leader knows that epoch, the log agrees up to the smaller
of both end offsets; if the leader answers an older epoch the follower does not have, the
follower cuts at the end of its own largest epoch below it and asks again for that one,
walking back over as many epochs as it takes. Only when the leader knows no epoch at all
(or the follower has none, a log written before epochs) does the high watermark decide.
"""

from __future__ import annotations

from typing import Callable

from pylog.log.leader_epoch import UNDEFINED_EPOCH

#: One round's outcome: where to cut, and whether the walk is over.
Cut = tuple[int, bool]


def next_cut(local_end_offset_for: Callable[[int], tuple[int, int]], leader_epoch: int, leader_end_offset: int,
             *, log_end_offset: int, high_watermark: int) -> Cut:
    """Kafka's rule for one OffsetsForLeaderEpoch answer ``(leader_epoch, leader_end_offset)``
    given the follower's ``local_end_offset_for(epoch)`` (``Log.replica_view.end_offset_for_epoch``)."""
    if leader_end_offset == UNDEFINED_EPOCH:
        return min(high_watermark, log_end_offset), True
    follower_epoch, follower_end = local_end_offset_for(leader_epoch)
    if follower_end == UNDEFINED_EPOCH:
        return min(leader_end_offset, log_end_offset), True
    if follower_epoch != leader_epoch:
        return min(follower_end, log_end_offset), False
    return min(leader_end_offset, follower_end, log_end_offset), True


def truncate_to_leader(log, ask_leader: Callable[[int], tuple[int, int]], *, max_rounds: int = 10_000) -> int:
    """Cut ``log`` (a follower's ``Log``) where it diverges from the leader answering
    ``ask_leader(epoch) -> (epoch, end_offset)``; returns the new log end. Each round cuts,
    so a crash between rounds resumes from a consistent log. O(rounds) requests."""
    view = log.replica_view
    for _ in range(max_rounds):
        latest = view.end_offset_for_epoch(view.leader_epoch)[0] if log.log_end_offset > log.log_start_offset else -1
        if latest == UNDEFINED_EPOCH:
            cut, done = min(log.high_watermark, log.log_end_offset), True
        else:
            leader_epoch, leader_end = ask_leader(latest)
            cut, done = next_cut(view.end_offset_for_epoch, leader_epoch, leader_end,
                                 log_end_offset=log.log_end_offset, high_watermark=log.high_watermark)
        if cut < log.log_end_offset:
            log.truncate_to(cut)
        if done:
            return log.log_end_offset
    raise AssertionError(f"no divergence point found in {max_rounds} rounds")  # epochs decrease each round
