"""Appends in flight (``ReplicaSet.append_async``) keep ``acks``' rules, and followers
fetching the same offset share one read of the leader's log without ever getting the bytes
of an earlier leadership."""

from __future__ import annotations

import pytest

from pylog import decode_batches
from pylog.errors import (
    NotEnoughReplicasAfterAppendError, NotEnoughReplicasError, NotLeaderOrFollowerError, ReplicationTimeoutError,
)
from pylog.replication import ReplicaSet
from pylog.replication.protocol import FetchRequest
from pylog.replication.transport import InProcessEndpoint
from tests.replication.driven import driven_set, settle, values


def test_appends_in_flight_are_acknowledged_in_order_once_every_isr_replica_has_them(tmp_path):
    with ReplicaSet(tmp_path, "events-0", replicas=3, min_insync_replicas=3) as rs:
        pending = [rs.append_async([b"%d" % i], acks="all") for i in range(50)]
        for i, p in enumerate(pending):
            info = p.result()
            assert (info.first_offset, p.done()) == (i, True)
            assert rs.high_watermark > info.last_offset
            assert all(rs.log(r).log_end_offset > info.last_offset for r in (1, 2))
        assert values(rs.log(2)) == [b"%d" % i for i in range(50)]


def test_an_append_in_flight_waits_for_every_isr_replica_and_answers_the_same_every_time(tmp_path):
    with driven_set(tmp_path, min_insync_replicas=2) as rs:
        pending = rs.append_async([b"a"], acks="all")
        assert not pending.done() and rs.high_watermark == 0  # no follower fetched yet
        rs.pause(2)
        rs.replicate()
        assert not pending.done() and rs.high_watermark == 0  # follower 2, in the ISR, lacks it
        with pytest.raises(ReplicationTimeoutError):
            pending.result()
        rs.resume(2)
        settle(rs)
        assert pending.done() and rs.high_watermark == 1  # committed after all, as Kafka may do
        with pytest.raises(ReplicationTimeoutError):
            pending.result()
        assert rs.append_async([b"b"], acks="all").result().first_offset == 1


def test_acks_1_in_flight_is_answered_at_once(tmp_path):
    with driven_set(tmp_path) as rs:
        pending = rs.append_async([b"a"], acks=1)
        assert pending.done() and pending.result().first_offset == 0 and rs.high_watermark == 0


def test_too_small_an_isr_is_refused_before_anything_is_written(tmp_path):
    with driven_set(tmp_path, min_insync_replicas=3) as rs:
        rs.fail_replica(2)
        with pytest.raises(NotEnoughReplicasError):
            rs.append_async([b"a"], acks="all")
        assert rs.log(0).log_end_offset == 0


def test_leadership_moved_before_the_commit_is_not_an_acknowledgement(tmp_path):
    with driven_set(tmp_path, min_insync_replicas=2) as rs:
        pending = rs.append_async([b"a"], acks="all")
        rs.elect_leader(leader=1)
        with pytest.raises(NotLeaderOrFollowerError):
            pending.result()


def test_an_isr_shrunk_below_min_insync_replicas_is_not_an_acknowledgement(tmp_path):
    with driven_set(tmp_path, min_insync_replicas=2) as rs:
        pending = rs.append_async([b"a"], acks="all")
        rs.fail_replica(1), rs.fail_replica(2)
        with pytest.raises(NotEnoughReplicasAfterAppendError):
            pending.result()
        assert rs.high_watermark == 1  # written, committed by the leader alone, not acknowledged


def _fetched_values(leader, replica_id: int, epoch: int, offset: int) -> list[bytes]:
    _, raw = InProcessEndpoint(leader).fetch(FetchRequest(replica_id, epoch, offset, 1 << 20, 0))
    return [r.value for b in decode_batches(raw) for r in b.records()]


def test_a_shared_read_never_outlives_the_leadership_that_made_it(tmp_path):
    """Replica 0 leads, a follower reads offset 0 (b"a"); replica 0 is deposed, cuts b"a",
    copies b"x" at offset 0 and leads again: a fetch of the same offset, with the same log
    end and log start as the first, gets b"x"."""
    with driven_set(tmp_path, replicas=2) as rs:
        rs.pause(1)
        rs.append([b"a"], acks=1)
        assert _fetched_values(rs.replica(0), 1, rs.leader_epoch, 0) == [b"a"]
        rs.elect_leader(leader=1)
        rs.append([b"x"], acks=1)
        rs.resume(1)
        settle(rs)
        assert values(rs.log(0)) == [b"x"]
        rs.elect_leader(leader=0)
        assert _fetched_values(rs.replica(0), 1, rs.leader_epoch, 0) == [b"x"]
