"""kcat (librdkafka's command-line client, the Debian package) against ``pylog serve``, as
real ``kcat`` processes: keyed lines produced with ``-P -K:`` read back identically through
pylog's Log API and through ``kcat -C``; ``-L`` lists the topics and partitions; ``-Q``
finds offsets by time; ``pylog verify`` is clean after. kcat is required in CI (``.ci/run``
installs it); elsewhere its absence skips these tests with the reason."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import zlib

import pytest
from kafka.protocol.api_key import ApiKey

from pylog.manager import LogManager
from pylog.serve.kafka_apis import api_versions_response
from tests.serve.conftest import pylog_cli

#: what ``kcat -C -f`` prints per record: partition, offset, timestamp, key, value
CONSUME_FORMAT = "%p\t%o\t%T\t%k\t%s\n"


@pytest.fixture(scope="module")
def kcat() -> str:
    """The ``kcat`` executable: a failure in CI, where ``.ci/run`` installs it, else a skip."""
    path = shutil.which("kcat")
    if path is None:
        reason = "kcat is not on PATH (Debian/Ubuntu: apt-get install kcat; .ci/run installs it)"
        if os.environ.get("CI"):
            pytest.fail(f"CI: {reason}", pytrace=False)
        pytest.skip(reason)
    return path


def run_kcat(kcat: str, server, *args: str, stdin: str | None = None) -> str:
    """``kcat -b SERVER ARGS`` to its exit; its stdout. A non-zero exit fails with its stderr."""
    done = subprocess.run([kcat, "-b", server.bootstrap_servers, *args], input=stdin, capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 0, f"kcat {' '.join(args)} exited {done.returncode}: {done.stderr}"
    return done.stdout


def consume_all(kcat: str, server, topic: str) -> list[tuple[int, int, int, str, str]]:
    """Every record of ``topic`` as ``kcat -C -o beginning -e`` prints it: (partition,
    offset, timestamp, key, value), sorted by partition and offset."""
    out = run_kcat(kcat, server, "-C", "-t", topic, "-o", "beginning", "-e", "-q", "-f", CONSUME_FORMAT)
    rows = [line.split("\t") for line in out.splitlines()]
    return sorted((int(p), int(o), int(ts), k, v) for p, o, ts, k, v in rows)


def records_on_disk(root: str, topic: str) -> list[tuple[int, int, int, str, str]]:
    """Every record of ``topic`` read through pylog's Log API, in kcat's row form."""
    with LogManager(root, read_only=True) as manager:
        return [(p, r.offset, r.timestamp, r.key.decode(), r.value.decode())
                for p in manager.partitions(topic) for r in manager.log(topic, p).records()]


def assert_verify_clean(server) -> None:
    server.stop()
    verify = pylog_cli("verify", server.root)
    assert verify.returncode == 0, verify.stdout.decode() + verify.stderr.decode()


def test_keyed_lines_produced_by_kcat_read_back_identically_through_the_log_and_kcat(kcat, pylog_server):
    with LogManager(pylog_server.root) as manager:
        manager.create_topic("lines", partitions=3)
    lines = [(f"user-{i % 7}", f"event {i}: ünïcode and spaces") for i in range(60)]
    run_kcat(kcat, pylog_server, "-P", "-t", "lines", "-K:", stdin="".join(f"{k}:{v}\n" for k, v in lines))

    consumed = consume_all(kcat, pylog_server, "lines")
    assert consumed == records_on_disk(pylog_server.root, "lines")
    # librdkafka's default partitioner (consistent_random): CRC32 of the key, modulo the partitions
    for partition in range(3):
        expected = [(k, v) for k, v in lines if zlib.crc32(k.encode()) % 3 == partition]
        got = [(k, v) for p, _, _, k, v in consumed if p == partition]
        assert got == expected
        assert [o for p, o, *_ in consumed if p == partition] == list(range(len(expected)))
    assert_verify_clean(pylog_server)


@pytest.mark.parametrize("codec", ["gzip", "snappy", "lz4", "zstd"])
def test_kcat_compressed_batches_are_stored_as_sent_and_read_back(kcat, pylog_server, codec):
    lines = [(f"k{i}", f"{codec} value {i} " * 20) for i in range(40)]
    run_kcat(kcat, pylog_server, "-P", "-t", "packed", "-p", "0", "-K:", "-z", codec,
             stdin="".join(f"{k}:{v}\n" for k, v in lines))
    assert [(k, v) for *_, k, v in consume_all(kcat, pylog_server, "packed")] == lines
    with LogManager(pylog_server.root, read_only=True) as manager:
        stored = {b.compression for b in manager.log("packed", 0).read(0, 1 << 20).batches()}
    # librdkafka 2.0 ties its LZ4 feature to FindCoordinator v0 being listed: without it, it sends lz4 uncompressed
    listed_from = {k.api_key: k.min_version for k in api_versions_response(0).api_keys}
    lz4_allowed = listed_from.get(int(ApiKey.FindCoordinator)) == 0
    assert stored == ({"none"} if codec == "lz4" and not lz4_allowed else {codec})
    assert_verify_clean(pylog_server)


def test_null_keys_and_values_from_kcat_stay_null(kcat, pylog_server):
    run_kcat(kcat, pylog_server, "-P", "-t", "nulls", "-K:", "-Z", stdin="only-key:\nno delimiter\n:only-value\n")
    with LogManager(pylog_server.root, read_only=True) as manager:
        got = [(r.key, r.value) for r in manager.log("nulls", 0).records()]
    assert got == [(b"only-key", None), (None, b"no delimiter"), (None, b"only-value")]


def test_kcat_lists_the_topics_their_partitions_and_this_broker(kcat, pylog_server):
    with LogManager(pylog_server.root) as manager:
        manager.create_topic("listed", partitions=4)
        manager.create_topic("single", partitions=1)
    listing = json.loads(run_kcat(kcat, pylog_server, "-L", "-J"))
    assert listing["brokers"] == [{"id": 0, "name": pylog_server.bootstrap_servers}]
    topics = {t["topic"]: t for t in listing["topics"]}
    assert sorted(topics) == ["listed", "single"]
    assert [p["partition"] for p in topics["listed"]["partitions"]] == [0, 1, 2, 3]
    assert all(p["leader"] == 0 and p["replicas"] == [{"id": 0}] and p["isrs"] == [{"id": 0}]
               for p in topics["listed"]["partitions"])
    text = run_kcat(kcat, pylog_server, "-L", "-t", "listed")
    assert 'topic "listed" with 4 partitions:' in text
    assert "partition 3, leader 0, replicas: 0, isrs: 0" in text


def test_kcat_queries_offsets_by_time(kcat, pylog_server):
    for run in range(3):  # three processes: three batches, each stamped when kcat produced it
        run_kcat(kcat, pylog_server, "-P", "-t", "timed", "-p", "0", "-K:",
                 stdin="".join(f"k{run}-{i}:v{run}-{i}\n" for i in range(5)))
    stamps = [ts for _, _, ts, _, _ in records_on_disk(pylog_server.root, "timed")]
    assert len(stamps) == 15

    def query(timestamp: int) -> int:
        out = run_kcat(kcat, pylog_server, "-Q", "-t", f"timed:0:{timestamp}")
        assert out.startswith("timed [0] offset "), out
        return int(out.split()[-1])

    for timestamp in sorted(set(stamps)):  # the first record stamped at or after it
        assert query(timestamp) == next(o for o, ts in enumerate(stamps) if ts >= timestamp)
    assert query(0) == 0
    assert query(max(stamps) + 1) == -1  # nothing stamped at or after it
    assert query(-2) == 0 and query(-1) == 15  # kcat passes Kafka's earliest and latest through
