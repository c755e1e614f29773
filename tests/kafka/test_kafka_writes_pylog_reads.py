"""Kafka writes, pylog reads: every partition of a log dir that Kafka's own clients wrote
(tests/kafka/written_by_kafka.py), opened by pylog read-only and writable after the broker
stopped cleanly and after a SIGKILL, returns what Kafka's consumer, admin client and tools
answered from the live broker."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from pylog import Log
from tests.kafka import written_by_kafka as scenario
from tests.kafka.written_by_kafka import PARTITIONS

STOPS = ("stopped", "killed")
OPENS = ("read-only", "writable")


@pytest.fixture(scope="module")
def written(kafka_module_broker_factory, tmp_path_factory) -> scenario.WrittenByKafka:
    broker = kafka_module_broker_factory()
    return scenario.write(broker, tmp_path_factory.mktemp("written-by-kafka"))


@pytest.fixture(scope="module", params=[(s, o) for s in STOPS for o in OPENS], ids="-".join)
def log_dir(request, written, tmp_path_factory):
    """The log dir as the broker's stop left it, with how pylog opens it: a writable open gets
    a copy of its own (it may rebuild indexes and checkpoints)."""
    stop, how = request.param
    source = written.stopped_copy if stop == "stopped" else written.killed_copy
    if how == "read-only":
        return source, True
    return shutil.copytree(source, tmp_path_factory.mktemp(f"{stop}-writable") / "data"), False


def _open(log_dir, topic: str, partition: int) -> Log:
    root, read_only = log_dir
    return Log.open(root / f"{topic}-{partition}", read_only=read_only)


def _leader_epochs(log: Log) -> dict[int, int]:
    """Offset -> the partition leader epoch of its batch, for every batch of the log."""
    epochs, offset = {}, log.log_start_offset
    while offset < log.log_end_offset:
        fetch = log.read(offset)
        for batch in fetch.batches():
            epochs.update(dict.fromkeys(range(batch.base_offset, batch.last_offset + 1), batch.partition_leader_epoch))
        offset = fetch.next_offset
    return epochs


def _pylog_records(log: Log, isolation: str) -> list[tuple]:
    epochs = _leader_epochs(log)
    return [(r.offset, r.timestamp, r.timestamp_type, r.key, r.value, tuple(r.headers), epochs[r.offset])
            for r in log.records(isolation=isolation)]


def _kafka_records(records: list[dict]) -> list[tuple]:
    return [(r["offset"], r["timestamp"], r["timestampType"], r["key"], r["value"], tuple(r["headers"]),
             r["leaderEpoch"]) for r in records]


@pytest.mark.parametrize("topic, partition", PARTITIONS)
def test_records_offsets_timestamps_headers_and_leader_epochs_equal_kafkas_consumer(written, log_dir, topic,
                                                                                     partition):
    with _open(log_dir, topic, partition) as log:
        assert _pylog_records(log, "uncommitted") == _kafka_records(written.views.records[(topic, partition)])


@pytest.mark.parametrize("topic, partition", PARTITIONS)
def test_committed_reads_equal_kafkas_read_committed_consumer(written, log_dir, topic, partition):
    with _open(log_dir, topic, partition) as log:
        assert _pylog_records(log, "committed") == _kafka_records(written.views.committed[(topic, partition)])


@pytest.mark.parametrize("topic, partition", PARTITIONS)
def test_log_start_log_end_and_last_stable_offsets_equal_kafkas_list_offsets(written, log_dir, topic, partition):
    kafka = written.views.offsets[(topic, partition)]
    with _open(log_dir, topic, partition) as log:
        assert (log.log_start_offset, log.log_end_offset, log.high_watermark, log.last_stable_offset) == \
            (kafka["earliest"], kafka["latest"], kafka["latest"], kafka["lso"])


@pytest.mark.parametrize("topic, partition", PARTITIONS)
def test_offset_for_timestamp_equals_kafkas_list_offsets(written, log_dir, topic, partition):
    kafka = {f["timestamp"]: (f["offset"] if f["offset"] >= 0 else None)
             for f in written.views.offsets[(topic, partition)]["forTimestamp"]}
    with _open(log_dir, topic, partition) as log:
        assert {ts: log.offset_for_timestamp(ts) for ts in kafka} == kafka


def _pylog(*args) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "pylog", *map(str, args)], capture_output=True, text=True,
                          timeout=120)


def _root(written, stop: str):
    return written.stopped_copy if stop == "stopped" else written.killed_copy


def _groups_args(groups) -> list[str]:
    return [a for g in groups for a in ("--group", g)]


@pytest.mark.parametrize("stop", STOPS)
def test_consumer_groups_describe_equals_kafkas(written, stop):
    """Groups named in Kafka's order (by id): pylog's stdout, stderr and exit code are Kafka's."""
    mine = _pylog("consumer-groups", _root(written, stop), "--describe", *_groups_args(sorted(scenario.GROUPS)))
    kafka = written.views.consumer_groups
    assert (mine.returncode, mine.stdout, mine.stderr) == (kafka.returncode, kafka.stdout, kafka.stderr)


