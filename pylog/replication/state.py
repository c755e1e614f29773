"""``PartitionState``: what the controller records for a partition, in the JSON Kafka's
controller writes to its ``/brokers/topics/<topic>/partitions/<n>/state`` node:
``{"controller_epoch":1,"leader":1,"version":1,"leader_epoch":0,"isr":[1,2,3]}``,
plus the partition epoch (Kafka's ``partitionEpoch``, the node's version in ZooKeeper)
that every change bumps (docs/format/replication.md). pylog keeps it in a file, replaced
atomically; changes from several processes (the controller, a leader's AlterPartition) are
compare-and-sets under a lock on ``<file>.lock`` (``update_state``).
"""

from __future__ import annotations

import json
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from typing import Callable

from pylog.errors import CorruptCheckpointError
from pylog.io import DEFAULT_IO, FileIO
from pylog.locks import DirMutex

#: ``leader`` when no replica leads (every ISR replica is down).
NO_LEADER = -1
STATE_VERSION = 1


@dataclass(frozen=True)
class PartitionState:
    """Leader, leader epoch and ISR of a partition, and the controller epoch that set them."""

    leader: int
    leader_epoch: int
    isr: tuple[int, ...]
    controller_epoch: int = 1
    version: int = STATE_VERSION
    replicas: tuple[int, ...] = field(default=(), compare=False)
    partition_epoch: int = field(default=0, compare=False)

    def no_leader(self, name: str) -> str:
        """Why partition ``name`` has no leader to serve a request, and what brings one back."""
        if self.leader != NO_LEADER:
            return f"partition {name} has no leader: replica {self.leader} is taking leadership of epoch " \
                   f"{self.leader_epoch}; retry"
        isr = ", ".join(map(str, self.isr)) or "none"
        return (f"partition {name} has no leader: its in-sync replicas ({isr}) are offline (leader epoch "
                f"{self.leader_epoch}); restart one of them, or, if unclean_leader_election_enable allows "
                f"losing records, elect another live replica with elect_leader(clean=False)")

    def to_json(self) -> bytes:
        """The controller's JSON, keys in Kafka's order, then the partition epoch."""
        return json.dumps({"controller_epoch": self.controller_epoch, "leader": self.leader,
                           "version": self.version, "leader_epoch": self.leader_epoch,
                           "isr": list(self.isr), "partition_epoch": self.partition_epoch},
                          separators=(",", ":")).encode()

    @classmethod
    def from_json(cls, data: bytes, *, path: str = "") -> "PartitionState":
        """Parse the controller's JSON; :class:`CorruptCheckpointError` naming ``path`` when a
        field is missing or of the wrong type."""
        try:
            raw = json.loads(data)
            isr = tuple(int(r) for r in raw["isr"])
            return cls(leader=int(raw["leader"]), leader_epoch=int(raw["leader_epoch"]), isr=isr,
                       controller_epoch=int(raw["controller_epoch"]), version=int(raw["version"]),
                       partition_epoch=int(raw.get("partition_epoch", 0)))
        except (ValueError, KeyError, TypeError) as e:
            raise CorruptCheckpointError(f"malformed partition state: {e}", path=path) from None

    def with_isr(self, isr) -> "PartitionState":
        """The same leader and leader epoch with ``isr``, in the next partition epoch."""
        return replace(self, isr=tuple(sorted(isr)), partition_epoch=self.partition_epoch + 1)


def read_state(path: str) -> PartitionState | None:
    """The state at ``path``, None when there is none yet."""
    try:
        with open(path, "rb") as f:
            return PartitionState.from_json(f.read(), path=path)
    except FileNotFoundError:
        return None


def write_state(path: str, state: PartitionState, *, io: FileIO = DEFAULT_IO) -> None:
    """Replace the state at ``path`` durably (tmp, fsync, rename, fsync dir)."""
    io.write_file(path, state.to_json())


@contextmanager
def state_lock(path: str):
    """Hold the exclusive ``flock`` of ``<path>.lock`` that every change of the state at
    ``path`` takes (blocks while another process holds it; not reentrant)."""
    with DirMutex(path + ".lock", create=True, what="the partition state's lock"):
        yield


def update_state(path: str, change: Callable[[PartitionState | None], PartitionState | None], *,
                 io: FileIO = DEFAULT_IO) -> PartitionState | None:
    """Read the state at ``path``, give it to ``change`` and write what it returns (nothing
    when it returns None), all under ``state_lock``: a compare-and-set between the
    processes that share the file. Returns what was written. Cost: one read, and one
    durable write when changed."""
    with state_lock(path):
        new = change(read_state(path))
        if new is not None:
            write_state(path, new, io=io)
        return new


def alter_partition(path: str, leader: int, leader_epoch: int, partition_epoch: int,
                    isr: tuple[int, ...]) -> tuple[bool, PartitionState | None]:
    """Kafka's AlterPartition: record ``isr`` only if the state still names ``leader``
    leading ``leader_epoch`` at ``partition_epoch`` (a stale leader, or one that missed a
    change, is refused) and ``isr`` holds the leader. Returns (accepted, the state now)."""
    seen: list[PartitionState | None] = [None]

    def change(state):
        seen[0] = state
        if state is None or (state.leader, state.leader_epoch, state.partition_epoch) != \
                (leader, leader_epoch, partition_epoch) or leader not in isr:
            return None
        return state.with_isr(isr)
    new = update_state(path, change)
    return (True, new) if new is not None else (False, seen[0])
