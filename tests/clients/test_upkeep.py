"""Retention, compaction and delete-records on logs that live clients hold: the CLI takes a
log through the clients' hand-off and gives it back; a client process's own cleaner applies
each log's policies every ``retention_check_interval_ms``. Real processes throughout."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading

import pytest

from pylog import LogManager
from pylog.logdir.writers import WriterPool
from pylog.log import Log
from pylog.partition_dir import partition_dir_name
from tests.clients.conftest import _REPO, start_worker
from tests.waiting import wait_until

SMALL = {"segment_bytes": 1024}  # a dozen one-record batches a segment


class Worker:
    """A worker process whose stdout lines are collected as they come; ``stop()`` closes its
    stdin (it finishes what it does and closes its clients) and waits for it."""

    def __init__(self, *args):
        self.proc = start_worker(*args, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        self.lines: list[str] = []
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        for line in self.proc.stdout:
            self.lines.append(line.strip())

    def wait_for(self, count: int, what: str) -> None:
        wait_until(lambda: len(self.lines) >= count or self.proc.poll() is not None, what)
        assert self.proc.poll() is None, f"the worker exited with {self.proc.returncode}"

    def stop(self) -> None:
        self.proc.stdin.close()
        assert self.proc.wait(timeout=60) == 0
        self._reader.join()

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()


@pytest.fixture
def workers():
    started: list[Worker] = []
    yield lambda *args: started.append(Worker(*args)) or started[-1]
    for w in started:
        w.kill()


def pylog(*args) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=_REPO + os.pathsep + os.environ.get("PYTHONPATH", ""))
    return subprocess.run([sys.executable, "-m", "pylog", *map(str, args)], capture_output=True, text=True,
                          env=env, timeout=120)


def acked(producer: Worker) -> dict[int, bytes]:
    """offset -> value of every record the producer had acknowledged."""
    out = {}
    for line in list(producer.lines):
        offset, i = map(int, line.split())
        out[offset] = f"v{i}".encode()
    return out


def stored(root: str, topic: str = "t", partition: int = 0) -> tuple[int, dict[int, tuple[bytes, bytes]]]:
    """The log start offset and offset -> (key, value) of every record of the partition."""
    with Log.open(os.path.join(root, partition_dir_name(topic, partition)), read_only=True) as log:
        return log.log_start_offset, {r.offset: (r.key, r.value) for r in log.records()}


def log_start(root: str) -> int:
    with Log.open(os.path.join(root, partition_dir_name("t", 0)), read_only=True) as log:
        return log.log_start_offset


def assert_acked_kept(producer: Worker, root: str) -> int:
    """Every acknowledged record at or above the log start is in the log; returns the log start."""
    start, records = stored(root)
    for offset, value in acked(producer).items():
        if offset >= start:
            assert records.get(offset, (None, None))[1] == value, f"acknowledged record {offset} lost"
    return start


def make_topic(root: str, **config) -> None:
    with LogManager(root) as m:
        m.create_topic("t", 1, config)


def produce_past_cli(producer: Worker, result: subprocess.CompletedProcess) -> None:
    """The CLI run ``result`` succeeded, and the producer appended after it."""
    assert result.returncode == 0, result.stderr
    after = len(producer.lines)
    producer.wait_for(after + 20, "appends after the command")
    producer.stop()


def test_retention_command_takes_the_log_from_a_live_producer(root, workers):
    make_topic(root, retention_bytes=2048, **SMALL)
    producer = workers("produce", root, "t", "1000")
    producer.wait_for(200, "200 acknowledged records")
    result = pylog("retention", root, "--timeout-ms", 30_000)
    produce_past_cli(producer, result)
    assert "t-0: removed 0 segment" not in result.stdout
    assert assert_acked_kept(producer, root) > 0


def test_delete_records_command_takes_the_log_from_a_live_producer(root, workers, tmp_path):
    make_topic(root, **SMALL)
    producer = workers("produce", root, "t", "1000")
    producer.wait_for(100, "100 acknowledged records")
    spec = tmp_path / "offsets.json"
    spec.write_text(json.dumps({"partitions": [{"topic": "t", "partition": 0, "offset": 60}], "version": 1}))
    result = pylog("delete-records", root, "--offset-json-file", spec, "--timeout-ms", 30_000)
    produce_past_cli(producer, result)
    assert "partition: t-0\tlow_watermark: 60" in result.stdout
    assert assert_acked_kept(producer, root) == 60


def test_compact_command_takes_the_log_from_a_live_producer(root, workers):
    make_topic(root, cleanup_policy="compact", **SMALL)
    producer = workers("produce", root, "t", "5")
    producer.wait_for(200, "200 acknowledged records")
    result = pylog("compact", root, "--force", "--timeout-ms", 30_000)
    done = len(producer.lines)
    produce_past_cli(producer, result)
    assert "t-0: 0 record(s) removed" not in result.stdout
    _, records = stored(root)
    sent = acked(producer)
    assert len(records) < len(sent)
    latest = {f"k{i % 5}".encode(): (o, v) for o, v in sorted(sent.items()) for i in [int(v[1:])]}
    for key, (offset, value) in latest.items():
        assert records[offset] == (key, value)
    for line in producer.lines[done:]:  # appended after the command: not compacted yet
        offset, i = map(int, line.split())
        assert records[offset][1] == f"v{i}".encode()


def test_a_producer_process_applies_retention_itself(root, workers):
    make_topic(root, retention_bytes=2048, retention_check_interval_ms=100, **SMALL)
    producer = workers("produce", root, "t", "1000")
    wait_until(lambda: log_start(root) > 0, "the log start to move")
    producer.stop()
    assert assert_acked_kept(producer, root) > 0


def test_a_committing_consumer_process_compacts_the_offsets_partition(root, workers):
    with LogManager(root) as m:
        m.set_topic_config("__consumer_offsets", {"cleanup_policy": "compact", "retention_check_interval_ms": 100,
                                                  "min_cleanable_dirty_ratio": 0.0, **SMALL})
    for p in range(50):
        os.makedirs(os.path.join(root, partition_dir_name("__consumer_offsets", p)))
    committer = workers("commit", root, "upkeep")
    committer.wait_for(1, "a first commit")
    partition = next(p for p in range(50) if os.listdir(os.path.join(root, partition_dir_name(
        "__consumer_offsets", p))))

    offsets = Log.open(os.path.join(root, partition_dir_name("__consumer_offsets", partition)), read_only=True)

    def compacted() -> bool:  # records are missing below the end
        offsets.refresh()
        start, end = offsets.log_start_offset, offsets.log_end_offset
        return len(list(offsets.records(start, end))) < end - start

    try:
        wait_until(compacted, "a compacted segment in the offsets partition")
    finally:
        offsets.close()
    committer.stop()


def _new_cleaners(before: set) -> list:
    return [t for t in threading.enumerate() if t not in before and t.name == "pylog-cleaner"]


@pytest.mark.parametrize("clean", [True, False])
def test_a_pool_cleans_the_logs_it_holds_until_released(root, clean):
    make_topic(root, retention_bytes=0, retention_check_interval_ms=1, **SMALL)
    before = set(threading.enumerate())
    pool = WriterPool.for_root(root) if clean else WriterPool(root, clean=False)  # the CLI's: no cleaner
    try:
        for _ in range(40):
            with pool.writer("t", 0) as log:
                log.append([(None, b"x" * 100)])

        def log_start() -> int:
            with pool.writer("t", 0) as log:
                return log.log_start_offset

        if clean:
            wait_until(lambda: log_start() > 0, "the pool's cleaner to apply retention")
            assert _new_cleaners(before)
        else:
            assert log_start() == 0 and not _new_cleaners(before)
    finally:
        pool.release()
    assert not _new_cleaners(before)


def test_a_log_not_handed_over_fails_the_command_after_its_timeout(root):
    make_topic(root, **SMALL)
    with LogManager(root) as m:  # a writer outside the clients' hand-off
        m.log("t", 0).append([(None, b"x")])
        result = pylog("retention", root, "--timeout-ms", 200)
    assert result.returncode == 1
    assert "not handed over within --timeout-ms 200" in result.stderr


def test_console_producer_takes_turns_with_a_live_producer(root, workers):
    make_topic(root)
    producer = workers("produce", root, "t", "1000")
    producer.wait_for(10, "10 acknowledged records")
    env = dict(os.environ, PYTHONPATH=_REPO + os.pathsep + os.environ.get("PYTHONPATH", ""))
    result = subprocess.run([sys.executable, "-m", "pylog", "produce", root, "--topic", "t", "--partition", "0",
                             "--timeout-ms", "30000"], input="typed-1\ntyped-2\n", capture_output=True, text=True,
                            env=env, timeout=120)
    produce_past_cli(producer, result)
    _, records = stored(root)
    assert [v for _, v in records.values()].count(b"typed-1") == 1
    assert_acked_kept(producer, root)
