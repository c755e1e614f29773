"""The replication exchange over TCP, byte for byte (docs/format/replication.md):
length-prefixed frames, big-endian, Kafka's API keys and error codes. Only the framing
lives here; the server and the clients are in pylog/replication/transport.py and
pylog/replication/broker_client.py."""

from __future__ import annotations

import struct

from pylog.errors import ReplicaTransportError
from pylog.replication.protocol import (
    FENCED_LEADER_EPOCH, INVALID_REQUEST, NOT_ENOUGH_REPLICAS, NOT_ENOUGH_REPLICAS_AFTER_APPEND,
    NOT_LEADER_OR_FOLLOWER, OFFSET_OUT_OF_RANGE, REQUEST_TIMED_OUT, UNKNOWN_LEADER_EPOCH, EpochEndOffset,
    FetchRequest, FetchResponse, LeaderAndIsrRequest, ProduceRequest, ProduceResponse,
)

PRODUCE = 0                    # Kafka's API key for Produce
FETCH = 1                      # for Fetch
LEADER_AND_ISR = 4             # for LeaderAndIsr
OFFSETS_FOR_LEADER_EPOCH = 23  # and for OffsetsForLeaderEpoch
#: Kafka's error codes for the errors the exchange carries.
ERROR_CODES = {None: 0, OFFSET_OUT_OF_RANGE: 1, NOT_LEADER_OR_FOLLOWER: 6, REQUEST_TIMED_OUT: 7,
               NOT_ENOUGH_REPLICAS: 19, NOT_ENOUGH_REPLICAS_AFTER_APPEND: 20, INVALID_REQUEST: 42,
               FENCED_LEADER_EPOCH: 74, UNKNOWN_LEADER_EPOCH: 75}
ERROR_NAMES = {code: name for name, code in ERROR_CODES.items()}

SIZE = struct.Struct(">i")                     # every frame: its length after this field
REQUEST_HEADER = struct.Struct(">hi")          # api key, correlation id
FETCH_REQUEST = struct.Struct(">iiqii")        # replica id, current leader epoch, fetch offset, max bytes, max wait ms
EPOCH_REQUEST = struct.Struct(">iii")          # replica id, current leader epoch, leader epoch asked
FETCH_RESPONSE = struct.Struct(">ihiqqqi")     # correlation id, error, leader epoch, HW, log start, log end, records size
EPOCH_RESPONSE = struct.Struct(">ihiq")        # correlation id, error, leader epoch, end offset
PRODUCE_REQUEST = struct.Struct(">ihii")       # leader epoch, acks, timeout ms, records size
PRODUCE_RESPONSE = struct.Struct(">ihiqq")     # correlation id, error, leader epoch, base offset, last offset
LEADER_AND_ISR_REQUEST = struct.Struct(">iiii")  # controller epoch, leader, leader epoch, partition epoch
LEADER_AND_ISR_RESPONSE = struct.Struct(">ih")   # correlation id, error
INT16 = struct.Struct(">h")
INT32 = struct.Struct(">i")
MAX_FRAME_BYTES = 1 << 30


def encode_fetch_request(correlation_id: int, req: FetchRequest) -> bytes:
    body = REQUEST_HEADER.pack(FETCH, correlation_id) + FETCH_REQUEST.pack(
        req.replica_id, req.current_leader_epoch, req.fetch_offset, req.max_bytes, req.max_wait_ms)
    return SIZE.pack(len(body)) + body


def encode_epoch_request(correlation_id: int, replica_id: int, current_leader_epoch: int, epoch: int) -> bytes:
    body = REQUEST_HEADER.pack(OFFSETS_FOR_LEADER_EPOCH, correlation_id) + EPOCH_REQUEST.pack(
        replica_id, current_leader_epoch, epoch)
    return SIZE.pack(len(body)) + body


def encode_produce_request(correlation_id: int, req: ProduceRequest) -> bytes:
    body = REQUEST_HEADER.pack(PRODUCE, correlation_id) + PRODUCE_REQUEST.pack(
        req.leader_epoch, req.acks, req.timeout_ms, len(req.records)) + bytes(req.records)
    return SIZE.pack(len(body)) + body


def encode_leader_and_isr_request(correlation_id: int, req: LeaderAndIsrRequest) -> bytes:
    host, port = req.leader_address
    body = (REQUEST_HEADER.pack(LEADER_AND_ISR, correlation_id)
            + LEADER_AND_ISR_REQUEST.pack(req.controller_epoch, req.leader, req.leader_epoch, req.partition_epoch)
            + _int32_array(req.isr) + _int32_array(req.replicas) + _string(host) + INT32.pack(port))
    return SIZE.pack(len(body)) + body


