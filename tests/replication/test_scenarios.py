"""Kafka's replication scenarios, each as its documentation tells it (docs/replication.md),
on a ReplicaSet driven one fetch round at a time."""

from __future__ import annotations

import pytest

from pylog.errors import (
    FencedLeaderEpochError, LeaderNotAvailableError, NotEnoughReplicasAfterAppendError, NotEnoughReplicasError,
    NotLeaderOrFollowerError, ReplicationTimeoutError,
)
from pylog.replication.protocol import FENCED_LEADER_EPOCH, UNKNOWN_LEADER_EPOCH, FetchRequest
from pylog.replication.replica import Replica
from pylog.replication.state import PartitionState, read_state
from tests.replication.driven import LAG_MS, Clock, driven_set, settle, values
from tests.replication.epochs import checkpoint_mismatch


def test_acks_1_record_is_lost_when_the_leader_dies_before_the_followers_copy_it(tmp_path):
    with driven_set(tmp_path) as rs:
        rs.append([b"a"], acks="all")
        rs.pause(1), rs.pause(2)
        info = rs.append([b"lost"], acks=1)  # acknowledged by the leader alone
        assert info.first_offset == 1
        rs.fail_replica(0)
        assert rs.leader == 1 and rs.leader_epoch == 1
        rs.resume(1), rs.resume(2)
        rs.append([b"b"], acks="all")
        assert [r.value for r in rs.records()] == [b"a", b"b"]
        rs.restart_replica(0)
        settle(rs)
        assert values(rs.log(0)) == values(rs.log(1)) == values(rs.log(2)) == [b"a", b"b"]


def test_acks_all_with_isr_of_three_loses_nothing_acknowledged_when_the_leader_dies(tmp_path):
    with driven_set(tmp_path, min_insync_replicas=2) as rs:
        acked = []
        for i in range(5):
            rs.append([b"%d" % i], acks="all")
            acked.append(b"%d" % i)
        rs.pause(2)  # a slow follower: acks=all waits for it while it is in the ISR
        with pytest.raises(ReplicationTimeoutError):
            rs.append([b"unacked"], acks="all")
        rs.fail_replica(0)
        assert rs.leader == 1
        got = [r.value for r in rs.records()]
        assert got[: len(acked)] == acked
        rs.resume(2)
        rs.restart_replica(0)
        settle(rs)
        for r in (0, 1, 2):
            assert values(rs.log(r))[: len(acked)] == acked


def test_the_follower_behind_becomes_leader_and_the_other_truncates_its_extra_records(tmp_path):
    with driven_set(tmp_path) as rs:
        rs.append([b"a"], acks="all")
        rs.pause(2)
        rs.append([b"b", b"c"], acks=1)
        rs.replicate([1])
        assert values(rs.log(1)) == [b"a", b"b", b"c"] and values(rs.log(2)) == [b"a"]
        rs.fail_replica(0)
        rs.elect_leader(leader=2)  # the one behind, still in the ISR
        rs.resume(2)
        rs.append([b"d"], acks="all")
        assert values(rs.log(1)) == values(rs.log(2)) == [b"a", b"d"]
        assert checkpoint_mismatch(rs.log(1)) is None


def test_the_old_leader_returning_truncates_what_the_new_leader_never_had(tmp_path):
    with driven_set(tmp_path) as rs:
        rs.append([b"a"], acks="all")
        rs.pause(1), rs.pause(2)
        rs.append([b"x", b"y"], acks=1)
        rs.fail_replica(0)
        rs.resume(1), rs.resume(2)
        rs.append([b"z"], acks="all")
        rs.restart_replica(0)
        assert values(rs.log(0)) == [b"a", b"x", b"y"]
        settle(rs)
        assert values(rs.log(0)) == [b"a", b"z"]
        assert rs.log(0).read(0, 1 << 20).raw() == rs.log(1).read(0, 1 << 20).raw()


def test_kip_101_truncating_to_the_high_watermark_alone_would_keep_a_diverged_record(tmp_path):
    clock = Clock()
    with driven_set(tmp_path, replicas=2, clock=clock, unclean_leader_election_enable=True) as rs:
        rs.append([b"m1"], acks="all")
        rs.pause(1)
        rs.append([b"m2"], acks=1)
        clock.advance(LAG_MS + 1)
        assert rs.check_isr() == (1,)  # a follower with everything stays; one behind too long goes
        assert rs.high_watermark == 2  # m2 committed with the leader alone in the ISR
        rs.fail_replica(0)
        assert rs.leader == 1 and rs.isr == (1,)  # unclean: 1 never had m2
        rs.resume(1)
        rs.append([b"m3"], acks="all")
        rs.restart_replica(0)
        log0 = rs.log(0)
        assert log0.high_watermark == 2 and values(log0) == [b"m1", b"m2"]  # the HW rule keeps offset 1: m2
        settle(rs)
        assert values(log0) == values(rs.log(1)) == [b"m1", b"m3"]


