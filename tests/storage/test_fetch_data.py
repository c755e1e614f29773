"""``FetchData`` (pylog/segment/fetch.py): the byte range ``Log.read`` answers with;
``transfer_to`` sends exactly the file's bytes of that range through a real socket."""

from __future__ import annotations

import os
import socket
import threading

import pytest

from pylog import Log
from pylog.record.record import Record

T0 = 1_700_000_000_000


@pytest.fixture
def log(tmp_path):
    with Log.open(tmp_path / "fetch-0", segment_bytes=256 * 1024, file_delete_delay_ms=0) as log:
        for i in range(40):
            log.append([Record(b"value-%d-" % (3 * i + j) * 300, key=b"k%d" % j, timestamp=T0 + i) for j in range(3)])
        yield log


def file_bytes(fetch) -> bytes:
    with open(fetch.path, "rb") as f:
        f.seek(fetch.position)
        return f.read(fetch.size_bytes)


def receive_all(sock: socket.socket, size: int, out: list) -> None:
    data = bytearray()
    while len(data) < size:
        chunk = sock.recv(65536)
        if not chunk:
            break
        data += chunk
    out.append(bytes(data))


def send_through_socketpair(fetch, *, blocking: bool = True) -> tuple[int, bytes]:
    left, right = socket.socketpair()
    with left, right:
        left.setblocking(blocking)
        if not blocking:  # a small buffer, so the sender meets a full socket
            left.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 4096)
        received: list[bytes] = []
        reader = threading.Thread(target=receive_all, args=(right, fetch.size_bytes, received))
        reader.start()
        sent = fetch.transfer_to(left)
        reader.join(timeout=60)
        assert not reader.is_alive()
    return sent, received[0]


def test_fetch_is_whole_batches_of_the_segment_file(log):
    fetch = log.read(10, max_bytes=2000)
    batches = fetch.batches()
    assert batches[0].base_offset <= 10 <= batches[0].last_offset
    assert fetch.size_bytes <= 2000 or len(batches) == 1
    assert fetch.raw() == file_bytes(fetch)
    assert fetch.next_offset == batches[-1].last_offset + 1


def test_records_leave_out_those_below_the_offset_asked_for(log):
    fetch = log.read(10, max_bytes=2000)
    records = fetch.records()
    assert records[0].offset == 10
    assert [r.offset for r in records] == list(range(10, fetch.next_offset))


def test_a_fetch_smaller_than_one_batch_still_returns_one(log):
    fetch = log.read(0, max_bytes=1)
    assert len(fetch.batches()) == 1 and fetch.next_offset == 3


def test_transfer_to_sends_the_files_bytes_for_the_range(log):
    fetch = log.read(7, max_bytes=5000)
    sent, received = send_through_socketpair(fetch)
    assert sent == fetch.size_bytes
    assert received == file_bytes(fetch)


def test_transfer_to_a_non_blocking_socket_sends_everything(log):
    fetch = log.read(0, max_bytes=1 << 20)
    assert fetch.size_bytes > 100_000  # far more than the 4 KiB socket buffer holds at once
    sent, received = send_through_socketpair(fetch, blocking=False)
    assert sent == fetch.size_bytes
    assert received == file_bytes(fetch)


def test_transfer_to_a_file_descriptor(log, tmp_path):
    fetch = log.read(5, max_bytes=3000)
    fd = os.open(tmp_path / "out", os.O_WRONLY | os.O_CREAT)
    try:
        assert fetch.transfer_to(fd) == fetch.size_bytes
    finally:
        os.close(fd)
    assert (tmp_path / "out").read_bytes() == file_bytes(fetch)


def test_an_empty_fetch_at_the_log_end_sends_nothing(log):
    fetch = log.read(log.log_end_offset)
    assert fetch.size_bytes == 0 and fetch.records() == [] and fetch.next_offset == log.log_end_offset
    sent, received = send_through_socketpair(fetch)
    assert sent == 0 and received == b""


def test_a_fetch_still_reads_its_segment_after_it_is_deleted(log):
    assert len(log.segments) > 1
    fetch = log.read(0, max_bytes=4000)
    expected = file_bytes(fetch)
    path = fetch.path
    log.delete_records(log.segments[1].base_offset)
    assert not os.path.exists(path)
    assert fetch.raw() == expected
    sent, received = send_through_socketpair(fetch)
    assert received == expected and [r.offset for r in fetch.records()][0] == 0