def decode_request(frame: bytes):
    """``(api key, correlation id, request)``: a FetchRequest, ``(replica id, current epoch,
    epoch)`` for OffsetsForLeaderEpoch, a ProduceRequest or a LeaderAndIsrRequest."""
    if len(frame) < REQUEST_HEADER.size:
        raise ReplicaTransportError(f"request of {len(frame)} bytes is shorter than its header")
    api, correlation_id = REQUEST_HEADER.unpack_from(frame)
    body = frame[REQUEST_HEADER.size:]
    if api == FETCH and len(body) == FETCH_REQUEST.size:
        return api, correlation_id, FetchRequest(*FETCH_REQUEST.unpack(body))
    if api == OFFSETS_FOR_LEADER_EPOCH and len(body) == EPOCH_REQUEST.size:
        return api, correlation_id, EPOCH_REQUEST.unpack(body)
    if api == PRODUCE and len(body) >= PRODUCE_REQUEST.size:
        epoch, acks, timeout_ms, size = PRODUCE_REQUEST.unpack_from(body)
        if size == len(body) - PRODUCE_REQUEST.size:
            return api, correlation_id, ProduceRequest(bytes(body[PRODUCE_REQUEST.size:]), acks, timeout_ms, epoch)
    if api == LEADER_AND_ISR and len(body) >= LEADER_AND_ISR_REQUEST.size:
        return api, correlation_id, _decode_leader_and_isr(body)
    raise ReplicaTransportError(f"unknown request: API key {api} with a {len(body)}-byte body")


def _decode_leader_and_isr(body) -> LeaderAndIsrRequest:
    fields = LEADER_AND_ISR_REQUEST.unpack_from(body)
    pos = LEADER_AND_ISR_REQUEST.size
    try:
        isr, pos = _read_int32_array(body, pos)
        replicas, pos = _read_int32_array(body, pos)
        host, pos = _read_string(body, pos)
        (port,) = INT32.unpack_from(body, pos)
    except (struct.error, UnicodeDecodeError) as e:
        raise ReplicaTransportError(f"malformed LeaderAndIsr request of {len(body)} bytes: {e}") from None
    if pos + INT32.size != len(body):
        raise ReplicaTransportError(f"LeaderAndIsr request of {len(body)} bytes has "
                                    f"{len(body) - pos - INT32.size} bytes after its fields")
    return LeaderAndIsrRequest(*fields, isr, replicas, (host, port))


def encode_produce_response(correlation_id: int, resp: ProduceResponse) -> bytes:
    body = PRODUCE_RESPONSE.pack(correlation_id, ERROR_CODES[resp.error], resp.leader_epoch, resp.base_offset,
                                 resp.last_offset) + _string(resp.message)
    return SIZE.pack(len(body)) + body


def decode_produce_response(body: bytes) -> tuple[int, ProduceResponse]:
    try:
        cid, code, epoch, base, last = PRODUCE_RESPONSE.unpack_from(body)
        message, end = _read_string(body, PRODUCE_RESPONSE.size)
    except (struct.error, UnicodeDecodeError) as e:
        raise ReplicaTransportError(f"malformed Produce response of {len(body)} bytes: {e}") from None
    if end != len(body):
        raise ReplicaTransportError(f"Produce response of {len(body)} bytes, its fields end at {end}")
    return cid, ProduceResponse(_error(code), epoch, base, last, message)


def encode_leader_and_isr_response(correlation_id: int, error: str | None) -> bytes:
    body = LEADER_AND_ISR_RESPONSE.pack(correlation_id, ERROR_CODES[error])
    return SIZE.pack(len(body)) + body


def decode_leader_and_isr_response(body: bytes) -> tuple[int, str | None]:
    if len(body) != LEADER_AND_ISR_RESPONSE.size:
        raise ReplicaTransportError(f"LeaderAndIsr response of {len(body)} bytes, "
                                    f"expected {LEADER_AND_ISR_RESPONSE.size}")
    cid, code = LEADER_AND_ISR_RESPONSE.unpack(body)
    return cid, _error(code)


def _int32_array(values) -> bytes:
    return INT32.pack(len(values)) + b"".join(INT32.pack(v) for v in values)


def _read_int32_array(body, pos: int) -> tuple[tuple[int, ...], int]:
    (n,) = INT32.unpack_from(body, pos)
    if not 0 <= n <= (len(body) - pos) // INT32.size:
        raise struct.error(f"array of {n} int32s at byte {pos}")
    return struct.unpack_from(f">{n}i", body, pos + INT32.size), pos + INT32.size * (n + 1)


def _string(text: str) -> bytes:
    data = text.encode()
    return INT16.pack(len(data)) + data


def _read_string(body, pos: int) -> tuple[str, int]:
    (n,) = INT16.unpack_from(body, pos)
    start = pos + INT16.size
    if not 0 <= n <= len(body) - start:
        raise struct.error(f"string of {n} bytes at byte {pos}")
    return bytes(body[start:start + n]).decode(), start + n


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


def read_exactly(sock, n: int, what: str, *, into: bytearray | None = None):
    """``n`` bytes from ``sock``, received in place: into a new ``bytearray``, or into the
    start of ``into`` (at least ``n`` bytes long), returned as a view of it.
    :class:`ReplicaTransportError` saying how many came when the peer closes first."""
    buf = bytearray(n) if into is None else into
    view = memoryview(buf)
    got = 0
    while got < n:
        try:
            k = sock.recv_into(view[got:n], n - got)
        except OSError as e:
            raise ReplicaTransportError(f"connection broken reading {what}: {e}") from None
        if k == 0:
            raise ReplicaTransportError(f"connection closed after {got} of {n} bytes of {what}")
        got += k
    return buf if into is None else view[:n]


def read_frame(sock, what: str) -> bytes:
    (size,) = SIZE.unpack(read_exactly(sock, SIZE.size, what))
    if not 0 <= size <= MAX_FRAME_BYTES:
        raise ReplicaTransportError(f"{what} claims {size} bytes")
    return read_exactly(sock, size, what)
