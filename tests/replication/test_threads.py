"""A ReplicaSet whose followers are threads fetching on their own: acknowledgements,
ISR expiration on the real clock, failover while appends go on."""

from __future__ import annotations

import threading

import pytest

from pylog.errors import NotEnoughReplicasError, PylogError
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
