"""``Replica``: one copy of a replicated partition, a ``Log`` in its own log dir, acting as
its partition's leader or as a follower (Kafka's ``Partition`` on one broker).

As leader it appends, answers its followers' fetches (records from their log end, with
its high watermark piggybacked), tracks each follower's log end and last caught-up time,
shrinks and expands the ISR (through the controller) and advances the high watermark to
the smallest log end in the ISR. As follower it finds where its log diverges from the
leader's by leader epochs (pylog/replication/truncation.py), then appends what it fetches.
Every request carries a leader epoch, and a replica answers only the epoch it knows:
a deposed leader and its followers are fenced.

Thread-safe: one lock per replica, never held across a call to the controller (a
follower holds its own while it asks its leader where to cut).
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import Callable

from pylog.errors import FencedLeaderEpochError, NotLeaderOrFollowerError, StorageError
from pylog.log import Log
from pylog.record.encode import now_ms
from pylog.replication.protocol import (
    FENCED_LEADER_EPOCH, NOT_LEADER_OR_FOLLOWER, OFFSET_OUT_OF_RANGE, UNKNOWN_LEADER_EPOCH, EpochEndOffset,
    FetchRequest, FetchResponse,
)
from pylog.replication.follower import FOLLOWER, FollowerSide
from pylog.replication.state import PartitionState

LEADER, OFFLINE = "leader", "offline"
#: A follower's log end before its first fetch from a new leader.
UNKNOWN_OFFSET = -1


@dataclass
class FollowerState:
    """The leader's view of one follower (Kafka's ``Replica`` state on the leader)."""

    log_end_offset: int = UNKNOWN_OFFSET
    last_caught_up_ms: int = 0
    last_fetch_leader_end_offset: int = 0
    last_fetch_ms: int = 0

    def fetched(self, fetch_offset: int, leader_end_offset: int, now: int) -> None:
        """Kafka's rule: caught up now if it asked for the log end; caught up as of its
        previous fetch if it asked for at least the log end of then."""
        if fetch_offset >= leader_end_offset:
            self.last_caught_up_ms = max(self.last_caught_up_ms, now)
        elif fetch_offset >= self.last_fetch_leader_end_offset:
            self.last_caught_up_ms = max(self.last_caught_up_ms, self.last_fetch_ms)
        self.log_end_offset = fetch_offset
        self.last_fetch_leader_end_offset = leader_end_offset
        self.last_fetch_ms = now

    def caught_up(self, leader_end_offset: int, now: int, lag_max_ms: int) -> bool:
        return self.log_end_offset == leader_end_offset or now - self.last_caught_up_ms <= lag_max_ms


class Replica(FollowerSide):
    """One replica of a partition: ``replica_id`` and the partition directory ``path``.

    ``alter_isr(replica_id, leader_epoch, isr) -> bool`` asks the controller to record a
    new ISR (Kafka's AlterPartition); the leader uses it only once recorded.
    """

    def __init__(self, replica_id: int, path, *, log_config: dict, alter_isr: Callable,
                 replica_lag_time_max_ms: int, high_watermark_checkpoint_interval_ms: int = 5000,
                 clock: Callable[[], int] = now_ms):
        self.replica_id = replica_id
        self.path = path
        self.log: Log | None = None
        self.role = OFFLINE
        self.leader_id = -1
        self.leader_epoch = -1
        self.isr: tuple[int, ...] = ()
        self.needs_truncation = False
        self._log_config = log_config
        self._alter_isr = alter_isr
        self._lag_max_ms = replica_lag_time_max_ms
        self._hw_checkpoint_ms = high_watermark_checkpoint_interval_ms
        self._clock = clock
        self._lock = threading.RLock()
        self._changed = threading.Condition(self._lock)  # role, epoch, ISR
        self._advanced = threading.Condition(self._lock)  # the high watermark (and role, epoch), for the acks
        self._appended = threading.Condition(self._lock)  # new batches, for the waiting fetches
        self._followers: dict[int, FollowerState] = {}
        self._last_read = None  # ((offset, max bytes, log end, log start), FetchData): see _read_for_follower
        self._joining: set[int] = set()  # followers whose ISR addition is being recorded
        self._epoch_start_offset = 0
        self._last_hw_checkpoint_ms = 0

    def __repr__(self) -> str:
        return f"Replica({self.replica_id}, {self.role}, epoch={self.leader_epoch})"

    # ==== life ======================================================================================
    def start(self) -> None:
        """Open the log (recovering it after a crash); the replica waits for the controller."""
        with self._lock:
            self.log = Log.open(self.path, auto_high_watermark=False, **self._log_config)
            self.role = FOLLOWER
            self.leader_id = -1
            self._notify_all()

    def stop(self) -> None:
        """Close the log cleanly (flushed, checkpointed); the replica is offline."""
        with self._lock:
            self.role = OFFLINE
            log, self.log = self.log, None
            self._notify_all()
        if log is not None:
            log.close()

    def _notify_all(self) -> None:
        """A change of role or epoch: wake every waiter, forget the shared read."""
        self._last_read = None
        self._changed.notify_all()
        self._advanced.notify_all()
        self._appended.notify_all()

    @property
    def online(self) -> bool:
        return self.role != OFFLINE

    # ==== the controller's LeaderAndIsr ==============================================================
    def become_leader(self, state: PartitionState) -> None:
        """Lead ``state.leader_epoch``: stamp it on appends, take the ISR, forget what the
        followers had (each is unknown until it fetches; ISR members count as caught up now).
        The epoch it leads already: take the ISR only (``take_isr``)."""
        with self._lock:
            self._check_newer(state.leader_epoch)
            if self.role == LEADER and self.leader_epoch == state.leader_epoch:
                self.take_isr(state)  # no new epoch: an ISR change only
                return
            now = self._clock()
            self.role, self.leader_id, self.leader_epoch = LEADER, self.replica_id, state.leader_epoch
            self.isr = state.isr
            self.log.replica_view.leader_epoch = state.leader_epoch
            self._epoch_start_offset = self.log.log_end_offset
            self._followers = {r: FollowerState(last_caught_up_ms=now if r in state.isr else 0)
                               for r in state.replicas if r != self.replica_id}
            self._joining = set()
            self.needs_truncation = False
            self._maybe_advance_high_watermark()  # an ISR of the leader alone commits its log at once
            self._notify_all()

    def become_follower(self, state: PartitionState) -> None:
        """Follow ``state.leader`` in ``state.leader_epoch``: first cut the log where it
        diverges from the leader's, then fetch. The leader and epoch it follows already:
        take the ISR only."""
        with self._lock:
            self._check_newer(state.leader_epoch)
            if (self.role, self.leader_id, self.leader_epoch) == (FOLLOWER, state.leader, state.leader_epoch):
                self.isr = state.isr  # no new epoch: an ISR change only
                return
            self.role, self.leader_id, self.leader_epoch = FOLLOWER, state.leader, state.leader_epoch
            self.isr = state.isr
            self.log.replica_view.leader_epoch = 0  # stamps only as leader; its latest epoch is the log's own
            self._followers = {}
            self.needs_truncation = True
            self._notify_all()

    def _check_newer(self, epoch: int) -> None:
        if self.log is None:
            raise NotLeaderOrFollowerError(f"replica {self.replica_id} is offline")
        if epoch < self.leader_epoch:
            raise FencedLeaderEpochError(
                f"replica {self.replica_id} knows leader epoch {self.leader_epoch}, newer than {epoch}")

    # ==== leader side ================================================================================
    def append(self, records, *, leader_epoch: int = -1, **options):
        """Append as leader (``Log.append``); :class:`NotLeaderOrFollowerError` otherwise,
        :class:`FencedLeaderEpochError` when ``leader_epoch`` (-1: any) is older than ours."""
        return self._append(lambda log: log.append(records, **options), leader_epoch)

    def append_batches(self, raw, *, leader_epoch: int = -1):
        """Append a client's Kafka batches as leader (``Log.append_batches``), as ``append``."""
        return self._append(lambda log: log.append_batches(raw), leader_epoch)

    def _append(self, write: Callable, leader_epoch: int):
        with self._lock:
            self.check_leader(leader_epoch)
            info = write(self.log)
            self._maybe_advance_high_watermark()
            self._appended.notify_all()
            return info

    def check_leader(self, leader_epoch: int = -1) -> None:
        """:class:`NotLeaderOrFollowerError` unless leading ``leader_epoch`` (-1: any);
        :class:`FencedLeaderEpochError` when leading a newer one."""
        if self.role == LEADER and 0 <= leader_epoch < self.leader_epoch:
            raise FencedLeaderEpochError(f"replica {self.replica_id} leads epoch {self.leader_epoch}, "
                                         f"newer than {leader_epoch}")
        if self.role != LEADER or leader_epoch > self.leader_epoch:
            asked = f" of epoch {leader_epoch}" if leader_epoch >= 0 else ""
            raise NotLeaderOrFollowerError(
                f"replica {self.replica_id} is not the leader{asked} (it is {self.role}, epoch {self.leader_epoch})")

    def _request_error(self, epoch: int) -> str | None:
        if self.role != LEADER:
            return NOT_LEADER_OR_FOLLOWER
        if epoch < self.leader_epoch:
            return FENCED_LEADER_EPOCH
        if epoch > self.leader_epoch:
            return UNKNOWN_LEADER_EPOCH
        return None

    def handle_fetch(self, req: FetchRequest) -> FetchResponse:
        """Answer a follower's fetch: note its log end, maybe expand the ISR and advance the
        high watermark (waking the appends waiting for it at once), then return batches from
        ``fetch_offset``, waiting up to ``max_wait_ms`` for some when there is none yet (woken
        by the next append). One lock hold unless the follower joins the ISR."""
        with self._lock:
            error = self._request_error(req.current_leader_epoch)
            if error is not None:
                return FetchResponse(error, self.leader_epoch)
            log = self.log
            log_end_offset = log.log_end_offset
            if not log.log_start_offset <= req.fetch_offset <= log_end_offset:
                return FetchResponse(OFFSET_OUT_OF_RANGE, self.leader_epoch, log.high_watermark,
                                     log.log_start_offset, log_end_offset)
            follower = self._followers.setdefault(req.replica_id, FollowerState())
            follower.fetched(req.fetch_offset, log_end_offset, self._clock())
            joining = self._joins_isr(req.replica_id, follower)
            if joining:
                self._joining.add(req.replica_id)
            self._maybe_advance_high_watermark(log_end_offset)
            epoch, isr = self.leader_epoch, self.isr
            if not joining:
                return self._answer_fetch(req, epoch, log_end_offset)
        self._propose_isr(epoch, tuple(sorted(isr + (req.replica_id,))), joining=req.replica_id)
        with self._lock:
            return self._answer_fetch(req, epoch, log_end_offset)

    def _answer_fetch(self, req: FetchRequest, epoch: int, log_end_offset: int) -> FetchResponse:
        """The batches from ``req.fetch_offset`` (under the lock), after the long poll when
        the follower has everything: the wait ends as soon as an append or a change of
        role or epoch notifies ``_appended``."""
        if req.fetch_offset >= log_end_offset and req.max_wait_ms > 0:
            self._appended.wait_for(lambda: self.leader_epoch != epoch or self.role != LEADER
                                    or self.log.log_end_offset > req.fetch_offset, req.max_wait_ms / 1000)
        error = self._request_error(req.current_leader_epoch)
        if error is not None:
            return FetchResponse(error, self.leader_epoch)
        log = self.log
        return FetchResponse(None, epoch, log.high_watermark, log.log_start_offset, log.log_end_offset,
                             self._read_for_follower(req.fetch_offset, req.max_bytes))

    def _read_for_follower(self, offset: int, max_bytes: int):
        """``Log.read`` for a follower's fetch. Followers fetching the same offset while the
        log end has not moved share one read, its plan and its bytes (``FetchData`` reads
        them once): the leader's log only grows while it leads, and the cache is dropped at
        every change of role."""
        log = self.log
        key = (offset, max_bytes, log.log_end_offset, log.log_start_offset)
        if self._last_read is not None and self._last_read[0] == key:
            return self._last_read[1]
        fetch = log.read(offset, max_bytes)
        self._last_read = (key, fetch)
        return fetch

    def handle_offsets_for_leader_epoch(self, current_leader_epoch: int, epoch: int) -> EpochEndOffset:
        """OffsetsForLeaderEpoch: where ``epoch`` ends in the leader's log."""
        with self._lock:
            error = self._request_error(current_leader_epoch)
            if error is not None:
                return EpochEndOffset(error)
            found, end = self.log.replica_view.end_offset_for_epoch(epoch)
            return EpochEndOffset(None, found, end)

    def _joins_isr(self, replica_id: int, follower: FollowerState) -> bool:
        """Kafka's rule: a follower joins once it has the high watermark and everything of
        the leader's epoch before it."""
        return (replica_id not in self.isr and replica_id not in self._joining
                and follower.log_end_offset >= self.log.high_watermark
                and follower.log_end_offset >= self._epoch_start_offset)

    def _maybe_advance_high_watermark(self, log_end_offset: int | None = None) -> None:
        """The high watermark moves up to the smallest log end in the ISR, never down
        (``log_end_offset``: the leader's, when the caller has it); a follower whose
        addition is being recorded counts already (Kafka's maximal ISR), so that it has
        every committed record once the controller may elect it. Checkpointed every
        ``high_watermark_checkpoint_interval_ms`` (and on close)."""
        log = self.log
        new = log.log_end_offset if log_end_offset is None else log_end_offset
        followers = self._followers
        for r in (*self.isr, *self._joining):
            if r != self.replica_id:
                new = min(new, followers[r].log_end_offset if r in followers else UNKNOWN_OFFSET)
        if new > log.high_watermark:
            now = self._clock()
            checkpoint = now - self._last_hw_checkpoint_ms >= self._hw_checkpoint_ms
            log.replica_view.update_high_watermark(new, checkpoint=checkpoint)
            if checkpoint:
                self._last_hw_checkpoint_ms = now
            self._advanced.notify_all()

    def maybe_shrink_isr(self) -> tuple[int, ...]:
        """Drop from the ISR the followers not caught up within ``replica_lag_time_max_ms``
        (Kafka's isr-expiration task); returns those dropped."""
        with self._lock:
            if self.role != LEADER:
                return ()
            now, end = self._clock(), self.log.log_end_offset
            out = tuple(r for r in self.isr if r != self.replica_id
                        and not self._followers.get(r, FollowerState()).caught_up(end, now, self._lag_max_ms))
            epoch, isr = self.leader_epoch, self.isr
        if out:
            self._propose_isr(epoch, tuple(r for r in isr if r not in out))
        return out

    def _propose_isr(self, epoch: int, isr: tuple[int, ...], *, joining: int | None = None) -> None:
        """Ask the controller to record ``isr``; take it only once recorded, and only if
        still leading the same epoch (called without the replica's lock). ``joining``: the
        follower being added, counted for the high watermark until the answer."""
        recorded = False
        try:
            recorded = self._alter_isr(self.replica_id, epoch, isr)
        finally:
            with self._lock:
                self._joining.discard(joining)
                if recorded and self.role == LEADER and self.leader_epoch == epoch:
                    self.isr = isr
                    self._maybe_advance_high_watermark()
                    self._changed.notify_all()

    def follower_log_end_offset(self, replica_id: int) -> int:
        """A follower's log end as of its last fetch (-1 before the first in this epoch)."""
        with self._lock:
            return self._followers.get(replica_id, FollowerState()).log_end_offset

    def take_isr(self, state: PartitionState) -> None:
        """The controller removed a dead follower from the ISR of this leader's epoch."""
        with self._lock:
            if self.role == LEADER and self.leader_epoch == state.leader_epoch:
                self.isr = state.isr
                self._maybe_advance_high_watermark()
                self._changed.notify_all()

    def wait_for_high_watermark(self, offset: int, epoch: int, timeout_s: float) -> bool | None:
        """Wait until the high watermark reaches ``offset``: True when it did, False on
        timeout, None when leadership of ``epoch`` was lost meanwhile."""
        with self._lock:
            def ready():
                return self.role != LEADER or self.leader_epoch != epoch or self.log.high_watermark >= offset
            self._advanced.wait_for(ready, timeout_s)
            if self.role != LEADER or self.leader_epoch != epoch:
                return None
            return self.log.high_watermark >= offset

    def checkpoint_high_watermark(self) -> None:
        """Write the high watermark to replication-offset-checkpoint now."""
        with self._lock:
            if self.log is not None:
                try:
                    self.log.high_watermark = self.log.high_watermark
                except StorageError:
                    pass  # retried at the next checkpoint or close

