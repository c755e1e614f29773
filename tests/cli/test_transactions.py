"""``pylog transactions``: Kafka's ``kafka-transactions.sh`` on a log dir. A transaction
no coordinator tracks pins the last stable offset until ``abort`` ends it; one that
pylog's coordinator tracks is not hanging."""

from __future__ import annotations

import time

import pytest

from pylog import Log, LogManager, Record
from pylog.clients import Producer
from tests.cli.test_console_tools import PYLOG, ok, one_line_error

pytestmark = pytest.mark.skipif(PYLOG is None, reason="the pylog console script is not installed (pip install -e .)")

HOUR_MS = 3_600_000


def _rows(out: str) -> list[list[str]]:
    return [line.split() for line in out.splitlines()[1:]]


def _left_open(root, *, age_ms: int = HOUR_MS) -> None:
    """t-0: a plain record, a transactional one of producer 7 whose writer died (no
    coordinator knows it) written ``age_ms`` ago, and a plain record after it."""
    with LogManager(root) as m:
        log = m.create_topic("t", 2).log(0)
        log.append([b"before"])
        log.append([Record(b"open", timestamp=int(time.time() * 1000) - age_ms)], producer_id=7, producer_epoch=2,
                   base_sequence=0, is_transactional=True)
        log.append([b"after"])


def test_a_transaction_no_coordinator_tracks_is_hanging_until_abort_ends_it(tmp_path):
    root = tmp_path / "root"
    _left_open(root)
    assert ok("consume", root, "--topic", "t", "--isolation-level", "read_committed").split() == ["before"]
    [producer] = _rows(ok("transactions", root, "describe-producers", "--topic", "t", "--partition", "0"))
    assert producer[:4] + producer[5:] == ["7", "2", "-1", "0", "1"]  # [4]: its last timestamp
    hanging = _rows(ok("transactions", root, "find-hanging"))
    assert [row[:6] for row in hanging] == [["t", "0", "7", "2", "-1", "1"]] and hanging[0][7] == "60"
    assert "starts at offset 2 (open ones start at [1])" in one_line_error(
        "transactions", root, "abort", "--topic", "t", "--partition", "0", "--start-offset", "2")
    out = ok("transactions", root, "abort", "--topic", "t", "--partition", "0", "--start-offset", "1")
    assert "ABORT marker for producer 7 (epoch 2) to t-0 at offset 3; last stable offset now 4" in out
    assert ok("consume", root, "--topic", "t", "--isolation-level", "read_committed").split() == ["before", "after"]
    assert _rows(ok("transactions", root, "find-hanging", "--max-transaction-timeout", "0")) == []


def test_a_transaction_younger_than_the_timeout_is_not_hanging_yet(tmp_path):
    root = tmp_path / "root"
    _left_open(root, age_ms=60_000)
    assert _rows(ok("transactions", root, "find-hanging")) == []  # 15 minutes by default, as Kafka's
    assert len(_rows(ok("transactions", root, "find-hanging", "--topic", "t", "--partition", "0",
                        "--max-transaction-timeout", "0"))) == 1


def _in_a_transaction(root, transactional_id: str, partitions: int) -> Producer:
    """A transactional producer of topic ``t`` (``partitions`` partitions) with an ongoing
    transaction holding one record in t-0."""
    with LogManager(root) as m:
        m.create_topic("t", partitions)
    producer = Producer(root, transactional_id=transactional_id)
    producer.init_transactions()
    producer.begin_transaction()
    producer.send("t", b"pending", partition=0).get(10)
    return producer


def test_a_transaction_pylogs_coordinator_tracks_is_listed_and_not_hanging(tmp_path):
    root = tmp_path / "root"
    producer = _in_a_transaction(root, "orders-tx", 1)
    listed = _rows(ok("transactions", root, "list"))
    assert [(row[0], row[3]) for row in listed] == [("orders-tx", "Ongoing")]
    described = ok("transactions", root, "describe", "--transactional-id", "orders-tx").splitlines()
    assert described[1].split()[-1] == "t-0" and "Ongoing" in described[1].split()
    assert _rows(ok("transactions", root, "find-hanging", "--max-transaction-timeout", "0")) == []
    producer.commit_transaction()
    producer.close()
    assert [(row[0], row[3]) for row in _rows(ok("transactions", root, "list"))] == [("orders-tx", "CompleteCommit")]


def test_a_partition_outside_its_producer_s_ongoing_transaction_is_hanging_there_only(tmp_path):
    """Kafka's rule: the coordinator writes markers to the partitions its transaction
    names. The producer's batch in a partition it never added is left open for ever."""
    root = tmp_path / "root"
    producer = _in_a_transaction(root, "tx", 2)
    with Log.open(root / "t-1") as stray:  # written around the coordinator
        stray.append([Record(b"stray", timestamp=int(time.time() * 1000) - HOUR_MS)],
                     producer_id=producer.producer_id, producer_epoch=producer.producer_epoch, base_sequence=0,
                     is_transactional=True)
    hanging = _rows(ok("transactions", root, "find-hanging", "--max-transaction-timeout", "0"))
    assert [row[:3] for row in hanging] == [["t", "1", str(producer.producer_id)]]
    producer.commit_transaction()
    producer.close()


