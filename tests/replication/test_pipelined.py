"""Followers fetching the same offset share one read of the leader's log without ever
getting the bytes of an earlier leadership."""

from __future__ import annotations

from pylog import decode_batches
from pylog.replication.protocol import FetchRequest
from pylog.replication.transport import InProcessEndpoint
from tests.replication.driven import driven_set, settle, values


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
