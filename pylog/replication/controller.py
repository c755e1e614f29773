"""``Controller``: the one owner of every change of a partition's state (Kafka's controller
with its ``PartitionChangeBuilder``): elections (``elect``), the leaders' AlterPartition
(``alter_isr``), a replica going down or coming back (``replica_failed``,
``replica_restarted``), each a compare-and-set of the state file (``state.update_state``)
followed by the LeaderAndIsr fan-out to the live replicas, the leader first.

It reaches replicas through a :class:`ReplicaHandle`: the in-process ``Replica``, or the
``BrokerClient`` of a replica process. The election rules themselves are the pure functions
of pylog/replication/election.py. ``ReplicatedPartition`` is what both fleets
(``ReplicaSet``, ``ProcessReplicaSet``) share on top of it.
"""

from __future__ import annotations

import enum
import threading
from dataclasses import replace
from typing import Mapping, Protocol

from pylog.errors import InvalidArgumentError, LeaderNotAvailableError, LogClosedError
from pylog.replication.election import check_assigned, elected, eligible_leader, offline
from pylog.replication.state import NO_LEADER, PartitionState, alter_partition, read_state, update_state


class Election(enum.Enum):
    """Kafka's election types: ``PREFERRED`` moves leadership to the first assigned replica
    when it is live and in the ISR; ``ONLINE`` (clean) picks a live ISR replica; ``UNCLEAN``
    a live ISR replica if any, else any live replica (records may be lost), only with
    ``unclean_leader_election_enable``."""

    PREFERRED = "preferred"
    ONLINE = "online"
    UNCLEAN = "unclean"


class ReplicaHandle(Protocol):
    """What the controller needs of a replica: whether it counts as running, and the two
    halves of LeaderAndIsr. A handle given the epoch it already leads or follows takes the
    new ISR only (Kafka's ``Partition.makeLeader``/``makeFollower`` with no new epoch)."""

    online: bool

    def become_leader(self, state: PartitionState) -> None: ...

    def become_follower(self, state: PartitionState) -> None: ...


class Controller:
    """The controller of the partition whose state is the file ``state_path``, assigned
    ``replica_ids``, reaching them through ``handles`` (replica id -> handle; a replica
    without one is down). ``shared``: other processes change the file too (the leaders'
    AlterPartition in a ``ProcessReplicaSet``), so :attr:`state` reads it each time; else
    the controller's own last write is the state. One change at a time (a lock); each
    costs one read and one durable write of the state file, plus one LeaderAndIsr per live
    replica."""

    def __init__(self, state_path: str, replica_ids, handles: Mapping[int, ReplicaHandle], *,
                 unclean_leader_election_enable: bool = False, name: str = "", shared: bool = False):
        self.state_path = state_path
        self.replica_ids = tuple(replica_ids)
        self.unclean_leader_election_enable = unclean_leader_election_enable
        self.name = name
        self.lock = threading.RLock()
        self._handles = handles
        self._shared = shared
        self._state: PartitionState | None = None

    @property
    def state(self) -> PartitionState:
        """The partition state, with the replicas assigned (the file holds no assignment, as
        Kafka's node does not)."""
        if self._shared:
            return replace(read_state(self.state_path), replicas=self.replica_ids)
        return self._state  # recorded with the replicas (_record)

    @property
    def live_replicas(self) -> tuple[int, ...]:
        """The replicas whose handle is online, in assignment order."""
        handles = self._handles
        return tuple(r for r in self.replica_ids if r in handles and handles[r].online)

    # ==== changes ====================================================================================
    def initialize(self, state: PartitionState | None) -> PartitionState:
        """Record ``state`` (None: keep the recorded one, or lead with the first replica in
        leader epoch 0 when there is none); no LeaderAndIsr is sent."""
        initial = PartitionState(self.replica_ids[0], 0, self.replica_ids, replicas=self.replica_ids)
        with self.lock:
            self._change(lambda found: state or (None if found is not None else initial), announce=False)
            if self._state is None:
                self._record(read_state(self.state_path))
            return self.state

    def elect(self, election: Election, *, leader: int | None = None) -> int | None:
        """Elect a leader in a new leader epoch (``leader``, or the first eligible replica in
        assignment order; ``PREFERRED``: the first assigned replica), record it, then tell
        every live replica. Returns the leader; None when none is eligible (``PREFERRED``:
        also when the preferred replica leads already): nothing changes then, except that a
        partition whose leader is down goes offline (leader -1 in a new leader epoch, the
        ISR kept) until an ISR replica returns. :class:`LeaderNotAvailableError` for
        ``UNCLEAN`` without ``unclean_leader_election_enable``."""
        if not isinstance(election, Election):
            raise InvalidArgumentError(f"election must be an Election, not {election!r}")
        if leader is not None:
            check_assigned(leader, self.replica_ids, self.name)
        if election is Election.UNCLEAN and not self.unclean_leader_election_enable:
            raise LeaderNotAvailableError("unclean leader election is not enabled "
                                          "(unclean_leader_election_enable=False)")
        if election is Election.PREFERRED:
            leader = self.replica_ids[0]
        chosen: list[int | None] = [None]

        def change(state: PartitionState):
            if election is Election.PREFERRED and state.leader == leader:
                return None
            live = self.live_replicas
            chosen[0] = eligible_leader(state, live, clean=election is not Election.UNCLEAN, leader=leader)
            if chosen[0] is not None:
                return elected(state, chosen[0], live, self.replica_ids)
            if election is not Election.PREFERRED and state.leader != NO_LEADER and state.leader not in live:
                return offline(state, self.replica_ids)
            return None
        with self.lock:
            self._change(change)
        return chosen[0]

    def elect_automatically(self) -> int | None:
        """The election a failure or a restart runs: ``UNCLEAN`` when enabled, else ``ONLINE``."""
        return self.elect(Election.UNCLEAN if self.unclean_leader_election_enable else Election.ONLINE)

    def alter_isr(self, leader: int, leader_epoch: int, isr: tuple[int, ...]) -> bool:
        """Kafka's AlterPartition from the leader: ``isr`` is recorded only if ``leader``
        still leads ``leader_epoch`` at the partition epoch this controller last recorded,
        and ``isr`` holds it (``state.alter_partition``). True if recorded; the leader takes
        it itself, so no LeaderAndIsr is sent."""
        with self.lock:
            accepted, now = alter_partition(self.state_path, leader, leader_epoch, self.state.partition_epoch,
                                            tuple(isr))
            if accepted:
                self._record(now)
            return accepted

    def replica_failed(self, replica_id: int) -> None:
        """``replica_id`` went down (its handle is offline now): if it led, elect another
        (``elect_automatically``), else it leaves the ISR."""
        with self.lock:
            if self.state.leader == replica_id:
                self.elect_automatically()
            else:
                self._change(lambda s: s.with_isr(r for r in s.isr if r != replica_id) if replica_id in s.isr
                             else None)

    def replica_restarted(self, replica_id: int) -> None:
        """``replica_id`` is back (its handle online): it leads if the partition had no
        leader and it may, else it is told the current leader (and follows it, or leads
        again if it is the recorded leader)."""
        with self.lock:
            state = self.state
            if state.leader == NO_LEADER:
                self.elect_automatically()
            else:
                self._send(replica_id, state)

    def announce(self) -> None:
        """Send the recorded state to every live replica (after a controller starts)."""
        with self.lock:
            self._fan_out(self.state)

    def _change(self, change, *, announce: bool = True) -> None:
        """Compare-and-set the state file, then send LeaderAndIsr to every live replica."""
        new = update_state(self.state_path, change)
        if new is None:
            return
        self._record(new)
        if announce:
            self._fan_out(self._state)

    def _record(self, state: PartitionState) -> None:
        self._state = replace(state, replicas=self.replica_ids)

    def _fan_out(self, state: PartitionState) -> None:
        for r in sorted(self.live_replicas, key=lambda r: r != state.leader):
            self._send(r, state)

    def _send(self, replica_id: int, state: PartitionState) -> None:
        handle = self._handles[replica_id]
        if replica_id == state.leader:
            handle.become_leader(state)
        else:
            handle.become_follower(state)


