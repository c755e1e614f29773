"""Test helpers: a ReplicaSet driven one fetch round at a time, on a clock the test moves."""

from __future__ import annotations

from pylog.replication import ReplicaSet

LAG_MS = 10_000


class Clock:
    """Milliseconds that move only when the test says so."""

    def __init__(self, now_ms: int = 1_000_000):
        self.now_ms = now_ms

    def __call__(self) -> int:
        return self.now_ms

    def advance(self, ms: int) -> None:
        self.now_ms += ms


def driven_set(root, *, replicas=3, clock=None, **options) -> ReplicaSet:
    return ReplicaSet(root, "events-0", replicas=replicas, fetchers=False, clock=clock or Clock(),
                      replica_lag_time_max_ms=LAG_MS, **options)


def values(log) -> list[bytes]:
    """Every record value of a replica's log, to its end."""
    return [r.value for r in log.records()]


def settle(rs) -> None:
    """Fetch rounds until nothing moves."""
    for _ in range(100):
        if not rs.replicate():
            return
    raise AssertionError("replication did not settle in 100 rounds")
