"""pylog writes a Kafka broker's log dir while the broker is down, and Kafka, restarted, reads it.

The broker creates the topics (and writes a little of its own); then, offline, pylog appends
plain, keyed, idempotent and transactional records (with aborts and a transaction left open),
runs retention, compaction and ``delete_records``, and writes its producers' state into
``__transaction_state``. Restarted, the broker must load every partition as pylog left it (no
recovery, no truncation), Kafka's consumer must read exactly pylog's records at both isolation
levels, Kafka's tools must show pylog's offsets and transactions, and the broker must go on
appending where pylog stopped, its leader epochs and producer states following pylog's.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from pylog import Log, LogManager, Record
from pylog.clients import Producer
from pylog.logdir.producer_ids import PRODUCER_IDS_FILE
from pylog.layout import CLEANER_OFFSET_CHECKPOINT
from pylog.retention import enforce_retention
from tests.retention.test_compact import abort_marker_in_the_active_segment, last_stable_offset_inside_a_segment
from tests.waiting import wait_until

READ_BACK = "io.pylog.interop.writes.ReadBack"
T0_MS = 1_700_000_000_000  # old enough for pylog's time retention (7 days) to take whatever carries it
WEEK_MS = 7 * 24 * 3600 * 1000
#: Kafka's transaction.state.log.num.partitions of the session broker (tests/kafka/broker.py)
TXN_STATE_PARTITIONS = 3
#: The first producer id pylog hands out here: far above the blocks Kafka's controller hands out
#: (docs/faq.md, "producer ids"), so pylog's producers and Kafka's never share an id.
PYLOG_FIRST_PRODUCER_ID = 1 << 40
COMPACT = {"cleanup.policy": "compact", "min.cleanable.dirty.ratio": "0.01"}
TOPICS = {  # name -> Kafka topic configs, set when the broker creates it
    "pw-plain": {},
    "pw-keyed": COMPACT,
    "pw-idempotent": {},
    "pw-txn": {},
    "pw-max-timestamp-deleted": {},
    "pw-lso-inside-by-pylog": COMPACT,
    "pw-lso-inside-by-kafka": COMPACT,
    "pw-abort-in-active-by-pylog": COMPACT,
    "pw-abort-in-active-by-kafka": COMPACT,
}
#: Logs written twice, as pw-<name>-by-pylog and pw-<name>-by-kafka, for pylog and the broker's
#: cleaner to compact: name -> (writer, where the pass ends, the (offset, value)s left).
CLEANING = {
    "lso-inside": (last_stable_offset_inside_a_segment, 2,
                   [(1, "new"), (2, "old2"), (3, "new2"), (4, "aborted"), (5, "open"), (6, "after")]),
    "abort-in-active": (abort_marker_in_the_active_segment, 4, [(0, "v0"), (3, "after")]),
}
PARTITIONS = [f"{topic}:0" for topic in TOPICS]
#: The partitions only pylog changed: the broker's cleaner works on the pw-*-by-kafka ones once started.
PYLOG_PARTITIONS = [p for p in PARTITIONS if not p.endswith("-by-kafka:0")]
#: Where pylog's get-offsets differs from Kafka's (docs/faq.md): the largest timestamp below the log start.
MAX_TIMESTAMP_DELETED = "pw-max-timestamp-deleted:0"


# -- what pylog writes ------------------------------------------------------------------------

def write_plain(m: LogManager) -> None:
    """Three segments with headers; pylog's time retention then removes the first (old) one."""
    log = m.log("pw-plain", 0)
    log.append([Record(b"old-%d" % i, key=b"k%d" % i, timestamp=T0_MS + i, headers=[("h", b"%d" % i)])
                for i in range(3)])
    for segment in range(2):
        log.roll()
        log.append([Record(b"v%d-%d" % (segment, i), key=None, headers=[("seg", b"%d" % segment)])
                    for i in range(3)])
    m.alter_topic_config("pw-plain", {"retention_ms": WEEK_MS})  # applies to the open log at once
    assert enforce_retention(log) == [0]