class ReplicatedPartition:
    """What both fleets share: the controller's facts (``state``, ``leader``,
    ``leader_epoch``, ``isr``), the elections a user asks for, and the closed check.
    A fleet sets ``name``, ``root``, ``replica_ids`` and ``_controller``, and ``_closed``
    (an Event) before use."""

    name: str
    root: str
    replica_ids: tuple[int, ...]
    _controller: Controller

    @property
    def state(self) -> PartitionState:
        """The controller's record: leader, leader epoch, ISR, with the replicas assigned."""
        return self._controller.state

    @property
    def leader(self) -> int:
        """The leader's replica id (-1 when none)."""
        return self.state.leader

    @property
    def leader_epoch(self) -> int:
        """The current leader epoch (one more at every election)."""
        return self.state.leader_epoch

    @property
    def isr(self) -> tuple[int, ...]:
        """The in-sync replicas, as the controller recorded them."""
        return self.state.isr

    @property
    def state_path(self) -> str:
        """The controller's record, ``<root>/<topic>-<partition>.state``."""
        return self._controller.state_path

    @property
    def unclean_leader_election_enable(self) -> bool:
        """Whether a replica outside the ISR may lead (records may be lost)."""
        return self._controller.unclean_leader_election_enable

    def elect_leader(self, clean: bool = True, *, leader: int | None = None) -> int:
        """Elect a leader now, in a new leader epoch (``leader``, or the first eligible
        replica in assignment order). ``clean``: from the live ISR replicas only. An unclean
        election may pick a replica outside the ISR, and only with
        ``unclean_leader_election_enable``. Raises :class:`LeaderNotAvailableError` when no
        replica is eligible. Returns the leader's id."""
        self._check_open()
        with self._lock:
            chosen = self._controller.elect(Election.ONLINE if clean else Election.UNCLEAN, leader=leader)
            if chosen is None:
                raise LeaderNotAvailableError(f"no eligible replica for {self.name}: ISR {self.isr}, "
                                              f"live {self._controller.live_replicas}, clean={clean}")
            return chosen

    def preferred_leader_election(self) -> bool:
        """Move leadership back to the first assigned replica when it is live, in the ISR
        and not leading already. True if leadership moved."""
        self._check_open()
        with self._lock:
            return self._controller.elect(Election.PREFERRED) is not None

    def _check_open(self) -> None:
        if self._closed.is_set():
            raise LogClosedError(f"the replica set of {self.name} at {self.root} is closed")

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        self.close()
