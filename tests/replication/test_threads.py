"""A ReplicaSet whose followers are threads fetching on their own: acknowledgements,
ISR expiration on the real clock, failover while appends go on."""

from __future__ import annotations

import threading

import pytest

from pylog.errors import InvalidArgumentError, LogClosedError, NotEnoughReplicasError, PylogError
from pylog.replication import ReplicaSet
from tests.replication.driven import values
from tests.waiting import wait_until


def test_acks_all_returns_once_every_isr_follower_has_the_records(tmp_path):
    with ReplicaSet(tmp_path, "events-0", replicas=3, min_insync_replicas=3) as rs:
        for i in range(20):
            info = rs.append([b"%d" % i], acks="all")
            assert rs.high_watermark > info.last_offset
            assert all(rs.log(r).log_end_offset > info.last_offset for r in (1, 2))


def test_a_paused_follower_leaves_the_isr_after_the_lag_time_and_rejoins(tmp_path):
    with ReplicaSet(tmp_path, "events-0", replicas=3, min_insync_replicas=2, replica_lag_time_max_ms=200,
                    replica_fetch_wait_max_ms=20) as rs:
        rs.append([b"a"], acks="all")
        rs.pause(2)
        rs.append([b"b"], acks=1)
        wait_until(lambda: rs.isr == (0, 1), "follower 2 to leave the ISR")
        rs.append([b"c"], acks="all")
        rs.pause(1)
        rs.append([b"d"], acks=1)
        wait_until(lambda: rs.isr == (0,), "follower 1 to leave the ISR")
        with pytest.raises(NotEnoughReplicasError):
            rs.append([b"refused"], acks="all")
        rs.resume(1), rs.resume(2)
        wait_until(lambda: rs.isr == (0, 1, 2), "both followers to rejoin")
        rs.append([b"e"], acks="all")
        assert values(rs.log(1)) == values(rs.log(2)) == [b"a", b"b", b"c", b"d", b"e"]


def test_failover_while_a_producer_appends_loses_no_acknowledged_record(tmp_path):
    with ReplicaSet(tmp_path, "events-0", replicas=3, min_insync_replicas=2, replica_fetch_wait_max_ms=20) as rs:
        acked, stop = [], threading.Event()

        def produce():
            i = 0
            while not stop.is_set():
                try:
                    rs.append([b"%d" % i], acks="all", timeout_ms=2000)
                    acked.append(b"%d" % i)
                except PylogError:
                    pass  # no leader for a moment, or leadership moved: not acknowledged
                i += 1
        producer = threading.Thread(target=produce)
        producer.start()
        wait_until(lambda: len(acked) > 20, "some acknowledged appends")
        rs.fail_replica(0)
        count = len(acked)
        wait_until(lambda: len(acked) > count + 20, "appends acknowledged by the new leader")
        rs.restart_replica(0)
        stop.set()
        producer.join()
        have = set(r.value for r in rs.records())
        assert set(acked) <= have
        wait_until(lambda: rs.log(0).log_end_offset == rs.log(rs.leader).log_end_offset, "the old leader to catch up")


def test_restarting_the_live_leader_keeps_it_leading(tmp_path):
    with ReplicaSet(tmp_path, "orders-0", replicas=3, min_insync_replicas=2) as rs:
        rs.append([b"a"], acks="all")
        leader, epoch = rs.leader, rs.leader_epoch
        rs.restart_replica(leader)
        assert (rs.leader, rs.leader_epoch) == (leader, epoch) and rs.replica(leader).role == "leader"
        assert rs.append([b"b"], acks="all").first_offset == 1


def test_a_closed_replica_set_refuses_controller_calls_and_reopens_nothing(tmp_path):
    rs = ReplicaSet(tmp_path, "p-0", replicas=3, min_insync_replicas=2)
    rs.append([b"a"], acks="all")
    rs.close()
    state = (tmp_path / "p-0.state").read_bytes()
    for call in (lambda: rs.fail_replica(1), lambda: rs.restart_replica(1), lambda: rs.elect_leader(),
                 lambda: rs.preferred_leader_election(), lambda: rs.replicate(), lambda: rs.pause(1)):
        with pytest.raises(LogClosedError):
            call()
    assert (tmp_path / "p-0.state").read_bytes() == state and rs.log(1) is None


@pytest.mark.parametrize("settings", [
    dict(replicas=None), dict(replicas=2.0), dict(replicas=[0, 0]), dict(min_insync_replicas="2"),
    dict(min_insync_replicas=4), dict(replica_lag_time_max_ms="x"), dict(replica_lag_time_max_ms=-1),
    dict(replica_fetch_wait_max_ms="500"), dict(replica_fetch_max_bytes=0),
    dict(replica_high_watermark_checkpoint_interval_ms=None), dict(unclean_leader_election_enable="yes"),
    dict(remote_replicas=None),
], ids=repr)
def test_bad_settings_are_refused_before_anything_starts(tmp_path, settings):
    with pytest.raises(InvalidArgumentError):
        ReplicaSet(tmp_path / "root", "p-0", **{"replicas": 3, **settings})
    assert not (tmp_path / "root").exists()


def test_bad_calls_raise_invalid_argument_errors(tmp_path):
    (tmp_path / "a-file").write_bytes(b"")
    with pytest.raises(InvalidArgumentError):
        ReplicaSet(tmp_path / "a-file", "p-0")
    with ReplicaSet(tmp_path / "root", "p-0", replicas=2) as rs:
        for call in (lambda: rs.replicate([9]), lambda: rs.replicate(1), lambda: list(rs.records("a"))):
            with pytest.raises(InvalidArgumentError):
                call()
