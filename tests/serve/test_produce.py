"""Produce on the wire: the partition's producer state checks idempotent sequences (a retry
answers its first offset and writes nothing, a gap is OUT_OF_ORDER_SEQUENCE_NUMBER), a
corrupt batch and an unknown topic are refused with Kafka's codes and change no file, as is
a produce of a transactional id the coordinator does not know (tests/serve/test_transactions.py
has the rest); and connections past the limit are closed."""

from __future__ import annotations

import socket

import pytest
from kafka.protocol.metadata import ApiVersionsRequest
from kafka.protocol.producer import ProduceRequest, ProduceResponse

from pylog.errors import InvalidConfigError
from pylog.manager import LogManager
from pylog.record import encode_batch
from pylog.serve import Server
from tests.serve.conftest import file_digests, read_frame, read_log, request_frame

DUPLICATE_OR_OK, CORRUPT_MESSAGE, UNKNOWN_TOPIC_OR_PARTITION = 0, 2, 3
OUT_OF_ORDER_SEQUENCE_NUMBER, INVALID_PRODUCER_ID_MAPPING = 45, 49


@pytest.fixture
def server(tmp_path):
    root = str(tmp_path / "data")
    with LogManager(root) as manager:
        manager.create_topic("t")
    with Server(root, listen=("127.0.0.1", 0), auto_create_topics_enable=False, max_connections=3) as server:
        yield server


def _produce(server, topic: str, raw: bytes, transactional_id=None):
    """One partition's answer to a Produce v9 of ``raw`` to partition 0 of ``topic``."""
    data = ProduceRequest.TopicProduceData(name=topic, partition_data=[
        ProduceRequest.TopicProduceData.PartitionProduceData(index=0, records=raw)])
    frame = request_frame(ProduceRequest(transactional_id=transactional_id, acks=-1, timeout_ms=1000,
                                         topic_data=[data]), 9)
    with socket.create_connection(server.address, timeout=60) as sock:
        sock.sendall(frame)
        answer = read_frame(sock)
    return ProduceResponse.decode(answer, version=9, header=True).responses[0].partition_responses[0]


def _idempotent(sequence: int, *values: bytes) -> bytes:
    return encode_batch(list(values), producer_id=5, producer_epoch=0, base_sequence=sequence)


def test_an_idempotent_retry_answers_its_first_offset_and_a_gap_is_refused(server):
    assert (_produce(server, "t", _idempotent(0, b"a", b"b")).base_offset,
            _produce(server, "t", _idempotent(2, b"c")).base_offset) == (0, 2)
    retry = _produce(server, "t", _idempotent(0, b"a", b"b"))
    assert (retry.error_code, retry.base_offset) == (DUPLICATE_OR_OK, 0)
    assert _produce(server, "t", _idempotent(7, b"gap")).error_code == OUT_OF_ORDER_SEQUENCE_NUMBER
    with read_log(server, "t", 0) as log:
        assert [r.value for r in log.records()] == [b"a", b"b", b"c"]


def test_a_corrupt_batch_an_unknown_topic_and_an_unknown_transaction_are_refused_and_write_nothing(server):
    _produce(server, "t", encode_batch([b"first"]))  # "t" open for writing from here
    before = file_digests(server.root)
    corrupt = bytearray(encode_batch([b"x" * 50]))
    corrupt[-10] ^= 0xFF
    assert _produce(server, "t", bytes(corrupt)).error_code == CORRUPT_MESSAGE
    assert _produce(server, "absent", encode_batch([b"x"])).error_code == UNKNOWN_TOPIC_OR_PARTITION
    assert _produce(server, "t", encode_batch([b"x"]), transactional_id="tx").error_code == \
        INVALID_PRODUCER_ID_MAPPING
    assert file_digests(server.root) == before


def test_connections_past_max_connections_are_closed_as_they_arrive(server):
    frame = request_frame(ApiVersionsRequest(), 0)
    held = [socket.create_connection(server.address, timeout=60) for _ in range(3)]
    try:
        for sock in held:  # answered: each is accepted and counted
            sock.sendall(frame)
            assert read_frame(sock) is not None
        with socket.create_connection(server.address, timeout=60) as extra:
            extra.sendall(frame)
            assert read_frame(extra) is None
    finally:
        for sock in held:
            sock.close()


def test_a_setting_the_server_does_not_have_is_a_config_error(tmp_path):
    with pytest.raises(InvalidConfigError, match="unknown server settings auto_create_topics:"):
        Server(str(tmp_path), auto_create_topics=False)
    with pytest.raises(InvalidConfigError, match="max_connections 0 is outside"):
        Server(str(tmp_path), max_connections=0)