def write_keyed(m: LogManager) -> None:
    """Updates and a tombstone over three segments, compacted by pylog."""
    m.alter_topic_config("pw-keyed", {"cleanup_policy": "compact", "min_cleanable_dirty_ratio": 0.0})
    log = m.log("pw-keyed", 0)
    for round_ in range(3):
        log.append([Record(b"r%d-%d" % (round_, i), key=b"key-%d" % i) for i in range(4)])
        if round_ == 1:
            log.append([Record(None, key=b"key-0")])
        log.roll()
    log.append([Record(b"tail", key=b"tail")])
    assert log.compact(force=True).records_removed > 0


def write_idempotent(root: Path, m: LogManager) -> None:
    """Three batches of pylog's idempotent producer, timestamps rising; then delete_records
    inside the second."""
    with Producer(str(root), enable_idempotence=True) as producer:
        for batch in range(3):
            for i in range(2):
                producer.send("pw-idempotent", b"i%d-%d" % (batch, i), key=b"k%d" % i, partition=0,
                              timestamp_ms=T0_MS + 10 * batch + i)
            producer.flush()
    assert m.log("pw-idempotent", 0).delete_records(3) == 3


def write_max_timestamp_deleted(m: LogManager) -> None:
    """The largest timestamp at offset 0, then delete_records before 1."""
    log = m.log("pw-max-timestamp-deleted", 0)
    for timestamp_ms in (T0_MS + 300, T0_MS + 100, T0_MS + 200):
        log.append([Record(b"t", timestamp=timestamp_ms)])
    assert log.delete_records(1) == 1


def write_transactions(root: Path) -> None:
    """pylog's transactional producer commits, aborts, commits; a second aborts; a third leaves
    its transaction open."""
    def producer(transactional_id: str) -> Producer:
        p = Producer(str(root), transactional_id=transactional_id, transaction_timeout_ms=900_000,
                     transaction_state_partitions=TXN_STATE_PARTITIONS)
        p.init_transactions()
        return p

    with producer("pw-tx") as p:
        for n, commit in enumerate((True, False, True)):
            p.begin_transaction()
            p.send("pw-txn", b"tx%d-a" % n, key=b"a", partition=0)
            p.send("pw-txn", b"tx%d-b" % n, key=b"b", partition=0)
            p.commit_transaction() if commit else p.abort_transaction()
    with producer("pw-tx-aborted") as p:
        p.begin_transaction()
        p.send("pw-txn", b"aborted", partition=0)
        p.abort_transaction()
    with producer("pw-tx-open") as p:
        p.begin_transaction()
        p.send("pw-txn", b"left-open", partition=0)
        p.flush()  # closing leaves the transaction open, as Kafka's producer does


def write_cleaning_scenarios(m: LogManager) -> None:
    """Each log of ``CLEANING`` twice; pylog compacts one copy, the broker's cleaner the
    other once restarted."""
    for name, (write, _, _) in CLEANING.items():
        for topic in (f"pw-{name}-by-pylog", f"pw-{name}-by-kafka"):
            m.alter_topic_config(topic, {"cleanup_policy": "compact", "min_cleanable_dirty_ratio": 0.0})
            write(m.log(topic, 0))
        m.log(f"pw-{name}-by-pylog", 0).compact(force=True)


def pylog_view(m: LogManager) -> dict:
    """What pylog reads of each partition: records at both isolation levels, offsets, epochs."""
    view = {}
    for topic in TOPICS:
        log = m.log(topic, 0)
        view[topic] = {
            "read_uncommitted": [_as_json(r) for r in log.records(isolation="uncommitted")],
            "read_committed": [_as_json(r) for r in log.records(isolation="committed")],
            "log_start_offset": log.log_start_offset, "log_end_offset": log.log_end_offset,
            "last_stable_offset": log.last_stable_offset, "epochs": _epochs(log)}
    return view


def _epochs(log: Log) -> list[tuple[int, int]]:
    """The (epoch, start offset) lines of the partition's leader-epoch-checkpoint."""
    lines = (Path(log.path) / "leader-epoch-checkpoint").read_text().splitlines()
    return [tuple(map(int, line.split())) for line in lines[2:] if line.strip()]


def _as_json(record) -> dict:
    def text(b):
        return None if b is None else b.decode()
    return {"offset": record.offset, "timestamp": record.timestamp, "key": text(record.key),
            "value": text(record.value), "headers": [[k, text(v)] for k, v in record.headers]}


