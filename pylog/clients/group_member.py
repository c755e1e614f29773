"""``GroupMember``: a :class:`~pylog.clients.consumer.Consumer`'s part in its group: join,
heartbeat (a background thread), give up and take partitions when the generation moves
(from inside ``poll``, where the rebalance listener runs), leave.
"""

from __future__ import annotations

import threading
import time

from pylog.clients.assignors import ASSIGNORS, partition_counts
from pylog.coordinator.group_membership import GroupMembership, read_group_file
from pylog.errors import GroupCoordinatorError, UnknownMemberIdError
from pylog.stat_watch import StatWatch


class GroupMember:
    def __init__(self, consumer):
        self.consumer = consumer
        coordinator = consumer._group_coordinator()
        self.membership = GroupMembership(consumer.root, consumer.group_id,
                                          on_generation=coordinator.write_group_metadata)
        self.member_id: str | None = None
        self.generation = -1
        self._rejoin = True
        self._metadata: dict | None = None  # {topic: partitions} the last join was made with
        self._next_metadata_check = 0.0
        self._last_poll = time.monotonic()
        self._watch = _FileWatch([self.membership.path])
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._lock = threading.RLock()

    @property
    def cooperative(self) -> bool:
        """Whether the group's assignor is incremental (members keep partitions while
        rejoining); before the first generation, whether this member's first choice is."""
        state = read_group_file(self.consumer.root, self.consumer.group_id) or {}
        protocol = state.get("protocol") or self.consumer.assignors[0]
        return ASSIGNORS[protocol].cooperative

    def request_rejoin(self) -> None:
        self._rejoin = True

    def next_check_s(self) -> float:
        return self.consumer.heartbeat_interval_ms / 1000

    # -- the poll thread --------------------------------------------------------------------
    def poll(self) -> None:
        """Called by each poll: rejoin when asked or when the subscribed topics or their
        partition counts changed (looked at every ``heartbeat_interval_ms``, one listing
        of the log dir), follow the group's state file."""
        self._last_poll = time.monotonic()
        with self._lock:
            if self.member_id is None and self.consumer.assignment():
                self._lost()  # left for not polling: the partitions went to others meanwhile
            if self._rejoin or self._metadata_changed():
                self._join(revoke_all=not self.cooperative)
            if not self._watch.changed():
                return
            self._watch.mark()
            state = read_group_file(self.consumer.root, self.consumer.group_id)
            if state is None:
                return
            me = state["members"].get(self.member_id)
            if me is None:
                self._lost()
                self._join(revoke_all=True)
            elif state["state"] == "PreparingRebalance" and not me["joined"]:
                self._join(revoke_all=not self.cooperative)
            elif state["state"] == "Stable" and state["generation"] != self.generation:
                self._adopt(state)

    def _metadata_changed(self) -> bool:
        now = time.monotonic()
        if now < self._next_metadata_check:
            return False
        self._next_metadata_check = now + self.consumer.heartbeat_interval_ms / 1000
        seen = self._metadata
        self._metadata = self._subscribed_partitions()
        return seen is not None and seen != self._metadata

    def _subscribed_partitions(self) -> dict:
        topics = self.consumer._subscribed_topics()
        return partition_counts(self.consumer.root, topics)

    def _join(self, *, revoke_all: bool) -> None:
        c = self.consumer
        self._metadata = self._subscribed_partitions()
        owned = set(c.assignment())
        if revoke_all and owned:
            self._revoke(owned)
            owned = set()
        self._rejoin = False
        self.member_id = self.membership.join(
            self.member_id, topics=c._subscribed_topics(), assignors=c.assignors, owned=owned,
            session_timeout_ms=c.session_timeout_ms, rebalance_timeout_ms=c.max_poll_interval_ms,
            client_id=c.client_id)
        self._start_heartbeat()
        self._watch.mark_stale()

    def _revoke(self, partitions: set) -> None:
        c = self.consumer
        try:
            c._maybe_auto_commit(force=True)
        except GroupCoordinatorError:
            pass
        c._listener.on_partitions_revoked(set(partitions))
        c._set_assignment(c.assignment() - set(partitions))

    def _lost(self) -> None:
        """The group removed this member: its partitions are someone else's now; no commit."""
        c = self.consumer
        lost = c.assignment()
        self.member_id, self.generation = None, -1
        if lost:
            c._listener.on_partitions_revoked(set(lost))
            c._set_assignment(set())

    def _adopt(self, state: dict) -> None:
        c = self.consumer
        new = {c_tp(tp) for tp in state["assignment"].get(self.member_id, [])}
        old = c.assignment()
        self.generation = state["generation"]
        if ASSIGNORS[state["protocol"]].cooperative:
            revoked = old - new
            if revoked:
                self._revoke(revoked)
                self._rejoin = True  # ask for the partitions given up to be handed out
            added = new - old
            c._set_assignment(new)
            if added:
                c._listener.on_partitions_assigned(added)
        else:
            c._set_assignment(new)
            c._listener.on_partitions_assigned(set(new))

    # -- the heartbeat thread -----------------------------------------------------------------
    def _start_heartbeat(self) -> None:
        if self._thread is None:
            self._thread = threading.Thread(target=self._beat, name="pylog-heartbeat", daemon=True)
            self._thread.start()

    def _beat(self) -> None:
        """Heartbeats; and, as Kafka's heartbeat thread does, leaves the group when
        ``poll`` was not called for ``max_poll_interval_ms`` (its partitions go to members
        that do poll; the next ``poll`` rejoins)."""
        interval = self.consumer.heartbeat_interval_ms / 1000
        while not self._stop.wait(interval):
            member_id = self.member_id
            if member_id is None:
                continue
            if time.monotonic() - self._last_poll > self.consumer.max_poll_interval_ms / 1000:
                with self._lock:
                    if self.member_id == member_id:
                        self.membership.leave(member_id)
                        self.member_id, self._rejoin = None, True
                continue
            try:
                self.membership.heartbeat(member_id)
            except UnknownMemberIdError:
                self._watch.mark_stale()  # poll() finds out and rejoins
            except Exception:  # a transient file error: the next beat retries
                pass

    def leave(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        try:
            if self.member_id is not None:
                self.membership.leave(self.member_id)
        finally:
            self.membership.close()


def c_tp(tp):
    from pylog.clients.consumer import TopicPartition
    return TopicPartition(tp[0], tp[1])



class _FileWatch(StatWatch):
    """The group's state file, replaced by rename on every change."""

    def mark_stale(self) -> None:
        """Read it again at the next look."""
        self._seen = None
