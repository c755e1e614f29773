"""``PartitionState``: what the controller records for a partition, in the JSON Kafka's
controller writes to its ``/brokers/topics/<topic>/partitions/<n>/state`` node:
``{"controller_epoch":1,"leader":1,"version":1,"leader_epoch":0,"isr":[1,2,3]}``
(docs/format/replication.md). pylog keeps it in a file, replaced atomically.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field

from pylog.errors import CorruptCheckpointError
from pylog.io import DEFAULT_IO, FileIO

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

    def to_json(self) -> bytes:
        """The controller's JSON, keys in Kafka's order."""
        return json.dumps({"controller_epoch": self.controller_epoch, "leader": self.leader,
                           "version": self.version, "leader_epoch": self.leader_epoch,
                           "isr": list(self.isr)}, separators=(",", ":")).encode()

    @classmethod
    def from_json(cls, data: bytes, *, path: str = "") -> "PartitionState":
        """Parse the controller's JSON; :class:`CorruptCheckpointError` naming ``path`` when a
        field is missing or of the wrong type."""
        try:
            raw = json.loads(data)
            isr = tuple(int(r) for r in raw["isr"])
            return cls(leader=int(raw["leader"]), leader_epoch=int(raw["leader_epoch"]), isr=isr,
                       controller_epoch=int(raw["controller_epoch"]), version=int(raw["version"]))
        except (ValueError, KeyError, TypeError) as e:
            raise CorruptCheckpointError(f"malformed partition state: {e}", path=path) from None

    def with_isr(self, isr) -> "PartitionState":
        return PartitionState(self.leader, self.leader_epoch, tuple(sorted(isr)), self.controller_epoch,
                              self.version, self.replicas)


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
