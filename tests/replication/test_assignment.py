"""A replica set's assignment as a user meets it: unknown replica ids, a set reopened with
other replicas, a negative produce timeout and a closed set are refused with clear errors
that change nothing, in-process and as processes alike."""

from __future__ import annotations

import os

import pytest

from pylog.errors import InvalidArgumentError, LogClosedError
from pylog.replication import ProcessReplicaSet, ReplicaSet
from pylog.replication.state import read_state
from tests.replication.driven import driven_set, settle


@pytest.mark.parametrize("call", ["replica", "log", "pause", "resume", "fail_replica", "restart_replica",
                                  "follower_log_end_offset", "stop_follower_process"])
def test_an_unknown_replica_id_is_refused_naming_the_replicas(tmp_path, call):
    with driven_set(tmp_path) as rs:
        with pytest.raises(InvalidArgumentError, match=r"replica 7 is not one of the replicas \(0, 1, 2\) of events-0"):
            getattr(rs, call)(7)
        assert not os.path.exists(tmp_path / "broker-7")


def test_electing_an_unknown_replica_is_refused_as_bad_input(tmp_path):
    with driven_set(tmp_path) as rs:
        with pytest.raises(InvalidArgumentError, match="replica 9 is not one of the replicas"):
            rs.elect_leader(leader=9)
        assert rs.leader == 0 and rs.leader_epoch == 0


def test_a_negative_produce_timeout_is_refused_before_anything_is_written(tmp_path):
    with driven_set(tmp_path, min_insync_replicas=2) as rs:
        with pytest.raises(InvalidArgumentError, match=r"timeout_ms -5 is outside \[0, 2147483647\]"):
            rs.append([b"x"], acks="all", timeout_ms=-5)
        assert rs.log(0).log_end_offset == 0


def test_a_closed_replica_set_says_it_is_closed(tmp_path):
    rs = driven_set(tmp_path)
    rs.close()
    with pytest.raises(LogClosedError, match="replica set of events-0 .* is closed"):
        rs.append([b"x"])
    with pytest.raises(LogClosedError):
        list(rs.records())


def test_reopened_with_fewer_replicas_the_isr_keeps_only_assigned_ones_and_acks_all_is_answered(tmp_path):
    with driven_set(tmp_path, min_insync_replicas=2) as rs:
        rs.append([b"a"], acks="all")
        assert rs.isr == (0, 1, 2)
    with driven_set(tmp_path, replicas=[0, 1], min_insync_replicas=2) as rs:
        assert rs.isr == (0, 1) and rs.state.replicas == (0, 1)
        assert read_state(rs.state_path).isr == (0, 1)
        rs.append([b"b"], acks="all", timeout_ms=5_000)  # the dropped replica 2 is not waited for
        settle(rs)
        assert [r.value for r in rs.records()] == [b"a", b"b"]


def test_reopened_without_its_leader_a_new_leader_is_elected_from_the_assigned_isr(tmp_path):
    with driven_set(tmp_path, min_insync_replicas=2) as rs:
        rs.append([b"a"], acks="all")
    with driven_set(tmp_path, replicas=[1, 2]) as rs:
        assert rs.leader == 1 and rs.leader_epoch == 1 and rs.isr == (1, 2)
        settle(rs)  # the new leader's high watermark moves once its follower fetches, as in Kafka
        assert [r.value for r in rs.records()] == [b"a"]


def test_reopened_without_any_in_sync_replica_is_refused_and_nothing_changes(tmp_path):
    with driven_set(tmp_path) as rs:
        rs.append([b"a"], acks=1)
        rs.fail_replica(1)
        rs.fail_replica(2)
        assert rs.isr == (0,)
    before = read_state(str(tmp_path / "events-0.state"))
    with pytest.raises(InvalidArgumentError, match=r"replicas \(1, 2\) leave out every in-sync replica \(0,\)"):
        driven_set(tmp_path, replicas=[1, 2])
    assert read_state(str(tmp_path / "events-0.state")) == before


def test_a_process_replica_set_refuses_unknown_replicas_and_negative_timeouts(tmp_path):
    with ProcessReplicaSet(tmp_path, "events-0", replicas=2) as rs:
        for call in ("path", "fail_replica", "restart_replica"):
            with pytest.raises(InvalidArgumentError, match=r"replica 7 is not one of the replicas \(0, 1\)"):
                getattr(rs, call)(7)
        with pytest.raises(InvalidArgumentError, match="replica 9 is not one of the replicas"):
            rs.elect_leader(leader=9)
        with pytest.raises(InvalidArgumentError, match="timeout_ms"):
            rs.append([b"x"], acks="all", timeout_ms=-1)
        assert not os.path.exists(tmp_path / "broker-7")
        assert [r.value for r in rs.records()] == []


def test_reopening_a_process_replica_set_without_any_in_sync_replica_is_refused_before_any_process_starts(tmp_path):
    with ReplicaSet(tmp_path, "events-0", replicas=2, fetchers=False) as rs:
        rs.append([b"a"])
        rs.fail_replica(1)
    before = read_state(str(tmp_path / "events-0.state"))
    with pytest.raises(InvalidArgumentError, match="leave out every in-sync replica"):
        ProcessReplicaSet(tmp_path, "events-0", replicas=[1, 2])
    assert not os.path.exists(tmp_path / "broker-2")
    assert read_state(str(tmp_path / "events-0.state")) == before