def test_walking_back_over_several_epochs_finds_the_divergence(tmp_path):
    """KIP-279: the follower does not know the epoch the leader answers, so it asks again."""
    from pylog import Log
    from pylog.record import encode_batch
    from pylog.replication.truncation import truncate_to_leader

    def write(path, epochs):
        log = Log.open(path, auto_high_watermark=False)
        offset = 0
        for epoch, count in epochs:
            log.append_as_follower(encode_batch([b"e%d" % epoch] * count, base_offset=offset,
                                                partition_leader_epoch=epoch))
            offset += count
        return log

    leader = write(tmp_path / "a" / "t-0", [(0, 2), (1, 2), (3, 2), (5, 2)])
    follower = write(tmp_path / "b" / "t-0", [(0, 2), (2, 3), (4, 2)])
    asked = []

    def ask(epoch):
        asked.append(epoch)
        return leader.replica_view.end_offset_for_epoch(epoch)

    assert truncate_to_leader(follower, ask) == 2
    assert asked == [4, 2, 0]
    assert follower.replica_view.end_offset_for_epoch(0) == (0, 2)
    leader.close(), follower.close()


def test_isr_of_the_leader_alone_refuses_acks_all_under_min_insync_2_until_a_follower_catches_up(tmp_path):
    clock = Clock()
    with driven_set(tmp_path, clock=clock, min_insync_replicas=2) as rs:
        rs.append([b"a"], acks="all")
        rs.pause(1), rs.pause(2)
        rs.append([b"b"], acks=1)
        clock.advance(LAG_MS + 1)
        rs.check_isr()
        assert rs.isr == (0,) and read_state(rs.state_path).isr == (0,)
        end = rs.log(0).log_end_offset
        with pytest.raises(NotEnoughReplicasError):
            rs.append([b"refused"], acks="all")
        assert rs.log(0).log_end_offset == end  # nothing appended
        rs.resume(1)
        settle(rs)
        assert rs.isr == (0, 1)
        rs.append([b"c"], acks="all")
        assert [r.value for r in rs.records()] == [b"a", b"b", b"c"]


def test_isr_shrinking_while_waiting_gives_not_enough_replicas_after_append(tmp_path):
    clock = Clock()
    with driven_set(tmp_path, clock=clock, min_insync_replicas=2) as rs:
        rs.append([b"a"], acks="all")
        rs.pause(1), rs.pause(2)
        clock.advance(LAG_MS + 1)  # the followers fall out of sync; the leader has not noticed yet
        assert rs.isr == (0, 1, 2)
        with pytest.raises(NotEnoughReplicasAfterAppendError):
            rs.append([b"b"], acks="all")
        assert rs.isr == (0,) and rs.log(0).log_end_offset == 2


def test_unclean_election_off_leaves_the_partition_offline_until_an_isr_replica_returns(tmp_path):
    clock = Clock()
    with driven_set(tmp_path, replicas=2, clock=clock) as rs:
        rs.append([b"a"], acks="all")
        rs.pause(1)
        rs.append([b"b"], acks=1)
        clock.advance(LAG_MS + 1)
        rs.check_isr()
        assert rs.isr == (0,) and rs.high_watermark == 2
        rs.fail_replica(0)
        assert rs.leader == -1 and rs.isr == (0,)
        with pytest.raises(LeaderNotAvailableError, match=r"in-sync replicas \(0\) are offline.*restart one"):
            rs.append([b"c"], acks=1)
        with pytest.raises(LeaderNotAvailableError, match="not enabled"):
            rs.elect_leader(clean=False)
        with pytest.raises(LeaderNotAvailableError):
            rs.elect_leader()
        rs.restart_replica(0)
        assert rs.leader == 0
        rs.resume(1)
        settle(rs)
        assert values(rs.log(1)) == [b"a", b"b"]


def test_unclean_election_on_elects_an_out_of_sync_replica_and_loses_what_it_lacked(tmp_path):
    clock = Clock()
    with driven_set(tmp_path, replicas=2, clock=clock, unclean_leader_election_enable=True) as rs:
        rs.append([b"a"], acks="all")
        rs.pause(1)
        rs.append([b"b"], acks=1)
        clock.advance(LAG_MS + 1)
        rs.check_isr()
        assert rs.isr == (0,) and rs.high_watermark == 2
        rs.fail_replica(0)
        assert rs.leader == 1 and rs.isr == (1,)
        assert [r.value for r in rs.records()] == [b"a"]  # b is lost, as documented


def test_every_election_bumps_the_epoch_and_records_kafkas_partition_state(tmp_path):
    with driven_set(tmp_path) as rs:
        assert read_state(rs.state_path) == PartitionState(0, 0, (0, 1, 2))
        with open(rs.state_path, "rb") as f:
            assert f.read() == (b'{"controller_epoch":1,"leader":0,"version":1,"leader_epoch":0,"isr":[0,1,2],'
                                b'"partition_epoch":0}')
        rs.elect_leader(leader=1)
        assert read_state(rs.state_path) == PartitionState(1, 1, (0, 1, 2))
        assert read_state(rs.state_path).partition_epoch == 1  # every change bumps it
        assert rs.preferred_leader_election() is True
        assert (rs.leader, rs.leader_epoch) == (0, 2)
        assert rs.preferred_leader_election() is False
        rs.append([b"a"], acks="all")
        assert [b.partition_leader_epoch for b in rs.log(2).read(0).batches()] == [2]


