"""Fetch on the wire: a fetch that finds nothing waits for an append (not for its whole
``max_wait_ms``), ``max_bytes`` still gives the first partition one whole batch, and the
records bytes are the segment file's bytes."""

from __future__ import annotations

import socket
import time

from kafka import KafkaProducer
from kafka.protocol.consumer import FetchRequest, FetchResponse

from pylog.manager import LogManager
from tests.serve.conftest import read_frame, request_frame

WAIT_MS = 60_000


def _fetch_frame(topic: str, offset: int, *, max_wait_ms: int, max_bytes: int = 1 << 20) -> bytes:
    partition = FetchRequest.FetchTopic.FetchPartition(partition=0, fetch_offset=offset, partition_max_bytes=1 << 20)
    request = FetchRequest(replica_id=-1, max_wait_ms=max_wait_ms, min_bytes=1, max_bytes=max_bytes,
                           isolation_level=0, topics=[FetchRequest.FetchTopic(topic=topic, partitions=[partition])])
    return request_frame(request, 12)


def _partition(answer: bytes):
    return FetchResponse.decode(answer, version=12, header=True).responses[0].partitions[0]


def test_a_fetch_at_the_end_is_answered_when_a_record_arrives_not_at_max_wait(pylog_server):
    with LogManager(pylog_server.root) as manager:
        manager.create_topic("wait")
    with socket.create_connection(pylog_server.address, timeout=WAIT_MS / 1000 * 2) as fetching:
        fetching.sendall(_fetch_frame("wait", 0, max_wait_ms=WAIT_MS))
        started = time.monotonic()
        producer = KafkaProducer(bootstrap_servers=pylog_server.bootstrap_servers)
        producer.send("wait", b"arrived").get(timeout=60)
        producer.close()
        answer = read_frame(fetching)
        waited_s = time.monotonic() - started
    partition = _partition(answer)
    assert partition.error_code == 0 and partition.high_watermark == 1
    assert b"arrived" in partition.records
    assert waited_s < WAIT_MS / 1000 / 2  # woken by the append, not by the deadline


def test_the_records_field_is_the_segment_file_s_bytes_and_max_bytes_keeps_one_batch(pylog_server):
    with LogManager(pylog_server.root) as manager:
        log = manager.create_topic("bytes").log(0)
        for i in range(5):
            log.append([b"x" * 1000, b"y" * 1000])
        with open(log.segments[0].log_path, "rb") as f:
            file_bytes = f.read()
    with socket.create_connection(pylog_server.address, timeout=60) as sock:
        sock.sendall(_fetch_frame("bytes", 0, max_wait_ms=0))
        whole = _partition(read_frame(sock))
        sock.sendall(_fetch_frame("bytes", 0, max_wait_ms=0, max_bytes=10))
        one = _partition(read_frame(sock))
    assert whole.records == file_bytes
    first_batch = len(file_bytes) // 5
    assert one.records == file_bytes[:first_batch]
