"""The replication requests a follower sends its leader, as Kafka's Fetch and
OffsetsForLeaderEpoch carry them between brokers (docs/format/replication.md). Transports
(pylog/replication/transport.py) move them within a process or over TCP.
"""

from __future__ import annotations

from dataclasses import dataclass

#: Kafka's error names, as the responses carry them (None: no error).
FENCED_LEADER_EPOCH = "FENCED_LEADER_EPOCH"
UNKNOWN_LEADER_EPOCH = "UNKNOWN_LEADER_EPOCH"
NOT_LEADER_OR_FOLLOWER = "NOT_LEADER_OR_FOLLOWER"
OFFSET_OUT_OF_RANGE = "OFFSET_OUT_OF_RANGE"
ERRORS = (None, FENCED_LEADER_EPOCH, UNKNOWN_LEADER_EPOCH, NOT_LEADER_OR_FOLLOWER, OFFSET_OUT_OF_RANGE)


@dataclass(frozen=True)
class FetchRequest:
    """A follower's fetch: ``fetch_offset`` is its log end (so the leader learns it),
    ``current_leader_epoch`` the epoch it follows (the leader fences older ones)."""

    replica_id: int
    current_leader_epoch: int
    fetch_offset: int
    max_bytes: int = 1 << 20
    max_wait_ms: int = 500


@dataclass
class FetchResponse:
    """The leader's answer: whole batches from ``fetch_offset`` (a ``FetchData`` in the
    leader's process, bytes once received), with its high watermark piggybacked."""

    error: str | None
    leader_epoch: int
    high_watermark: int = -1
    log_start_offset: int = -1
    log_end_offset: int = -1
    records: object = None

    def record_bytes(self) -> bytes:
        """The batches as bytes (b"" when none)."""
        if self.records is None:
            return b""
        return self.records if isinstance(self.records, (bytes, bytearray)) else self.records.raw()


@dataclass(frozen=True)
class EpochEndOffset:
    """The leader's OffsetsForLeaderEpoch answer: the largest epoch <= the one asked that
    it knows, and where that epoch ends in its log (-1, -1: unknown)."""

    error: str | None
    leader_epoch: int = -1
    end_offset: int = -1