def test_a_stale_leader_and_its_followers_are_fenced_by_the_epoch(tmp_path):
    with driven_set(tmp_path) as rs:
        rs.append([b"a"], acks="all")
        old = rs.state
        rs.elect_leader(leader=1)
        with pytest.raises(FencedLeaderEpochError):
            rs.replica(0).become_leader(PartitionState(0, old.leader_epoch, old.isr, replicas=(0, 1, 2)))
        with pytest.raises(NotLeaderOrFollowerError):
            rs.replica(0).append([b"stale"])
        stale_fetch = FetchRequest(2, old.leader_epoch, rs.log(2).log_end_offset, max_wait_ms=0)
        assert rs.replica(1).handle_fetch(stale_fetch).error == FENCED_LEADER_EPOCH
        future_fetch = FetchRequest(2, old.leader_epoch + 5, rs.log(2).log_end_offset, max_wait_ms=0)
        assert rs.replica(1).handle_fetch(future_fetch).error == UNKNOWN_LEADER_EPOCH


def test_the_high_watermark_survives_a_restart_in_replication_offset_checkpoint(tmp_path):
    with driven_set(tmp_path) as rs:
        rs.append([b"a", b"b"], acks="all")
        settle(rs)
    with driven_set(tmp_path) as rs:
        assert [rs.log(r).high_watermark for r in (0, 1, 2)] == [2, 2, 2]
        assert rs.leader_epoch == 0 and [r.value for r in rs.records()] == [b"a", b"b"]


def test_a_fetch_cut_inside_a_batch_by_max_bytes_appends_the_whole_ones_and_converges(tmp_path):
    with driven_set(tmp_path, replica_fetch_max_bytes=150) as rs:
        rs.pause(1), rs.pause(2)
        for i in range(5):
            rs.append([b"v%d" % i * 20, b"w"], acks=1)
        rs.resume(1), rs.resume(2)
        settle(rs)
        assert values(rs.log(1)) == values(rs.log(2)) == values(rs.log(0))
        assert rs.high_watermark == 10



@pytest.mark.parametrize("per_batch", [1, 2], ids=["log-start-at-a-batch", "log-start-inside-a-batch"])
def test_a_follower_below_the_leaders_log_start_restarts_empty_there_and_converges(tmp_path, per_batch):
    """Kafka's follower on OFFSET_OUT_OF_RANGE with its log end below the leader's log start:
    it truncates fully, starts at the leader's log start, and fetches on."""
    clock = Clock()
    with driven_set(tmp_path, clock=clock, segment_bytes=200) as rs:
        rs.append([b"a"], acks="all")
        rs.pause(2)
        for i in range(0, 20, per_batch):
            rs.append([b"r%02d" % j for j in range(i, i + per_batch)], acks=1)
            rs.replicate([1])
        rs.replicate([1])  # the leader learns that follower 1 has everything
        clock.advance(LAG_MS + 1)
        assert rs.check_isr() == (2,)
        leader = rs.log(0)
        assert leader.delete_records(16) == 16 and leader.segments[0].base_offset > 1  # what follower 2 needs is gone
        rs.resume(2)
        settle(rs)
        follower = rs.log(2)
        assert follower.log_start_offset == leader.log_start_offset == 16
        assert follower.log_end_offset == leader.log_end_offset == 21
        assert values(follower) == values(leader) == [b"r%02d" % i for i in range(15, 20)]
        assert follower.read(16, 1 << 20).raw() == leader.read(16, 1 << 20).raw()
        assert follower.high_watermark == leader.high_watermark == 21
        assert follower.check() == [] and checkpoint_mismatch(follower) is None
        assert rs.isr == (0, 1, 2)
        rs.append([b"after"], acks="all")
        assert values(follower)[-1] == b"after"


def test_a_follower_joining_the_isr_counts_for_the_high_watermark_while_its_addition_is_recorded(tmp_path):
    def alter_isr(replica_id, epoch, isr):
        leader.append([b"during"])  # a producer writes while the controller records the addition
        return True
    leader = Replica(0, tmp_path / "broker-0" / "t-0", log_config={}, alter_isr=alter_isr,
                     replica_lag_time_max_ms=LAG_MS)
    leader.start()
    try:
        leader.become_leader(PartitionState(0, 1, (0,), replicas=(0, 1)))
        leader.append([b"a"])
        assert leader.log.high_watermark == 1  # an ISR of one commits at once
        leader.handle_fetch(FetchRequest(1, 1, 1, max_wait_ms=0))  # follower 1 has offset 0: it joins
        assert leader.isr == (0, 1)
        assert leader.log.high_watermark == 1  # "during" is not committed: once elected, 1 would lack it
    finally:
        leader.stop()
