"""``pylog serve`` shares its partitions with pylog's own clients: a pylog ``Producer`` of
another process, or of the server's own, appends to a partition the server writes (the
log dir's writer hand-off), the server appends after it again, a consumer through the
server reads every record in order, and a fetch waiting at the log end wakes on an append
made by another process. DeleteTopics takes a partition another process writes by the
hand-off, and answers ``REQUEST_TIMED_OUT`` for one held outside it."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import pytest
from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer, TopicPartition
from kafka.errors import RequestTimedOutError
from kafka.protocol.consumer import FetchRequest, FetchResponse

from pylog import Producer
from pylog.errors import UnknownTopicError
from pylog.manager import LogManager
from pylog.serve.replica_manager import ReplicaManager
from tests.serve.conftest import ROOT_DIR, pylog_cli, read_frame, request_frame
from tests.waiting import wait_until

TOPIC = "shared"
#: a pylog producer's usual bound on waiting for a partition's writer (Kafka's default is 60 s)
MAX_BLOCK_MS = 10_000
WAIT_MS = 60_000

_CHILD = """
import sys
from pylog import Producer
root, topic, count = sys.argv[1], sys.argv[2], int(sys.argv[3])
producer = Producer(root, max_block_ms={max_block_ms})
futures = [producer.send(topic, b"pylog-%d" % i, partition=0) for i in range(count)]
producer.flush()
offsets = [f.get(timeout=60).offset for f in futures]
producer.close()
print(offsets[0], offsets[-1])
""".format(max_block_ms=MAX_BLOCK_MS)


def _pylog_producer_process(root: str, count: int) -> list[int]:
    """A pylog Producer in a child process appends ``count`` records to partition 0 of
    :data:`TOPIC`; the first and last offsets it was given."""
    env = dict(os.environ, PYTHONPATH=ROOT_DIR + os.pathsep + os.environ.get("PYTHONPATH", ""))
    done = subprocess.run([sys.executable, "-c", _CHILD, root, TOPIC, str(count)], env=env, capture_output=True,
                          timeout=120)
    assert done.returncode == 0, done.stderr.decode()[-2000:]
    return [int(o) for o in done.stdout.split()]


def _kafka_produce(server, prefix: bytes, count: int) -> None:
    producer = KafkaProducer(bootstrap_servers=server.bootstrap_servers, acks=1)
    for i in range(count):
        producer.send(TOPIC, b"%s-%d" % (prefix, i), partition=0)
    producer.flush(timeout=60)
    producer.close()


def _consume_all(server, count: int) -> list:
    consumer = KafkaConsumer(bootstrap_servers=server.bootstrap_servers, consumer_timeout_ms=10_000,
                             enable_auto_commit=False)
    consumer.assign([TopicPartition(TOPIC, 0)])
    consumer.seek_to_beginning()
    got = []
    for message in consumer:
        got.append((message.offset, message.value))
        if len(got) == count:
            break
    consumer.close()
    return got


def _create(server) -> None:
    with LogManager(server.root) as manager:
        manager.create_topic(TOPIC)


def _assert_clean(server) -> None:
    verify = pylog_cli("verify", server.root)
    assert verify.returncode == 0, verify.stdout.decode() + verify.stderr.decode()


def test_a_pylog_producer_of_another_process_appends_between_the_servers_appends(pylog_server):
    _create(pylog_server)
    _kafka_produce(pylog_server, b"kafka-a", 5)  # the server has written the partition
    started = time.monotonic()
    first, last = _pylog_producer_process(pylog_server.root, 7)
    assert time.monotonic() - started < MAX_BLOCK_MS / 1000  # handed over, not waited out
    assert (first, last) == (5, 11)
    _kafka_produce(pylog_server, b"kafka-b", 3)  # and the server takes it back
    expected = ([b"kafka-a-%d" % i for i in range(5)] + [b"pylog-%d" % i for i in range(7)]
                + [b"kafka-b-%d" % i for i in range(3)])
    assert _consume_all(pylog_server, len(expected)) == list(enumerate(expected))
    _assert_clean(pylog_server)


def test_a_pylog_producer_of_the_servers_own_process_appends_between_the_servers_appends(pylog_server):
    _create(pylog_server)
    _kafka_produce(pylog_server, b"kafka-a", 4)
    producer = Producer(pylog_server.root, max_block_ms=MAX_BLOCK_MS)
    futures = [producer.send(TOPIC, b"pylog-%d" % i, partition=0) for i in range(6)]
    producer.flush()
    assert [f.get(timeout=60).offset for f in futures] == list(range(4, 10))
    _kafka_produce(pylog_server, b"kafka-b", 2)  # while the producer is still open
    futures = [producer.send(TOPIC, b"pylog-late-%d" % i, partition=0) for i in range(2)]
    producer.close()
    assert [f.get(timeout=60).offset for f in futures] == [12, 13]
    expected = ([b"kafka-a-%d" % i for i in range(4)] + [b"pylog-%d" % i for i in range(6)]
                + [b"kafka-b-%d" % i for i in range(2)] + [b"pylog-late-%d" % i for i in range(2)])
    assert _consume_all(pylog_server, len(expected)) == list(enumerate(expected))
    _assert_clean(pylog_server)


def _fetch_frame(offset: int) -> bytes:
    partition = FetchRequest.FetchTopic.FetchPartition(partition=0, fetch_offset=offset, partition_max_bytes=1 << 20)
    request = FetchRequest(replica_id=-1, max_wait_ms=WAIT_MS, min_bytes=1, max_bytes=1 << 20, isolation_level=0,
                           topics=[FetchRequest.FetchTopic(topic=TOPIC, partitions=[partition])])
    return request_frame(request, 12)


def test_a_waiting_fetch_wakes_on_an_append_by_another_process(pylog_server):
    _create(pylog_server)
    _kafka_produce(pylog_server, b"kafka", 2)
    with socket.create_connection(pylog_server.address, timeout=WAIT_MS / 1000 * 2) as fetching:
        fetching.sendall(_fetch_frame(2))  # at the log end: it waits
        started = time.monotonic()
        assert _pylog_producer_process(pylog_server.root, 1) == [2, 2]
        answer = read_frame(fetching)
        waited_s = time.monotonic() - started
    partition = FetchResponse.decode(answer, version=12, header=True).responses[0].partitions[0]
    assert partition.error_code == 0 and partition.high_watermark == 3
    assert b"pylog-0" in partition.records
    assert waited_s < WAIT_MS / 1000 / 2  # woken by the append, not by the deadline


_HOLDING_CHILD = """
import sys
from pylog import Producer
producer = Producer(sys.argv[1])
producer.send(sys.argv[2], b"held", partition=0).get(timeout=60)
print("holding", flush=True)  # its writer pool keeps the log open until it is asked for it
sys.stdin.readline()
producer.close()
"""


def test_delete_topics_takes_a_partition_a_pylog_producer_of_another_process_holds(pylog_server):
    _create(pylog_server)
    env = dict(os.environ, PYTHONPATH=ROOT_DIR + os.pathsep + os.environ.get("PYTHONPATH", ""))
    with subprocess.Popen([sys.executable, "-c", _HOLDING_CHILD, pylog_server.root, TOPIC], env=env,
                          stdin=subprocess.PIPE, stdout=subprocess.PIPE) as child:
        assert child.stdout.readline() == b"holding\n"
        admin = KafkaAdminClient(bootstrap_servers=pylog_server.bootstrap_servers)
        try:
            admin.delete_topics([TOPIC], timeout_ms=30_000)  # raises on an error code
        finally:
            admin.close()
        child.communicate(b"\n", timeout=60)
    assert not os.path.exists(os.path.join(pylog_server.root, f"{TOPIC}-0"))


def test_delete_topics_of_a_partition_a_log_manager_holds_times_out_and_deletes_nothing(pylog_server):
    _create(pylog_server)
    with LogManager(pylog_server.root) as manager:
        manager.log(TOPIC, 0).append([b"kept"])  # held outside the hand-off
        admin = KafkaAdminClient(bootstrap_servers=pylog_server.bootstrap_servers)
        try:
            with pytest.raises(RequestTimedOutError):
                admin.delete_topics([TOPIC], timeout_ms=500)
        finally:
            admin.close()
    with LogManager(pylog_server.root, read_only=True) as manager:
        assert [r.value for r in manager.log(TOPIC, 0).records()] == [b"kept"]


def _refused_as_deleted(replicas, topic: str, partition: int) -> bool:
    """True when a write to the partition is refused because its topic is being deleted."""
    try:
        with replicas.writer(topic, partition, max_block_ms=1_000):
            return False
    except UnknownTopicError as e:
        return "being deleted" in str(e)


def test_a_write_arriving_while_its_topic_is_deleted_is_refused_and_remakes_nothing(tmp_path):
    root = str(tmp_path)
    with LogManager(root) as manager:
        manager.create_topic("doomed", 2)
    replicas, manager = ReplicaManager(root), LogManager(root)
    held, release = threading.Event(), threading.Event()

    def write_under_way():
        with replicas.writer("doomed", 0, max_block_ms=10_000):
            held.set()
            release.wait(60)

    writing = threading.Thread(target=write_under_way)
    writing.start()
    assert held.wait(60)
    with ThreadPoolExecutor(1) as pool:
        deletion = pool.submit(replicas.delete_topic, manager, "doomed", timeout_ms=60_000)
        wait_until(lambda: _refused_as_deleted(replicas, "doomed", 1), "writes refused once the deletion began")
        assert not deletion.done()  # it waits for the write under way
        release.set()
        writing.join()
        assert sorted(os.path.basename(p) for p in deletion.result(60)) == ["doomed-0", "doomed-1"]
    assert manager.topics() == [] and not [n for n in os.listdir(root) if n.startswith("doomed")]
    assert manager.create_topic("doomed", 1).log(0).log_end_offset == 0  # the name is free again
    replicas.close()
    manager.close()
