"""The controller's rules as a table, as Kafka's PartitionChangeBuilderTest states them: each
election (clean, unclean, preferred) for an ISR and a set of live replicas gives one leader
and ISR, or changes nothing, or takes the partition offline; AlterPartition is a
compare-and-set; every change is told to the live replicas, the leader first. The replicas
are small in-memory handles; the state is a real file."""

from __future__ import annotations

import pytest

from pylog.errors import InvalidArgumentError, LeaderNotAvailableError
from pylog.replication.controller import Controller, Election
from pylog.replication.state import NO_LEADER, PartitionState, read_state

REPLICAS = (0, 1, 2)


class FakeReplica:
    """A ``ReplicaHandle`` that notes the LeaderAndIsr it is sent."""

    def __init__(self, online: bool):
        self.online = online
        self.told: list[tuple] = []

    def become_leader(self, state: PartitionState) -> None:
        self.told.append(("lead", state.leader_epoch, state.isr))

    def become_follower(self, state: PartitionState) -> None:
        self.told.append(("follow", state.leader, state.leader_epoch, state.isr))


def controller(tmp_path, *, leader: int, isr, live, unclean: bool = False, epoch: int = 5):
    handles = {r: FakeReplica(r in live) for r in REPLICAS}
    c = Controller(str(tmp_path / "events-0.state"), REPLICAS, handles, unclean_leader_election_enable=unclean,
                   name="events-0")
    c.initialize(PartitionState(leader, epoch, tuple(isr), partition_epoch=7))
    return c, handles


# (election, leader now, ISR, live, unclean enabled) -> (elected, leader after, ISR after)
ELECTIONS = [
    # clean: the first live ISR replica; the ISR keeps its live members
    (Election.ONLINE, 0, (0, 1, 2), (1, 2), False, 1, 1, (1, 2)),
    (Election.ONLINE, 0, (0, 2), (1, 2), False, 2, 2, (2,)),
    (Election.ONLINE, 0, (0, 1, 2), (0, 1, 2), False, 0, 0, (0, 1, 2)),  # a new epoch, same leader
    # clean, no live ISR replica: offline, the ISR kept for when one returns
    (Election.ONLINE, 0, (0,), (1, 2), False, None, NO_LEADER, (0,)),
    (Election.ONLINE, 0, (0,), (1, 2), True, None, NO_LEADER, (0,)),
    # unclean: a live ISR replica still comes first, else any live replica, leading alone
    (Election.UNCLEAN, 0, (0, 2), (1, 2), True, 2, 2, (2,)),
    (Election.UNCLEAN, 0, (0,), (1, 2), True, 1, 1, (1,)),
    (Election.UNCLEAN, 0, (0,), (), True, None, NO_LEADER, (0,)),
    # preferred: the first assigned replica, when live and in the ISR
    (Election.PREFERRED, 1, (0, 1, 2), (0, 1, 2), False, 0, 0, (0, 1, 2)),
    (Election.PREFERRED, 1, (0, 1), (0, 1, 2), False, 0, 0, (0, 1)),
]


@pytest.mark.parametrize("election, leader, isr, live, unclean, chosen, leader_after, isr_after", ELECTIONS)
def test_an_election_records_a_new_leader_epoch_and_tells_the_live_replicas(
        tmp_path, election, leader, isr, live, unclean, chosen, leader_after, isr_after):
    c, handles = controller(tmp_path, leader=leader, isr=isr, live=live, unclean=unclean)
    assert c.elect(election) == chosen
    after = read_state(c.state_path)
    assert (after.leader, after.leader_epoch, after.isr, after.partition_epoch) == (leader_after, 6, isr_after, 8)
    for r in live:
        expected = ("lead", 6, isr_after) if r == leader_after else ("follow", leader_after, 6, isr_after)
        assert handles[r].told == [expected]
    assert all(handles[r].told == [] for r in REPLICAS if r not in live)


