"""``pylog serve`` under many connections: 200 idle ones and 20 busy fetchers at once are
served within the server's memory bound (records go out with ``sendfile``, never through the
server's memory), and connections past ``max_connections`` are closed as they arrive while
those within it keep being answered."""

from __future__ import annotations

import socket
import threading

import pytest
from kafka.protocol.consumer import FetchRequest
from kafka.protocol.metadata import ApiVersionsRequest

from pylog.manager import LogManager
from tests.serve.conftest import read_frame, request_frame
from tests.serve.test_serve_command import _start, _stop

IDLE, BUSY, FETCHES_EACH = 200, 20, 10
FETCH_BYTES = 4 << 20
#: what an idle connection may cost the server (its socket, task and buffers: a few KiB)
IDLE_CONNECTION_BYTES = 64 << 10
#: what the server may grow by at its peak, all connections together: a request frame and
#: an answer without its records each, and asyncio's tasks; far below what buffering each
#: busy connection's 4 MiB of records would take (80 MiB)
PEAK_GROWTH_BYTES = 40 << 20


def _memory_kib(pid: int, field: str) -> int:
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    raise AssertionError(f"no {field} in /proc/{pid}/status")


@pytest.fixture
def served(tmp_path):
    """A child ``pylog serve`` (its memory measured apart from the test's) over 8 MiB of records."""
    root = tmp_path / "data"
    with LogManager(str(root)) as manager:
        log = manager.create_topic("big", 1).log(0)
        for _ in range(8):
            log.append([b"r" * 1000] * 1000)
    proc, address = _start(root, "--max-connections", str(IDLE + BUSY + 1))
    host, port = address.rsplit(":", 1)
    yield proc, (host, int(port))
    assert _stop(proc) == 0


def _answered(sock, frame: bytes) -> bytes | None:
    sock.sendall(frame)
    return read_frame(sock)


def _fetch_frame(offset: int) -> bytes:
    topic = FetchRequest.FetchTopic(topic="big", partitions=[FetchRequest.FetchTopic.FetchPartition(
        partition=0, fetch_offset=offset, partition_max_bytes=FETCH_BYTES)])
    return request_frame(FetchRequest(max_wait_ms=0, min_bytes=1, max_bytes=FETCH_BYTES, topics=[topic]), 12)


def test_200_idle_and_20_busy_connections_are_served_within_the_memory_bound(served):
    proc, address = served
    api_versions = request_frame(ApiVersionsRequest(client_software_name="t", client_software_version="1"), 3)
    with socket.create_connection(address, timeout=60) as first:  # the code paths loaded
        assert _answered(first, api_versions) is not None
    alone_kib = _memory_kib(proc.pid, "VmRSS")
    idle = [socket.create_connection(address, timeout=60) for _ in range(IDLE)]
    try:
        for sock in idle:  # each accepted and answered once, then idle
            assert _answered(sock, api_versions) is not None
        before_kib = _memory_kib(proc.pid, "VmRSS")
        assert (before_kib - alone_kib) * 1024 < IDLE * IDLE_CONNECTION_BYTES, (
            f"{IDLE} idle connections cost {(before_kib - alone_kib) >> 10} MiB")
        answers, failures = [], []

        def fetch_all():
            try:
                with socket.create_connection(address, timeout=120) as sock:
                    for i in range(FETCHES_EACH):
                        answer = _answered(sock, _fetch_frame((i % 2) * 4000))
                        answers.append(len(answer) if answer is not None else 0)
            except OSError as e:
                failures.append(e)
        busy = [threading.Thread(target=fetch_all) for _ in range(BUSY)]
        for t in busy:
            t.start()
        for t in busy:
            t.join(300)
        peak_kib = _memory_kib(proc.pid, "VmHWM")
        assert not failures and len(answers) == BUSY * FETCHES_EACH
        assert min(answers) > FETCH_BYTES * 0.9  # each answer carried its 4 MiB of records
        assert (peak_kib - before_kib) * 1024 < PEAK_GROWTH_BYTES, (
            f"the server grew by {(peak_kib - before_kib) >> 10} MiB at its peak")
        for sock in idle[::20]:  # the idle ones are still served after
            assert _answered(sock, api_versions) is not None
    finally:
        for sock in idle:
            sock.close()


def test_connections_past_max_connections_are_closed_while_those_within_are_answered(served):
    proc, address = served
    api_versions = request_frame(ApiVersionsRequest(client_software_name="t", client_software_version="1"), 3)
    within = [socket.create_connection(address, timeout=60) for _ in range(IDLE + BUSY + 1)]
    try:
        for sock in within:  # each accepted and counted before the next arrives
            assert _answered(sock, api_versions) is not None
        with socket.create_connection(address, timeout=60) as past:
            assert _answered(past, api_versions) is None
        assert _answered(within[-1], api_versions) is not None
    finally:
        for sock in within:
            sock.close()
