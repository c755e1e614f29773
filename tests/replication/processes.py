"""Test helpers: what a replica process holds, read over TCP with Kafka's debugging
consumer (up to its log end, from any replica)."""

from __future__ import annotations

from dataclasses import replace

from pylog.errors import RecordFormatError, ReplicaTransportError
from pylog.record.batch import decode_batches
from pylog.replication.broker_client import BrokerClient
from pylog.replication.protocol import OFFSET_OUT_OF_RANGE, FetchResponse


def replica_log(address) -> tuple[FetchResponse, bytes]:
    """Every batch of the replica at ``address`` (from its log start to its log end) and
    its last answer (log start, log end, leader epoch), with the lowest high watermark
    answered. The batches come in several requests, while the replica may cut its log and
    fetch again: only those below that high watermark (committed, so never cut) are one
    consistent view."""
    client = BrokerClient(address)
    try:
        for _ in range(100):
            try:
                return _read_to_end(client)
            except (_CutMeanwhile, RecordFormatError, ReplicaTransportError):
                continue  # it cut its log while sending it (bytes of both sides, or fewer): read again
        raise AssertionError(f"the replica at {address} never answered a whole log in 100 reads")
    finally:
        client.close()


class _CutMeanwhile(Exception):
    pass


def _read_to_end(client) -> tuple[FetchResponse, bytes]:
    chunks, offset, hw = [], 0, None
    while True:
        resp, raw = client.consume(offset, debugging=True)
        if resp.error == OFFSET_OUT_OF_RANGE and not chunks and offset < resp.log_start_offset:
            offset = resp.log_start_offset
            continue
        if resp.error == OFFSET_OUT_OF_RANGE:  # it cut its log meanwhile
            raise _CutMeanwhile()
        assert resp.error is None, resp.error
        hw = resp.high_watermark if hw is None else min(hw, resp.high_watermark)
        if not raw:
            return replace(resp, high_watermark=hw), b"".join(chunks)
        batches = list(decode_batches(raw))
        if not all(b.is_valid() for b in batches):
            raise _CutMeanwhile()
        chunks.append(bytes(raw))
        offset = batches[-1].last_offset + 1


def batches(raw: bytes, below: int | None = None) -> list[tuple[int, bytes]]:
    """(base offset, bytes) of the batches, those wholly below ``below``."""
    return [(b.base_offset, bytes(raw[b.position:b.position + b.size])) for b in decode_batches(raw)
            if below is None or b.last_offset < below]


def values(raw: bytes) -> list[bytes]:
    return [r.value for b in decode_batches(raw) for r in b]


def replica_values(rs, replica_id: int) -> list[bytes]:
    """Every record value on a replica, to its log end."""
    return values(replica_log(rs.address(replica_id))[1])