# (election, leader now, ISR, live, the leader asked for): no replica eligible, nothing changes
UNCHANGED = [
    (Election.PREFERRED, 0, (0, 1, 2), (0, 1, 2), None),  # leads already
    (Election.PREFERRED, 1, (1, 2), (0, 1, 2), None),  # not in the ISR
    (Election.PREFERRED, 1, (0, 1, 2), (1, 2), None),  # down
    (Election.ONLINE, 0, (0, 1), (0, 1, 2), 2),  # out of the ISR
    (Election.ONLINE, 0, (0, 1, 2), (0, 1), 2),  # down
    (Election.ONLINE, NO_LEADER, (0,), (1, 2), None),  # offline already
]


@pytest.mark.parametrize("election, leader, isr, live, asked", UNCHANGED)
def test_an_election_with_no_eligible_replica_changes_nothing(tmp_path, election, leader, isr, live, asked):
    c, handles = controller(tmp_path, leader=leader, isr=isr, live=live)
    before = read_state(c.state_path)
    assert c.elect(election, leader=asked) is None
    assert read_state(c.state_path) == before and read_state(c.state_path).partition_epoch == 7
    assert all(h.told == [] for h in handles.values())


def test_an_unclean_election_is_refused_unless_enabled(tmp_path):
    c, handles = controller(tmp_path, leader=0, isr=(0,), live=(1, 2))
    with pytest.raises(LeaderNotAvailableError, match="unclean leader election is not enabled"):
        c.elect(Election.UNCLEAN)
    assert read_state(c.state_path).leader_epoch == 5


def test_electing_an_unassigned_replica_or_no_election_is_bad_input(tmp_path):
    c, _ = controller(tmp_path, leader=0, isr=REPLICAS, live=REPLICAS)
    with pytest.raises(InvalidArgumentError, match=r"replica 9 is not one of the replicas \(0, 1, 2\) of events-0"):
        c.elect(Election.ONLINE, leader=9)
    with pytest.raises(InvalidArgumentError, match="election must be an Election"):
        c.elect("clean")


def test_alter_isr_is_a_compare_and_set_on_the_leader_and_its_epoch(tmp_path):
    c, handles = controller(tmp_path, leader=1, isr=(1,), live=REPLICAS)
    assert c.alter_isr(1, 4, (0, 1)) is False  # an older leader epoch
    assert c.alter_isr(0, 5, (0, 1)) is False  # not the leader
    assert c.alter_isr(1, 5, (0, 2)) is False  # an ISR without the leader
    assert read_state(c.state_path).partition_epoch == 7
    assert c.alter_isr(1, 5, (2, 1)) is True
    assert (c.state.isr, c.state.partition_epoch) == ((1, 2), 8) and read_state(c.state_path).isr == (1, 2)
    assert all(h.told == [] for h in handles.values())  # the leader takes its own change


def test_a_failed_follower_leaves_the_isr_and_the_leader_is_told_first(tmp_path):
    c, handles = controller(tmp_path, leader=2, isr=REPLICAS, live=REPLICAS)
    handles[1].online = False
    c.replica_failed(1)
    assert (c.state.leader, c.state.leader_epoch, c.state.isr) == (2, 5, (0, 2))
    assert handles[2].told == [("lead", 5, (0, 2))] and handles[0].told == [("follow", 2, 5, (0, 2))]
    assert handles[1].told == []
    c.replica_failed(1)  # out of the ISR already: nothing to record
    assert c.state.partition_epoch == 8


def test_a_failed_leader_is_replaced_and_a_restarted_one_follows(tmp_path):
    c, handles = controller(tmp_path, leader=0, isr=REPLICAS, live=REPLICAS)
    handles[0].online = False
    c.replica_failed(0)
    assert (c.state.leader, c.state.leader_epoch, c.state.isr) == (1, 6, (1, 2))
    handles[0].online = True
    c.replica_restarted(0)
    assert handles[0].told == [("follow", 1, 6, (1, 2))]


def test_a_restarted_isr_replica_brings_an_offline_partition_back(tmp_path):
    c, handles = controller(tmp_path, leader=0, isr=(0,), live=(1, 2))
    assert c.elect(Election.ONLINE) is None and c.state.leader == NO_LEADER
    handles[0].online = True
    c.replica_restarted(0)
    assert (c.state.leader, c.state.leader_epoch, c.state.isr) == (0, 7, (0,))
    assert handles[0].told == [("lead", 7, (0,))]
    assert handles[1].told[-1] == ("follow", 0, 7, (0,))
