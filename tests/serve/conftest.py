"""The server under test: pylog.testing's fixture (the one users import), plus helpers to
read what a log dir holds and to run ``pylog verify`` on it."""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
import time
from contextlib import contextmanager

import pytest

pytest.importorskip("kafka.protocol.api_message", reason="pylog serve needs kafka-python 3")

from pylog.log import Log  # noqa: E402
from pylog.logdir.writers import BELL_FILE, WriterPool  # noqa: E402
from pylog.partition_dir import partition_dir_name  # noqa: E402
from pylog.testing import pylog_server  # noqa: E402,F401  (the fixture, as users get it)

ROOT_DIR = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def pylog_cli(*args, **kwargs) -> subprocess.CompletedProcess:
    """``python -m pylog ARGS`` in a child process, this tree first on its path."""
    env = dict(os.environ, PYTHONPATH=ROOT_DIR + os.pathsep + os.environ.get("PYTHONPATH", ""))
    return subprocess.run([sys.executable, "-m", "pylog", *args], env=env, capture_output=True, timeout=120,
                          **kwargs)


def read_log(server, topic: str, partition: int) -> Log:
    """The partition of the server's log dir, read only (``with read_log(...) as log:``):
    what the server wrote, read alongside it."""
    return Log.open(os.path.join(server.root, partition_dir_name(topic, partition)), read_only=True)


@contextmanager
def held_log(server, topic: str, partition: int):
    """``with held_log(server, t, p) as log:`` the partition's writable log as a server of
    this process holds it (the log dir's writer pool, opened if it was not)."""
    pool = WriterPool.for_root(server.root)
    try:
        with pool.writer(topic, partition) as log:
            yield log
    finally:
        pool.release()


def librdkafka_consume(server, topic: str, count: int, partitions=(0,), **settings) -> list:
    """Up to ``count`` messages a confluent-kafka consumer assigned ``partitions`` of ``topic``
    (from offset 0) reads within 60 s, as ``(offset, key, value, headers)``; ``settings``
    add to or replace its configuration."""
    import confluent_kafka
    consumer = confluent_kafka.Consumer({"bootstrap.servers": server.bootstrap_servers, "group.id": "reader",
                                         "enable.auto.commit": False, **settings})
    consumer.assign([confluent_kafka.TopicPartition(topic, p, 0) for p in partitions])
    got, deadline = [], time.monotonic() + 60
    while len(got) < count and time.monotonic() < deadline:
        message = consumer.poll(0.5)
        if message is None:
            continue
        assert message.error() is None, message.error()
        got.append((message.offset(), message.key(), message.value(), message.headers()))
    consumer.close()
    return got


def file_digests(root) -> dict[str, str]:
    """Every file under ``root`` (relative path -> sha256): what a test compares before and
    after to prove nothing was written. The writer pool's bell (made by its hand-off
    thread when it starts, whenever that is) holds no data and is left out."""
    out = {}
    for dirpath, _, names in os.walk(root):
        for name in names:
            if name == BELL_FILE:
                continue
            path = os.path.join(dirpath, name)
            with open(path, "rb") as f:
                out[os.path.relpath(path, root)] = hashlib.sha256(f.read()).hexdigest()
    return out


def request_frame(request, version: int, correlation_id: int = 1) -> bytes:
    """``request`` (a kafka-python request message) framed with its header, as a client sends it."""
    request.API_VERSION = version
    request.with_header(correlation_id=correlation_id, client_id="tests")
    return bytes(request.encode(header=True, framed=True))


def read_frame(sock) -> bytes | None:
    """One response frame (after its size) from ``sock``, or None if the server closed it
    (a reset too: the server closed it with bytes of ours unread)."""
    try:
        head = _read_exactly(sock, 4)
    except ConnectionResetError:
        return None
    if head is None:
        return None
    return _read_exactly(sock, int.from_bytes(head, "big"))


def _read_exactly(sock, size: int) -> bytes | None:
    data = b""
    while len(data) < size:
        chunk = sock.recv(size - len(data))
        if not chunk:
            return None
        data += chunk
    return data
