"""``FollowerSide``: a ``Replica`` as follower (Kafka's ``Partition`` on a follower, driven by
its ``ReplicaFetcherThread``): where to fetch from, the cut by leader epochs before the
first fetch from a new leader (pylog/replication/truncation.py), the fetch request from the
log end, and appending what came with the leader's high watermark. Each step holds the
replica's lock and does nothing once the replica's role or epoch moved on.
"""

from __future__ import annotations

from typing import Callable

from pylog.record.batch import complete_batch_bytes
from pylog.replication.protocol import OFFSET_OUT_OF_RANGE, EpochEndOffset, FetchRequest, FetchResponse
from pylog.replication.truncation import truncate_to_leader

FOLLOWER = "follower"


class FollowerSide:
    """The follower half of ``Replica`` (a mixin: it uses the replica's ``_lock``,
    ``_changed``, ``role``, ``leader_id``, ``leader_epoch``, ``needs_truncation`` and ``log``)."""

    def fetch_target(self, timeout_s: float) -> tuple[int, int, bool] | None:
        """``(leader id, leader epoch, needs truncation)`` to fetch from, waiting up to
        ``timeout_s`` for one; None when not a follower of a live leader."""
        with self._lock:
            self._changed.wait_for(lambda: self.role == FOLLOWER and self.leader_id >= 0, timeout_s)
            if self.role != FOLLOWER or self.leader_id < 0:
                return None
            return self.leader_id, self.leader_epoch, self.needs_truncation

    def truncate(self, epoch: int, ask_leader: Callable[[int], EpochEndOffset]) -> bool:
        """Cut the log where it diverges from the leader of ``epoch`` (OffsetsForLeaderEpoch
        rounds); False when the epoch moved on or the leader refused."""
        def ask(e: int) -> tuple[int, int]:
            answer = ask_leader(e)
            if answer.error is not None:
                raise _Refused(answer.error)
            return answer.leader_epoch, answer.end_offset
        with self._lock:
            if self.role != FOLLOWER or self.leader_epoch != epoch:
                return False
            try:
                truncate_to_leader(self.log, ask)
            except _Refused:
                return False
            self.needs_truncation = False
            return True

    def fetch_request(self, epoch: int, max_bytes: int, max_wait_ms: int) -> FetchRequest | None:
        with self._lock:
            if self.role != FOLLOWER or self.leader_epoch != epoch or self.needs_truncation:
                return None
            return FetchRequest(self.replica_id, epoch, self.log.log_end_offset, max_bytes, max_wait_ms)

    def apply_fetch(self, req: FetchRequest, resp: FetchResponse, raw: bytes) -> int:
        """Append what the leader sent (whole batches, as follower) and take its high
        watermark, bounded by the log end. Returns the bytes appended; nothing when the
        replica moved on meanwhile or the leader answered an error. An out-of-range fetch
        below the leader's log start (its retention or ``delete_records`` removed what this
        log lacks) empties the log to start at the leader's log start, as Kafka's followers
        do; any other means: find the divergence again."""
        with self._lock:
            if self.role != FOLLOWER or self.leader_epoch != req.current_leader_epoch \
                    or self.log.log_end_offset != req.fetch_offset:
                return 0
            if resp.error == OFFSET_OUT_OF_RANGE and req.fetch_offset < resp.log_start_offset:
                self.log.replica_view.truncate_fully_and_start_at(resp.log_start_offset)
                return 0
            if resp.error == OFFSET_OUT_OF_RANGE:
                self.needs_truncation = True
                return 0
            if resp.error is not None:
                return 0
            log = self.log
            raw = complete_batches(raw)
            log_start = log.log_start_offset
            if raw:
                self._append_fetched(raw)
            hw = max(min(resp.high_watermark, log.log_end_offset), log.log_start_offset)
            if hw != log.high_watermark:
                log.replica_view.update_high_watermark(hw, checkpoint=False)
            if log.log_start_offset < log_start:
                log.delete_records(log_start)
            return len(raw)

    def _append_fetched(self, raw) -> None:
        """Append as follower. An empty log that starts where the leader's log start fell
        inside a batch gets that whole batch: it starts again at the batch's base offset
        (the caller moves the log start back up once the high watermark allows)."""
        base = int.from_bytes(raw[:8], "big", signed=True)  # every batch starts with its base offset
        if base < self.log.log_end_offset == self.log.log_start_offset:
            self.log.replica_view.truncate_fully_and_start_at(base)
        self.log.append_as_follower(raw)


def complete_batches(raw):
    """The complete batches at the start of ``raw`` (a view, not a copy): a fetch cut by
    ``max_bytes`` may end inside a batch, which the next fetch brings whole (as Kafka's
    followers do). Reads entry sizes only, O(batches)."""
    n = complete_batch_bytes(raw)
    return raw if n == len(raw) else memoryview(raw)[:n]


class _Refused(Exception):
    """The leader refused an OffsetsForLeaderEpoch request (the follower's epoch is stale)."""