@pytest.mark.parametrize("args, says", [
    (["abort", "--topic", "t", "--partition", "0"], "--start-offset, or --producer-id with --producer-epoch"),
    (["abort", "--topic", "t", "--partition", "0", "--producer-id", "7"], "--producer-epoch"),
    (["abort", "--topic", "t", "--partition", "9", "--start-offset", "1"], "no partition 9"),
    (["describe-producers", "--topic", "nope", "--partition", "0"], "unknown topic 'nope'"),
    (["find-hanging", "--partition", "0"], "--partition needs --topic"),
    (["describe", "--transactional-id", "nobody"], "'nobody' is not in"),
    (["abort", "--topic", "t", "--partition", "0", "--start-offset", "0"], "no open transaction of t-0 starts at"),
    (["abort", "--topic", "t", "--partition", "0", "--producer-id", "999", "--producer-epoch", "0"],
     "producer 999 has no open transaction in t-0 (producers with one: [7])"),
])
def test_mistakes_are_one_line_errors_and_change_nothing(tmp_path, args, says):
    """Nothing in the log dir changes: no marker, no producer snapshot taken on the way."""
    root = tmp_path / "root"
    _left_open(root)
    before = _tree(root)
    assert says in one_line_error("transactions", root, *args)
    assert _tree(root) == before


def _tree(root) -> dict:
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def test_active_producers_of_a_reader_are_the_writer_s(tmp_path):
    with Log.open(tmp_path / "t-0", segment_bytes=300) as w:
        for i in range(20):
            w.append([b"v%d" % i], producer_id=i % 3, producer_epoch=1, base_sequence=i // 3)
        w.append([b"open"], producer_id=9, producer_epoch=0, base_sequence=0, is_transactional=True)
        with Log.open(tmp_path / "t-0", read_only=True) as r:
            assert r.active_producers() == w.active_producers()
        assert [(p.producer_id, p.last_sequence, p.current_txn_start_offset) for p in w.active_producers()] == \
            [(0, 6, None), (1, 6, None), (2, 5, None), (9, 0, 20)]


def test_tables_are_kafkas_padded_tab_separated_cells_with_none_for_no_value(tmp_path):
    """As TransactionsCommand prints them: every cell, the last too, padded to its column
    and followed by a tab; an idempotent producer's CurrentTransactionStartOffset is None."""
    root = tmp_path / "root"
    with LogManager(root) as m:
        m.create_topic("t", 1).log(0).append([b"idempotent"], producer_id=3, producer_epoch=0, base_sequence=0)
    lines = ok("transactions", root, "describe-producers", "--topic", "t", "--partition", "0").splitlines()
    header, row = lines[0].split("\t"), lines[1].split("\t")
    assert header[-1] == row[-1] == ""  # each line ends with a tab
    assert [c.rstrip() for c in header[:-1]] == ["ProducerId", "ProducerEpoch", "LatestCoordinatorEpoch",
                                                 "LastSequence", "LastTimestamp", "CurrentTransactionStartOffset"]
    assert [len(c) for c in header] == [len(c) for c in row]
    assert row[0].rstrip() == "3" and row[-2] == "None".ljust(len("CurrentTransactionStartOffset"))


def test_the_coordinator_is_the_brokers_node_id_in_a_brokers_log_dir(tmp_path):
    """Kafka names the coordinator by its broker id: a log dir with a broker's meta.properties
    is that broker; elsewhere pylog names the __transaction_state partition."""
    root = tmp_path / "root"
    producer = _in_a_transaction(root, "orders-tx", 1)
    producer.close()
    partition = _rows(ok("transactions", root, "list"))[0][1]
    assert partition.startswith("__transaction_state-")
    (root / "meta.properties").write_text("#\nversion=1\nnode.id=3\ndirectory.id=x\ncluster.id=y\n")
    assert _rows(ok("transactions", root, "list"))[0][1] == "3"
    described = ok("transactions", root, "describe", "--transactional-id", "orders-tx").splitlines()
    assert described[1].split()[0] == "3"


def test_describe_shows_a_completed_transactions_start_time(tmp_path):
    root = tmp_path / "root"
    producer = _in_a_transaction(root, "orders-tx", 1)
    producer.commit_transaction()
    producer.close()
    header, row = (line.split("\t") for line in
                   ok("transactions", root, "describe", "--transactional-id", "orders-tx").splitlines())
    cells = dict(zip((c.rstrip() for c in header), (c.rstrip() for c in row)))
    assert cells["TransactionState"] == "CompleteCommit" and cells["CurrentTransactionStartTimeMs"].isdigit()


def test_find_hanging_takes_kafkas_broker_id_the_log_dir_being_that_broker(tmp_path):
    root = tmp_path / "root"
    _left_open(root)
    rows = _rows(ok("transactions", root, "find-hanging", "--broker-id", "0"))
    assert [(row[0], row[1], row[2]) for row in rows] == [("t", "0", "7")]
