"""The replication requests a follower sends its leader, as Kafka's Fetch and
OffsetsForLeaderEpoch carry them between brokers, and those a replica process takes from its
controller (LeaderAndIsr) and its clients (Produce, a consumer's Fetch)
(docs/format/replication.md). Transports (pylog/replication/transport.py) move them within
a process or over TCP.
"""

from __future__ import annotations

from dataclasses import dataclass

#: Kafka's error names, as the responses carry them (None: no error).
FENCED_LEADER_EPOCH = "FENCED_LEADER_EPOCH"
UNKNOWN_LEADER_EPOCH = "UNKNOWN_LEADER_EPOCH"
NOT_LEADER_OR_FOLLOWER = "NOT_LEADER_OR_FOLLOWER"
OFFSET_OUT_OF_RANGE = "OFFSET_OUT_OF_RANGE"
REQUEST_TIMED_OUT = "REQUEST_TIMED_OUT"
NOT_ENOUGH_REPLICAS = "NOT_ENOUGH_REPLICAS"
NOT_ENOUGH_REPLICAS_AFTER_APPEND = "NOT_ENOUGH_REPLICAS_AFTER_APPEND"
INVALID_REQUEST = "INVALID_REQUEST"
ERRORS = (None, FENCED_LEADER_EPOCH, UNKNOWN_LEADER_EPOCH, NOT_LEADER_OR_FOLLOWER, OFFSET_OUT_OF_RANGE,
          REQUEST_TIMED_OUT, NOT_ENOUGH_REPLICAS, NOT_ENOUGH_REPLICAS_AFTER_APPEND, INVALID_REQUEST)
#: The replica ids of a Fetch from a client, not a follower: Kafka's consumer (reads up to
#: the high watermark, from the leader) and its debugging consumer (up to the log end, from
#: any replica).
CONSUMER_ID = -1
DEBUGGING_CONSUMER_ID = -2


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


@dataclass(frozen=True)
class ProduceRequest:
    """Records for the leader: whole Kafka batches (offsets assigned by the leader),
    ``acks`` 0, 1 or -1 (all), ``timeout_ms`` for -1; ``leader_epoch`` the epoch the client
    believes the leader leads (-1: any), so that a stale leader refuses it."""

    records: bytes
    acks: int = 1
    timeout_ms: int = 30_000
    leader_epoch: int = -1


@dataclass(frozen=True)
class ProduceResponse:
    """The leader's answer once ``acks`` is met, or why not; ``message`` says more."""

    error: str | None
    leader_epoch: int = -1
    base_offset: int = -1
    last_offset: int = -1
    message: str = ""


@dataclass(frozen=True)
class LeaderAndIsrRequest:
    """The controller's word to a replica: ``leader`` leads ``leader_epoch`` with ``isr``,
    recorded at ``partition_epoch``; ``leader_address`` is where to fetch from (host, port)."""

    controller_epoch: int
    leader: int
    leader_epoch: int
    partition_epoch: int
    isr: tuple[int, ...]
    replicas: tuple[int, ...]
    leader_address: tuple[str, int] = ("", -1)