def test_consumer_groups_describe_prints_groups_sorted_by_id_as_kafka_does(written):
    mine = _pylog("consumer-groups", written.stopped_copy, "--describe", *_groups_args(scenario.GROUPS))
    assert mine.stdout == written.views.consumer_groups.stdout


TIME_DEPENDENT = {"TransactionDurationMs"}  # describe: the time since the start, as of asking


def _cells(table: str, leave_out: set[str]) -> list[list[str]]:
    """A kafka-transactions table as rows of unpadded cells, without the columns ``leave_out``,
    rows after the header sorted (ListTransactions answers in no defined order)."""
    rows = [[cell.rstrip() for cell in line.rstrip("\t").split("\t")] for line in table.splitlines()]
    if not rows:
        return rows
    width = len(rows[0])
    rows = [row + [""] * (width - len(row)) for row in rows]  # an empty last cell, unpadded, is no cell
    keep = [i for i, name in enumerate(rows[0]) if name not in leave_out]
    rows = [[row[i] for i in keep] for row in rows]
    return rows[:1] + sorted(rows[1:])


@pytest.mark.parametrize("stop", STOPS)
@pytest.mark.parametrize("query", scenario.TRANSACTION_QUERIES, ids=" ".join)
def test_transactions_equal_kafkas_cell_by_cell(written, stop, query):
    mine = _pylog("transactions", _root(written, stop), *query)
    kafka = written.views.transactions[query]
    assert (mine.returncode, _cells(mine.stdout, TIME_DEPENDENT), mine.stderr) == \
        (kafka.returncode, _cells(kafka.stdout, TIME_DEPENDENT), kafka.stderr)


@pytest.mark.parametrize("query", [("list",), ("describe-producers", "--topic", "txn", "--partition", "0")],
                         ids=" ".join)
def test_transactions_print_kafkas_exact_table(written, query):
    mine = _pylog("transactions", written.stopped_copy, *query)
    assert _cells(mine.stdout, TIME_DEPENDENT) == _cells(written.views.transactions[query].stdout, TIME_DEPENDENT)
    assert mine.stdout.splitlines()[0] == written.views.transactions[query].stdout.splitlines()[0]


@pytest.mark.parametrize("stop", STOPS)
@pytest.mark.parametrize("time", scenario.GET_OFFSETS_TIMES)
def test_get_offsets_equals_kafkas_for_every_topic(written, stop, time):
    mine = _pylog("get-offsets", _root(written, stop), "--time", time)
    kafka = written.views.get_offsets[time]
    assert (mine.returncode, mine.stdout, mine.stderr) == (kafka.returncode, kafka.stdout, kafka.stderr)


def test_get_offsets_leaves_out_krafts_metadata_log_as_kafka_does(written):
    mine = _pylog("get-offsets", written.stopped_copy, "--time", "-1")
    assert mine.stdout == written.views.get_offsets["-1"].stdout


def _codecs_by_file(dump: str) -> dict[str, set[str]]:
    """kafka-dump-log's output: the compression codecs of each file's batches."""
    out = {}
    for section in dump.split("Dumping ")[1:]:
        path, _, batches = section.partition("\n")
        out[Path(path).parent.name] = set(re.findall(r"compresscodec: (\w+)", batches))
    return out


def test_kafka_wrote_every_case_the_reads_cover(written, kafka_tool):
    """The scenario did what the tests above rely on: codecs, aborts, an open transaction,
    cleaning, retention, deleted records and moved leader epochs, as Kafka itself reports them."""
    views = written.views
    offsets = lambda tp: views.offsets[tp]  # noqa: E731
    compacted = [r["offset"] for r in views.records[("compacted", 0)]]
    assert len(compacted) < offsets(("compacted", 0))["latest"]          # the cleaner removed records
    assert None in [r["value"] for r in views.records[("compacted", 0)]]   # and kept a tombstone
    assert offsets(("time-retention", 0))["earliest"] == 4
    assert offsets(("size-retention", 0))["earliest"] == 4
    assert offsets(("deleted", 0))["earliest"] == scenario.DELETED_BEFORE
    for p in (0, 1):
        assert len(views.committed[("txn", p)]) < len(views.records[("txn", p)])  # aborted records
        assert offsets(("txn", p))["lso"] < offsets(("txn", p))["latest"]         # the open transaction
    assert {r["timestampType"] for r in views.records[("append-time", 0)]} == {"LogAppendTime"}
    assert len({r["leaderEpoch"] for r in views.records[("codecs", 0)]}) == 2
    logs = [written.stopped_copy / f"codecs-{p}" / "00000000000000000000.log" for p in range(len(scenario.CODECS))]
    compacted = written.stopped_copy / "compacted-0" / "00000000000000000000.log"
    dump = kafka_tool("org.apache.kafka.tools.DumpLogSegments", "--files", ",".join(map(str, [*logs, compacted]))).stdout
    codecs = _codecs_by_file(dump)
    assert {f"codecs-{p}": codecs[f"codecs-{p}"] for p in range(len(scenario.CODECS))} == \
        {f"codecs-{p}": {codec} for p, codec in enumerate(scenario.CODECS)}
    # the cleaner kept a tombstone and stamped its batch with a delete horizon (KIP-534)
    assert re.search(r"deleteHorizonMs: OptionalLong\[\d+\]", dump.split("compacted-0")[1])
