"""How a follower reaches its leader. ``InProcessEndpoint`` calls the leader's ``Replica``
directly (followers as threads of one process); ``TcpEndpoint`` and ``ReplicaServer``
carry the same two requests over TCP (docs/format/replication.md), the leader sending the
record bytes with ``FetchData.transfer_to`` (sendfile, zero copy)."""

from __future__ import annotations

from pylog.errors import NotLeaderOrFollowerError
from pylog.replication.protocol import EpochEndOffset, FetchRequest, FetchResponse


class InProcessEndpoint:
    """The leader ``Replica`` of this process."""

    def __init__(self, replica):
        self.replica = replica

    def fetch(self, req: FetchRequest) -> tuple[FetchResponse, bytes]:
        if not self.replica.online:
            raise NotLeaderOrFollowerError(f"replica {self.replica.replica_id} is offline")
        resp = self.replica.handle_fetch(req)
        raw = resp.record_bytes()
        resp.records = None
        return resp, raw

    def offsets_for_leader_epoch(self, replica_id: int, current_leader_epoch: int, epoch: int) -> EpochEndOffset:
        if not self.replica.online:
            raise NotLeaderOrFollowerError(f"replica {self.replica.replica_id} is offline")
        return self.replica.handle_offsets_for_leader_epoch(current_leader_epoch, epoch)
