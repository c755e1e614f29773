"""``ConsumerCoordinator``: a consumer's side of its group, as Kafka's
``ConsumerCoordinator``: membership (join, a heartbeat thread, leave), rebalances (give up
and take partitions when the generation moves, calling the rebalance listener) and commits
(sync, async, automatic), of the consumer group ``group_id`` of a log dir.

It is handed the consumer's :class:`~pylog.clients.subscription_state.SubscriptionState`
and changes the assignment there; it never sees the consumer. The group's state lives in
a file (pylog/coordinator/group_membership.py), its commits in ``__consumer_offsets``
(pylog/coordinator/group_coordinator.py); a commit is refused once the generation moved
on, so a member that lost its partitions cannot overwrite the positions of their new owner.

Threads: everything runs in the consumer's thread (inside ``poll``, where the listener
runs), except the heartbeat, which a :class:`HeartbeatThread` sends every
``heartbeat_interval_ms``; it also leaves the group when ``poll`` was not called for
``max_poll_interval_ms``, as Kafka's heartbeat thread does.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from typing import NamedTuple

from pylog.coordinator.assignors import ASSIGNORS, partition_counts
from pylog.clients.subscription_state import SubscriptionState, TopicPartition
from pylog.coordinator.group_coordinator import GroupCoordinator, checked_offsets
from pylog.coordinator.group_membership import GroupMembership, read_group_file
from pylog.errors import (
    GroupCoordinatorError, IllegalGenerationError, RebalanceInProgressError, UnknownMemberIdError,
)
from pylog.stat_watch import StatWatch

_log = logging.getLogger("pylog.consumer")


class OffsetAndMetadata(NamedTuple):
    """A position to commit: ``leader_epoch`` is that of the last record consumed before
    it (Kafka's ``OffsetAndMetadata.leaderEpoch()``), None (or -1) when unknown."""
    offset: int
    metadata: str = ""
    leader_epoch: int | None = None


class GroupMetadata(NamedTuple):
    """What ``send_offsets_to_transaction`` needs to fence zombies of a group."""
    group_id: str
    generation_id: int
    member_id: str


def checked_commit_offsets(offsets) -> dict | None:
    """A commit's ``offsets`` keyed by :class:`TopicPartition` (None: the positions),
    checked whole before the commit touches a file."""
    if offsets is None:
        return None
    checked_offsets(offsets)
    return {TopicPartition(*tp): om for tp, om in offsets.items()}


class ConsumerCoordinator:
    """The group ``group_id`` of the log dir ``root``, for a consumer whose subscription
    state is ``subscriptions`` (see the module's doc). Membership starts with
    :meth:`subscribe`; commits work without it (a consumer that assigns its partitions
    commits as a non-member, generation -1)."""

    def __init__(self, root: str, group_id: str, subscriptions: SubscriptionState, *, assignors: tuple,
                 session_timeout_ms: int, heartbeat_interval_ms: int, max_poll_interval_ms: int, client_id: str,
                 enable_auto_commit: bool, auto_commit_interval_ms: int, list_topics):
        self.root, self.group_id, self._subscriptions = root, group_id, subscriptions
        self.assignors, self.client_id = assignors, client_id
        self.session_timeout_ms, self.heartbeat_interval_ms = session_timeout_ms, heartbeat_interval_ms
        self.max_poll_interval_ms = max_poll_interval_ms
        self.enable_auto_commit, self.auto_commit_interval_ms = enable_auto_commit, auto_commit_interval_ms
        self._list_topics = list_topics
        self._next_auto_commit = time.monotonic() + auto_commit_interval_ms / 1000
        self._groups: GroupCoordinator | None = None
        self._membership: GroupMembership | None = None  # from subscribe() to leave_group()
        self.member_id: str | None = None
        self.generation = -1
        self._rejoin = True
        self._metadata: dict | None = None  # {topic: partitions} the last join was made with
        self._next_metadata_check = 0.0
        self._last_poll = time.monotonic()
        self._watch: _FileWatch | None = None
        self._heartbeat: HeartbeatThread | None = None
        self._lock = threading.RLock()

    def _group_coordinator(self) -> GroupCoordinator:
        if self._groups is None:
            self._groups = GroupCoordinator.for_root(self.root)
        return self._groups

    @property
    def active(self) -> bool:
        """Whether this consumer is a member of the group (from ``subscribe`` on)."""
        return self._membership is not None

    def group_metadata(self) -> GroupMetadata:
        return GroupMetadata(self.group_id, self.generation, self.member_id or "") if self.active \
            else GroupMetadata(self.group_id, -1, "")

    # -- commits ----------------------------------------------------------------------------
    def commit_sync(self, offsets: dict | None = None) -> dict:
        """Commit ``offsets`` (checked ``{tp: OffsetAndMetadata | int}``), by default the
        positions, which carry the leader epoch of the last record consumed, as Kafka's
        consumer commits them. Returns what was committed. Raises
        :class:`IllegalGenerationError`, :class:`RebalanceInProgressError` or
        :class:`UnknownMemberIdError` when the group moved on (nothing is written).
        Cost: one append to ``__consumer_offsets`` under the group's mutex."""
        if offsets is None:
            offsets = {tp: OffsetAndMetadata(position, "", epoch if epoch >= 0 else None)
                       for tp, (position, epoch) in self._subscriptions.all_consumed().items()}
        if offsets:
            meta = self.group_metadata()
            self._group_coordinator().commit_offsets(self.group_id, offsets, generation=meta.generation_id,
                                                     member_id=meta.member_id)
        return offsets

    def commit_async(self, offsets: dict | None = None, callback=None) -> None:
        """``commit_sync``, with the outcome given to ``callback(offsets, error)`` (error
        None when it succeeded) instead of raised; a failure without a callback is logged.
        The commit is one local append, done (and the callback called, in this thread)
        before this returns."""
        shown = offsets if offsets is not None else \
            {tp: position for tp, (position, _) in self._subscriptions.all_consumed().items()}
        try:
            self.commit_sync(offsets)
        except GroupCoordinatorError as e:
            if callback is None:
                _log.warning("asynchronous commit of group %r failed: %s", self.group_id, e)
                return
            callback(shown, e)
        else:
            if callback is not None:
                callback(shown, None)

    def committed(self, tp) -> OffsetAndMetadata | None:
        """What the group committed for ``tp`` (read_committed view), or None."""
        return self._group_coordinator().committed(self.group_id).get(tuple(tp))

    def refresh_committed_offsets(self, partitions=None) -> None:
        """Kafka's ``refreshCommittedOffsetsIfNeeded``: each of ``partitions`` (by default
        every assigned one) without a position takes the group's committed offset, if
        there is one. One look-up of the group's commits, when any lacks a position."""
        missing = [tp for tp in (self._subscriptions.missing_positions() if partitions is None else partitions)
                   if self._subscriptions.position(tp) is None]
        if not missing:
            return
        committed = self._group_coordinator().committed(self.group_id)
        for tp in missing:
            om = committed.get(tuple(tp))
            if om is not None:
                self._subscriptions.seek(tp, om.offset, -1 if om.leader_epoch is None else om.leader_epoch)

    def maybe_auto_commit(self, *, force: bool = False) -> None:
        """With ``enable_auto_commit``, commit the positions every ``auto_commit_interval_ms``
        (``force``: now); a commit the group refuses for having moved on is dropped (the
        next owner starts from the last accepted one)."""
        if not self.enable_auto_commit:
            return
        if not force and time.monotonic() < self._next_auto_commit:
            return
        self._next_auto_commit = time.monotonic() + self.auto_commit_interval_ms / 1000
        try:
            self.commit_sync()
        except (IllegalGenerationError, RebalanceInProgressError, UnknownMemberIdError):
            pass

    def next_check_s(self) -> float:
        """The seconds ``poll`` may wait before it must call :meth:`poll` again."""
        wait = self.heartbeat_interval_ms / 1000 if self.active else float("inf")
        if self.enable_auto_commit:
            wait = min(wait, max(0.0, self._next_auto_commit - time.monotonic()))
        return wait

    # -- membership, from the consumer's thread ---------------------------------------------
    def subscribe(self) -> None:
        """The subscription changed: join the group (at the next :meth:`poll`), or rejoin."""
        if self._membership is None:
            self._membership = GroupMembership(self.root, self.group_id,
                                               on_generation=self._group_coordinator().write_group_metadata)
            self._watch = _FileWatch([self._membership.path])
        self._rejoin = True

    def _cooperative(self) -> bool:
        """Whether the group's assignor is incremental (members keep partitions while
        rejoining); before the first generation, whether this member's first choice is."""
        state = read_group_file(self.root, self.group_id) or {}
        return ASSIGNORS[state.get("protocol") or self.assignors[0]].cooperative

    def poll(self) -> None:
        """Called by each poll of a member: rejoin when asked or when the subscribed
        topics or their partition counts changed (looked at every
        ``heartbeat_interval_ms``, one listing of the log dir), follow the group's state
        file."""
        if not self.active:
            return
        self._last_poll = time.monotonic()
        with self._lock:
            if self.member_id is None and self._subscriptions.assignment():
                self._lost()  # left for not polling: the partitions went to others meanwhile
            if self._rejoin or self._subscriptions.rejoin_needed or self._metadata_changed():
                self._join(revoke_all=not self._cooperative())
            if not self._watch.changed():
                return
            self._watch.mark()
            state = read_group_file(self.root, self.group_id)
            if state is None:
                return
            me = state["members"].get(self.member_id)
            if me is None:
                self._lost()
                self._join(revoke_all=True)
            elif state["state"] == "PreparingRebalance" and not me["joined"]:
                self._join(revoke_all=not self._cooperative())
            elif state["state"] == "Stable" and state["generation"] != self.generation:
                self._adopt(state)

    def _subscribed_partitions(self) -> dict:
        return partition_counts(self.root, self._subscriptions.subscribed_topics(self._list_topics))

    def _metadata_changed(self) -> bool:
        now = time.monotonic()
        if now < self._next_metadata_check:
            return False
        self._next_metadata_check = now + self.heartbeat_interval_ms / 1000
        seen = self._metadata
        self._metadata = self._subscribed_partitions()
        return seen is not None and seen != self._metadata

    def _join(self, *, revoke_all: bool) -> None:
        self._metadata = self._subscribed_partitions()
        owned = self._subscriptions.assignment()
        if revoke_all and owned:
            self._revoke(owned)
            owned = set()
        self._rejoin = self._subscriptions.rejoin_needed = False
        self.member_id = self._membership.join(
            self.member_id, topics=sorted(self._metadata), assignors=self.assignors, owned=owned,
            session_timeout_ms=self.session_timeout_ms, rebalance_timeout_ms=self.max_poll_interval_ms,
            client_id=self.client_id)
        self._start_heartbeat()
        self._watch.mark_stale()

    def _revoke(self, partitions: set) -> None:
        try:
            self.maybe_auto_commit(force=True)
        except GroupCoordinatorError:
            pass
        self._subscriptions.listener.on_partitions_revoked(set(partitions))
        self._subscriptions.set_assignment(self._subscriptions.assignment() - set(partitions))

    def _lost(self) -> None:
        """The group removed this member: its partitions are someone else's now; no commit."""
        lost = self._subscriptions.assignment()
        self.member_id, self.generation = None, -1
        if lost:
            self._subscriptions.listener.on_partitions_revoked(set(lost))
            self._subscriptions.set_assignment(())

    def _adopt(self, state: dict) -> None:
        new = {TopicPartition(topic, partition) for topic, partition in state["assignment"].get(self.member_id, [])}
        old = self._subscriptions.assignment()
        self.generation = state["generation"]
        if ASSIGNORS[state["protocol"]].cooperative:
            revoked = old - new
            if revoked:
                self._revoke(revoked)
                self._rejoin = True  # ask for the partitions given up to be handed out
            added = new - old
            self._subscriptions.set_assignment(new)
            if added:
                self._subscriptions.listener.on_partitions_assigned(added)
        else:
            self._subscriptions.set_assignment(new)
            self._subscriptions.listener.on_partitions_assigned(set(new))

    # -- the heartbeat thread's turn ---------------------------------------------------------
    def _start_heartbeat(self) -> None:
        if self._heartbeat is None:
            self._heartbeat = HeartbeatThread(self.beat, self.heartbeat_interval_ms)

    def beat(self) -> None:
        """One heartbeat (from the heartbeat thread); and, as Kafka's heartbeat thread does,
        leave the group when ``poll`` was not called for ``max_poll_interval_ms`` (its
        partitions go to members that do poll; the next ``poll`` rejoins). Cost: one
        rewrite of the group's file under its mutex."""
        member_id, membership = self.member_id, self._membership
        if member_id is None or membership is None:
            return
        if time.monotonic() - self._last_poll > self.max_poll_interval_ms / 1000:
            with self._lock:
                if self.member_id == member_id:
                    membership.leave(member_id)
                    self.member_id, self._rejoin = None, True
            return
        try:
            membership.heartbeat(member_id)
        except UnknownMemberIdError:
            self._watch.mark_stale()  # poll() finds out and rejoins
        except Exception:  # a transient file error: the next beat retries
            pass

    # -- leaving ----------------------------------------------------------------------------
    def leave_group(self) -> None:
        """Stop the heartbeat and leave the group (its partitions go to the others); a
        later :meth:`subscribe` joins as a new member."""
        membership, self._membership = self._membership, None
        if membership is None:
            return
        heartbeat, self._heartbeat = self._heartbeat, None
        if heartbeat is not None:
            heartbeat.stop()
        member_id = self.member_id
        self.member_id, self.generation, self._rejoin, self._metadata = None, -1, True, None
        try:
            if member_id is not None:
                membership.leave(member_id)
        finally:
            membership.close()

    def close_steps(self, *, commit: bool) -> list:
        """What a consumer's ``close`` asks of the group first, as steps for ``close_all``:
        with ``commit``, the auto-commit of the positions (refused by a group that moved on:
        the next owner starts from the last accepted commit), then leaving the group."""
        def final_commit():
            with contextlib.suppress(GroupCoordinatorError):
                self.maybe_auto_commit(force=True)
        return [final_commit, self.leave_group] if commit else [self.leave_group]

    def close(self) -> None:
        """Leave the group and give back the group coordinator."""
        try:
            self.leave_group()
        finally:
            groups, self._groups = self._groups, None
            if groups is not None:
                groups.release()


class HeartbeatThread:
    """The background thread of a group member (Kafka's ``AbstractCoordinator.HeartbeatThread``):
    calls ``beat()`` every ``interval_ms`` from when it is made until :meth:`stop`."""

    def __init__(self, beat, interval_ms: int):
        self._beat, self._interval_s = beat, interval_ms / 1000
        self._stopped = threading.Event()
        self._thread = threading.Thread(target=self._run, name="pylog-heartbeat", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stopped.wait(self._interval_s):
            self._beat()

    def stop(self) -> None:
        """Stop, after the beat under way (if any)."""
        self._stopped.set()
        self._thread.join()


class _FileWatch(StatWatch):
    """The group's state file, replaced by rename on every change."""

    def mark_stale(self) -> None:
        """Read it again at the next look."""
        self._seen = None
