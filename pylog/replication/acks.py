"""``PendingAppend``: an append written at the leader and not yet acknowledged, what
``ReplicaSet.append_async`` returns. Several may be in flight at once, as a Kafka producer
keeps up to ``max.in.flight.requests.per.connection`` produce requests: the followers then
copy them together, in fewer fetches. Each is acknowledged under ``acks``' own rule; only
the waiting is deferred (docs/replication.md).
"""

from __future__ import annotations

import time
from typing import Callable

from pylog.errors import PylogError
from pylog.log import AppendInfo
from pylog.replication.client_requests import acknowledge, check_acks


class PendingAppend:
    """Records appended at ``leader`` in leader epoch ``epoch`` (``info``), acknowledged when
    ``acks`` is met, at most ``timeout_ms`` after the append (``wait_for_high_watermark``:
    see :func:`~pylog.replication.client_requests.acknowledge`)."""

    def __init__(self, leader, epoch: int, info: AppendInfo, acks, timeout_ms: int, *, name: str,
                 min_insync_replicas: int, wait_for_high_watermark: Callable | None = None):
        self.info = info
        self.acks = acks
        self._leader = leader
        self._epoch = epoch
        self._name = name
        self._min_insync_replicas = min_insync_replicas
        self._wait = wait_for_high_watermark
        self._deadline = time.monotonic() + timeout_ms / 1000
        self._outcome: AppendInfo | Exception | None = info if check_acks(acks) != -1 else None

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
            remaining_ms = max(0.0, (self._deadline - time.monotonic()) * 1000)
            try:
                self._outcome = acknowledge(self._leader, self.info, self._epoch, acks=self.acks,
                                            timeout_ms=remaining_ms, min_insync_replicas=self._min_insync_replicas,
                                            name=self._name, wait_for_high_watermark=self._wait)
            except PylogError as e:
                self._outcome = e
        if isinstance(self._outcome, Exception):
            raise self._outcome
        return self._outcome