def pylog_cli(*args: str) -> str:
    done = subprocess.run([sys.executable, "-m", "pylog", *args], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    return done.stdout


# -- the phases ---------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def written(kafka_broker):
    """Topics created by the broker, written by pylog offline, loaded by the restarted broker."""
    broker = kafka_broker
    broker.create_topics([{"topic": t, "partitions": 1, "configs": c} for t, c in TOPICS.items()])
    # Kafka's transactional producer writes first: its coordinator creates __transaction_state
    broker.clients("produce", "--config", "transactional.id=pw-kafka-tx", lines=[
        {"op": "begin"}, {"topic": "pw-txn", "partition": 0, "key": "kafka", "value": "first", "timestamp": T0_MS},
        {"op": "commit"}])
    broker.stop()

    root = broker.log_dir
    if not (root / PRODUCER_IDS_FILE).exists():
        (root / PRODUCER_IDS_FILE).write_text(f"{PYLOG_FIRST_PRODUCER_ID}\n")
    with LogManager(root) as m:
        write_plain(m)
        write_keyed(m)
        write_idempotent(root, m)
        write_max_timestamp_deleted(m)
        write_cleaning_scenarios(m)
    write_transactions(root)
    with LogManager(root, read_only=True) as m:
        view = pylog_view(m)
    times, producer_topics = ("-2", "-1", "-3"), ("pw-idempotent", "pw-txn")
    outputs = parallel(  # the read-only tools, at once
        *[lambda t=t: pylog_cli("get-offsets", str(root), "--topic-partitions", ",".join(PYLOG_PARTITIONS),
                                "--time", t) for t in times],
        lambda: pylog_cli("transactions", str(root), "list"),
        lambda: pylog_cli("transactions", str(root), "describe", "--transactional-id", "pw-tx-open"),
        *[lambda t=t: pylog_cli("transactions", str(root), "describe-producers", "--topic", t, "--partition", "0")
          for t in producer_topics])
    offsets = dict(zip(times, outputs[:3]))
    transactions, described = outputs[3:5]
    producers = dict(zip(producer_topics, outputs[5:]))

    log_offset = broker.server_log.stat().st_size
    broker.start()
    return {"view": view, "get_offsets": offsets, "transactions": transactions, "described": described,
            "producers": producers, "server_log_offset": log_offset}


def server_log_since(broker, offset: int) -> str:
    with open(broker.server_log, "rb") as f:
        f.seek(offset)
        return f.read().decode(errors="replace")


def parallel(*calls):
    """Run the (JVM-starting) calls at once; their results in order."""
    with ThreadPoolExecutor(len(calls)) as pool:
        return [f.result() for f in [pool.submit(call) for call in calls]]


# -- what Kafka makes of it ---------------------------------------------------------------------

def test_the_broker_loads_every_partition_as_pylog_left_it(kafka_broker, written):
    text = server_log_since(kafka_broker, written["server_log_offset"])
    assert "since clean shutdown file was found" in text  # pylog kept the log dir's clean-shutdown marker
    for topic, seen in written["view"].items():
        loads = re.findall(rf"Completed load of Log\(dir=[^,]*, topicId=[^,]*, topic={topic}, partition=0, "
                           rf"highWatermark=\d+, lastStableOffset=\d+, logStartOffset=(\d+), logEndOffset=(\d+)\)",
                           text)
        assert loads == [(str(seen["log_start_offset"]), str(seen["log_end_offset"]))], topic
        assert f"Log loaded for partition {topic}-0 with initial high watermark {seen['log_end_offset']}" in text
    mine = [line for line in text.splitlines() if any(f"{t}-0" in line or f"topic={t}," in line for t in TOPICS)]
    assert [line for line in mine if re.search(r"(?i)truncat|corrupt|invalid|recovering unflushed", line)] == []


def test_kafkas_consumer_reads_exactly_pylogs_records(kafka_broker, written):
    read = _read_back(kafka_broker, PYLOG_PARTITIONS)
    for topic in (p.split(":")[0] for p in PYLOG_PARTITIONS):
        seen = written["view"][topic]
        for isolation in ("read_uncommitted", "read_committed"):
            got = [{k: r[k] for k in ("offset", "timestamp", "key", "value", "headers")}
                   for r in read if r.get("topic") == topic and r["isolation"] == isolation]
            assert got == seen[isolation], (topic, isolation)
    view = written["view"]
    assert [r["value"] for r in view["pw-txn"]["read_committed"]] == [
        "first", "tx0-a", "tx0-b", "tx2-a", "tx2-b"]  # the aborted transaction and the open one left out


def _read_back(broker, partitions: list[str], groups=()) -> list[dict]:
    args = [a for p in partitions for a in ("--partition", p)] + [a for g in groups for a in ("--group", g)]
    done = broker.admin(READ_BACK, "read", *args)
    return [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]


#: What kafka-get-offsets --time -3 prints for MAX_TIMESTAMP_DELETED (checked below): the offset
#: of the largest timestamp although it lies below the log start offset (1).
KAFKA_MAX_TIMESTAMP_DELETED = f"{MAX_TIMESTAMP_DELETED}:0"


def test_kafkas_get_offsets_equal_pylogs(kafka_broker, written):
    times = ("-2", "-1", "-3")
    outputs = _stdouts(kafka_broker.admin_many([("get-offsets", "--topic-partitions", ",".join(PYLOG_PARTITIONS),
                                                 "--time", t) for t in times]))
    for t, kafka_out in zip(times, outputs):
        theirs, ours = sorted(kafka_out.split()), sorted(written["get_offsets"][t].split())
        assert theirs == ours, f"--time {t}"
    assert KAFKA_MAX_TIMESTAMP_DELETED in written["get_offsets"]["-3"].split()


def test_get_offsets_names_a_largest_timestamp_below_the_log_start_as_kafka_does(written):
    ours = [line for line in written["get_offsets"]["-3"].split() if line.startswith(MAX_TIMESTAMP_DELETED + ":")]
    assert ours == [KAFKA_MAX_TIMESTAMP_DELETED]


def test_kafka_transactions_shows_pylogs_transactional_ids(kafka_broker, written):
    listed, described, producers_idem, producers_txn = _stdouts(kafka_broker.admin_many([
        ("transactions", "list"),
        ("transactions", "describe", "--transactional-id", "pw-tx-open"),
        ("transactions", "describe-producers", "--topic", "pw-idempotent", "--partition", "0"),
        ("transactions", "describe-producers", "--topic", "pw-txn", "--partition", "0")]))
    ours = _rows(written["transactions"])
    theirs = _rows(listed)
    for tid, state in (("pw-tx", "CompleteCommit"), ("pw-tx-aborted", "CompleteAbort"), ("pw-tx-open", "Ongoing")):
        assert theirs[tid]["TransactionState"] == state, tid
        assert theirs[tid] == ours[tid], tid  # the coordinator too: the broker of this log dir
    [ours_open] = _rows(written["described"], key="TransactionalId").values()
    [theirs_open] = _rows(described, key="TransactionalId").values()
    assert theirs_open["TopicPartitions"] == "pw-txn-0"
    assert _without(theirs_open, "TransactionDurationMs") == _without(ours_open, "TransactionDurationMs")
    for mine, kafka in ((written["producers"]["pw-idempotent"], producers_idem),
                        (written["producers"]["pw-txn"], producers_txn)):
        assert _rows(kafka, key="ProducerId") == _rows(mine, key="ProducerId")


def _stdouts(answers) -> list[str]:
    """The tools' stdouts (``admin_many``, one JVM for them all), once each has succeeded."""
    failed = [a for a in answers if a.returncode != 0]
    assert not failed, "\n".join(f"{a.args} exited {a.returncode}:\n{a.stderr[-2000:]}" for a in failed)
    return [a.stdout for a in answers]


def _rows(table: str, key: str | None = None) -> dict:
    """A table of kafka-transactions as {first column (or ``key``): {column: cell}}, cells
    without their padding."""
    lines = [line.rstrip("\t") for line in table.splitlines() if line.strip()]
    header = [h.strip() for h in lines[0].split("\t")]
    rows = [dict(zip(header, (c.strip() for c in line.split("\t")))) for line in lines[1:]]
    return {r[key or header[0]]: r for r in rows}


def _without(row: dict, *columns: str) -> dict:
    return {k: v for k, v in row.items() if k not in columns}


@pytest.mark.parametrize("name", CLEANING)
def test_the_broker_cleaner_cleans_as_pylog_did(kafka_broker, written, name):
    """Kafka's cleaner ends its pass where pylog's did (its cleaner-offset-checkpoint says so)
    and leaves the same records: with the last stable offset inside a rolled segment it stops
    at that segment's base; an ABORT marker in the active segment drops its records below."""
    _, end_offset, expected = CLEANING[name]
    checkpoint = kafka_broker.log_dir / CLEANER_OFFSET_CHECKPOINT
    wait_until(lambda: f"pw-{name}-by-kafka 0 {end_offset}" in checkpoint.read_text().splitlines(),
               f"the broker's cleaner to clean pw-{name}-by-kafka-0 up to {end_offset}", timeout_s=120)
    assert f"pw-{name}-by-pylog 0 {end_offset}" in checkpoint.read_text().splitlines()  # pylog's, kept
    read = _read_back(kafka_broker, [f"pw-{name}-by-kafka:0", f"pw-{name}-by-pylog:0"])

    def values(topic):
        return [(r["offset"], r["value"]) for r in read if r["topic"] == topic and r["isolation"] == "read_uncommitted"]
    assert values(f"pw-{name}-by-kafka") == values(f"pw-{name}-by-pylog") == expected


def test_the_broker_appends_after_pylog_with_its_epochs_and_producer_states(kafka_broker, written):
    """Kafka's producers append at pylog's log end offsets, under the next leader epoch; the
    transactional one, given pylog's transactional id, gets pylog's producer id at the next epoch."""
    view = written["view"]
    acks = kafka_broker.clients("produce", lines=[
        {"producer": {"transactional.id": "pw-tx"}, "as": "tx"}, {"op": "begin"},
        {"topic": "pw-txn", "partition": 0, "key": "kafka", "value": "after-pylog"}, {"op": "commit"},
        {"producer": {}, "as": "plain"}] + [{"topic": t, "partition": 0, "key": "kafka", "value": "after-pylog"}
                                            for t in ("pw-plain", "pw-keyed", "pw-idempotent")])
    assert {a["topic"]: a["offset"] for a in acks} == {t: view[t]["log_end_offset"]
                                                       for t in ("pw-txn", "pw-plain", "pw-keyed", "pw-idempotent")}
    for topic in ("pw-plain", "pw-keyed", "pw-idempotent", "pw-txn"):
        with Log.open(kafka_broker.partition_dir(topic, 0), read_only=True) as log:
            epochs = _epochs(log)
            batches = log.read(view[topic]["log_end_offset"]).batches()
            values = [r.value for r in log.records(view[topic]["log_end_offset"])]
        assert values == [b"after-pylog"], topic
        assert epochs[:-1] == view[topic]["epochs"], topic
        assert epochs[-1][0] > view[topic]["epochs"][-1][0] and epochs[-1][1] == view[topic]["log_end_offset"], topic
        assert {b.partition_leader_epoch for b in batches} == {epochs[-1][0]}, topic
    pylog_id = int(_rows(written["transactions"])["pw-tx"]["ProducerId"])
    pylog_epoch = int(_rows(written["producers"]["pw-txn"], key="ProducerId")[str(pylog_id)]["ProducerEpoch"])
    wait_until(lambda: len(_batches_from(kafka_broker, "pw-txn", view["pw-txn"]["log_end_offset"])) == 2,
               "the COMMIT marker (its coordinator writes it after the commit returns)")
    data, marker = _batches_from(kafka_broker, "pw-txn", view["pw-txn"]["log_end_offset"])
    assert (data.producer_id, data.producer_epoch, data.base_sequence) == (pylog_id, pylog_epoch + 1, 0)
    # Kafka 4's transaction protocol 2 (KIP-890) ends each transaction at the next epoch
    assert marker.is_control and (marker.producer_id, marker.producer_epoch) == (pylog_id, pylog_epoch + 2)


def _batches_from(broker, topic: str, offset: int) -> list:
    with Log.open(broker.partition_dir(topic, 0), read_only=True) as log:
        return log.read(offset).batches()
