"""The fetch exchange over TCP, byte for byte (docs/format/replication.md): length-prefixed
frames, big-endian, Kafka's API keys and error codes. Only the framing lives here; the
server and the client are in pylog/replication/transport.py."""

from __future__ import annotations

import struct

from pylog.errors import ReplicaTransportError
from pylog.replication.protocol import (
    FENCED_LEADER_EPOCH, NOT_LEADER_OR_FOLLOWER, OFFSET_OUT_OF_RANGE, UNKNOWN_LEADER_EPOCH, EpochEndOffset,
    FetchRequest, FetchResponse,
)

FETCH = 1                      # Kafka's API key for Fetch
OFFSETS_FOR_LEADER_EPOCH = 23  # and for OffsetsForLeaderEpoch
#: Kafka's error codes for the errors the exchange carries.
ERROR_CODES = {None: 0, OFFSET_OUT_OF_RANGE: 1, NOT_LEADER_OR_FOLLOWER: 6, FENCED_LEADER_EPOCH: 74,
               UNKNOWN_LEADER_EPOCH: 75}
ERROR_NAMES = {code: name for name, code in ERROR_CODES.items()}

SIZE = struct.Struct(">i")                     # every frame: its length after this field
REQUEST_HEADER = struct.Struct(">hi")          # api key, correlation id
FETCH_REQUEST = struct.Struct(">iiqii")        # replica id, current leader epoch, fetch offset, max bytes, max wait ms
EPOCH_REQUEST = struct.Struct(">iii")          # replica id, current leader epoch, leader epoch asked
FETCH_RESPONSE = struct.Struct(">ihiqqqi")     # correlation id, error, leader epoch, HW, log start, log end, records size
EPOCH_RESPONSE = struct.Struct(">ihiq")        # correlation id, error, leader epoch, end offset
MAX_FRAME_BYTES = 1 << 30


def encode_fetch_request(correlation_id: int, req: FetchRequest) -> bytes:
    body = REQUEST_HEADER.pack(FETCH, correlation_id) + FETCH_REQUEST.pack(
        req.replica_id, req.current_leader_epoch, req.fetch_offset, req.max_bytes, req.max_wait_ms)
    return SIZE.pack(len(body)) + body


def encode_epoch_request(correlation_id: int, replica_id: int, current_leader_epoch: int, epoch: int) -> bytes:
    body = REQUEST_HEADER.pack(OFFSETS_FOR_LEADER_EPOCH, correlation_id) + EPOCH_REQUEST.pack(
        replica_id, current_leader_epoch, epoch)
    return SIZE.pack(len(body)) + body


def decode_request(frame: bytes):
    """``(api key, correlation id, FetchRequest or (replica id, current epoch, epoch))``."""
    if len(frame) < REQUEST_HEADER.size:
        raise ReplicaTransportError(f"request of {len(frame)} bytes is shorter than its header")
    api, correlation_id = REQUEST_HEADER.unpack_from(frame)
    body = frame[REQUEST_HEADER.size:]
    if api == FETCH and len(body) == FETCH_REQUEST.size:
        return api, correlation_id, FetchRequest(*FETCH_REQUEST.unpack(body))
    if api == OFFSETS_FOR_LEADER_EPOCH and len(body) == EPOCH_REQUEST.size:
        return api, correlation_id, EPOCH_REQUEST.unpack(body)
    raise ReplicaTransportError(f"unknown request: API key {api} with a {len(body)}-byte body")


def fetch_response_header(correlation_id: int, resp: FetchResponse, records_size: int) -> bytes:
    """The frame's bytes before the records (which follow by sendfile)."""
    head = FETCH_RESPONSE.pack(correlation_id, ERROR_CODES[resp.error], resp.leader_epoch, resp.high_watermark,
                               resp.log_start_offset, resp.log_end_offset, records_size)
    return SIZE.pack(len(head) + records_size) + head


def decode_fetch_response_header(head: bytes) -> tuple[int, FetchResponse, int]:
    cid, code, epoch, hw, start, end, size = FETCH_RESPONSE.unpack(head)
    return cid, FetchResponse(_error(code), epoch, hw, start, end), size


def encode_epoch_response(correlation_id: int, answer: EpochEndOffset) -> bytes:
    body = EPOCH_RESPONSE.pack(correlation_id, ERROR_CODES[answer.error], answer.leader_epoch, answer.end_offset)
    return SIZE.pack(len(body)) + body


def decode_epoch_response(body: bytes) -> tuple[int, EpochEndOffset]:
    if len(body) != EPOCH_RESPONSE.size:
        raise ReplicaTransportError(f"OffsetsForLeaderEpoch response of {len(body)} bytes, "
                                    f"expected {EPOCH_RESPONSE.size}")
    cid, code, epoch, end = EPOCH_RESPONSE.unpack(body)
    return cid, EpochEndOffset(_error(code), epoch, end)


def _error(code: int) -> str | None:
    try:
        return ERROR_NAMES[code]
    except KeyError:
        raise ReplicaTransportError(f"unknown error code {code} in a response") from None


def read_exactly(sock, n: int, what: str) -> bytearray:
    """``n`` bytes from ``sock``, received in place (no copy); :class:`ReplicaTransportError`
    saying how many came when the peer closes first."""
    buf = bytearray(n)
    view = memoryview(buf)
    got = 0
    while got < n:
        try:
            k = sock.recv_into(view[got:], n - got)
        except OSError as e:
            raise ReplicaTransportError(f"connection broken reading {what}: {e}") from None
        if k == 0:
            raise ReplicaTransportError(f"connection closed after {got} of {n} bytes of {what}")
        got += k
    return buf


def read_frame(sock, what: str) -> bytes:
    (size,) = SIZE.unpack(read_exactly(sock, SIZE.size, what))
    if not 0 <= size <= MAX_FRAME_BYTES:
        raise ReplicaTransportError(f"{what} claims {size} bytes")
    return read_exactly(sock, size, what)
