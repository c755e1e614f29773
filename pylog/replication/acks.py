"""``PendingAppend``: an append written at the leader and not yet acknowledged, what
``ReplicaSet.append_async`` returns. Several may be in flight at once, as a Kafka producer
keeps up to ``max.in.flight.requests.per.connection`` produce requests: the followers then
copy them together, in fewer fetches. Each is acknowledged under ``acks``' own rule; only
the waiting is deferred (docs/replication.md).
"""

from __future__ import annotations

import time

from pylog.errors import NotEnoughReplicasAfterAppendError, NotLeaderOrFollowerError, ReplicationTimeoutError
from pylog.log import AppendInfo


class PendingAppend:
    """Records appended at ``leader`` in leader epoch ``epoch`` (``info``), acknowledged when
    ``acks`` is met, at most ``timeout_ms`` after the append."""

    def __init__(self, replica_set, leader, epoch: int, info: AppendInfo, acks, timeout_ms: int):
        self.info = info
        self.acks = acks
        self._replica_set = replica_set
        self._leader = leader
        self._epoch = epoch
        self._timeout_ms = timeout_ms
        self._deadline = time.monotonic() + timeout_ms / 1000
        self._outcome: AppendInfo | Exception | None = info if acks in (0, 1) else None

    def __repr__(self) -> str:
        return f"PendingAppend({self.info.first_offset}-{self.info.last_offset}, acks={self.acks!r})"

    def done(self) -> bool:
        """Whether the answer is decided: acks 0 or 1, the high watermark passed the records,
        leadership moved, or ``timeout_ms`` passed (a driven ``ReplicaSet`` moves only in
        :meth:`result` or ``replicate``). O(1)."""
        if self._outcome is not None:
            return True
        return (self._leader.wait_for_high_watermark(self.info.last_offset + 1, self._epoch, 0) is not False
                or time.monotonic() >= self._deadline)

    def result(self) -> AppendInfo:
        """The ``AppendInfo`` once acknowledged: with ``acks="all"``, once the high watermark
        passed the records (every ISR replica has them) and the ISR still has
        ``min_insync_replicas`` replicas. Waits until then, at most until ``timeout_ms`` after
        the append, and raises as ``ReplicaSet.append`` does: :class:`ReplicationTimeoutError`,
        :class:`NotEnoughReplicasAfterAppendError`, :class:`NotLeaderOrFollowerError` (also
        when leadership moved before this call, even if the records were committed first:
        an error may stand for records that were kept, an acknowledgement never for records
        that may be lost). The same answer on every call."""
        if self._outcome is None:
            self._outcome = self._acknowledge()
        if isinstance(self._outcome, Exception):
            raise self._outcome
        return self._outcome

    def _acknowledge(self) -> AppendInfo | Exception:
        rs, leader, info = self._replica_set, self._leader, self.info
        remaining_ms = max(0, (self._deadline - time.monotonic()) * 1000)
        reached = rs._wait_for_high_watermark(leader, info.last_offset + 1, self._epoch, remaining_ms)
        offsets = f"offsets {info.first_offset}-{info.last_offset}"
        if reached is None:
            return NotLeaderOrFollowerError(f"leadership of {rs.name} moved before {offsets} were committed")
        if not reached:
            return ReplicationTimeoutError(
                f"{offsets} of {rs.name} not on every ISR replica {leader.isr} after {self._timeout_ms} ms")
        if len(leader.isr) < rs.min_insync_replicas:
            return NotEnoughReplicasAfterAppendError(
                f"{offsets} written, but the ISR {leader.isr} is smaller than "
                f"min_insync_replicas {rs.min_insync_replicas}")
        return info
