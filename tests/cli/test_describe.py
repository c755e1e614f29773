"""``pylog describe``: a log dir shows every partition, a partition directory that one,
anything else is a one-line error; human sizes and times unless --raw; LSO and topic config."""

from __future__ import annotations

import json
import re

from pylog import Log, LogManager, Record
from tests.cli.test_cli import pylog
from tests.conftest import needs_samples, sample_partitions

TS = 1_700_000_000_000  # 2023-11-14T22:13:20.000Z


def _log_dir(root):
    with LogManager(root) as m:
        m.create_topic("orders", 2, {"retention_ms": 3_600_000})
        for p in (0, 1):
            m.log("orders", p).append([Record(b"v" * 600, timestamp=TS + p) for _ in range(3)])
        m.create_topic("events", 1)
        m.log("events", 0).append([Record(b"e", timestamp=TS)])
    return root


def test_a_partition_directory_shows_that_partition(tmp_path):
    root = _log_dir(tmp_path / "root")
    r = pylog("describe", root / "orders-1", "--json")
    assert r.returncode == 0, r.stderr
    rows = json.loads(r.stdout)
    assert [(row["topic"], row["partition"], row["log_end_offset"]) for row in rows] == [("orders", 1, 3)]
    assert rows[0]["newest_timestamp"] == TS + 1


def test_a_log_dir_shows_every_partition_with_its_topic_config(tmp_path):
    root = _log_dir(tmp_path / "root")
    r = pylog("describe", root)
    assert r.returncode == 0, r.stderr
    out = r.stdout.decode()
    assert re.search(r"^Topic: orders\tPartitionCount: 2\tConfigs: retention.ms=3600000$", out, re.M)
    assert re.search(r"^Topic: events\tPartitionCount: 1\tConfigs: $", out, re.M)
    assert re.search(r"^  partition +start +end +hw +lso +segments +bytes +oldest +newest$", out, re.M)
    assert len(re.findall(r"^  [01] +0 +3 +3 +3 +1 +1\.\d KiB +2023-11-14T22:13:20\.00[01]Z", out, re.M)) == 2


def test_raw_prints_plain_bytes_and_epoch_milliseconds(tmp_path):
    root = _log_dir(tmp_path / "root")
    with Log.open(root / "events-0", read_only=True) as log:
        size = log.size_bytes
    out = pylog("describe", root / "events-0", "--raw").stdout.decode()
    assert re.search(rf"^  0 +0 +1 +1 +1 +1 +{size} +{TS} +{TS}$", out, re.M), out


def test_the_lso_column_stops_at_an_open_transaction(tmp_path):
    with Log.open(tmp_path / "root" / "t-0") as log:
        log.append([b"a", b"b"])
        log.append([b"c"], producer_id=7, producer_epoch=0, base_sequence=0, is_transactional=True)
        log.append([b"d"])
        log.high_watermark = log.log_end_offset
    row = json.loads(pylog("describe", tmp_path / "root", "--json").stdout)[0]
    assert (row["log_end_offset"], row["high_watermark"], row["last_stable_offset"]) == (4, 4, 2)


def test_consecutive_partitions_that_read_alike_share_a_row_of_the_table_not_of_the_json(tmp_path):
    with LogManager(tmp_path / "root") as m:
        m.create_topic("events", 6)
        m.log("events", 2).append([Record(b"e", timestamp=TS)])
    out = pylog("describe", tmp_path / "root", "--raw").stdout.decode()
    assert re.findall(r"^  (\S+) +0 +(\d) ", out, re.M) == [("0-1", "0"), ("2", "1"), ("3-5", "0")]
    assert "PartitionCount: 6" in out
    rows = json.loads(pylog("describe", tmp_path / "root", "--json").stdout)
    assert [row["partition"] for row in rows] == [0, 1, 2, 3, 4, 5]


def test_topic_and_exclude_internal_topics_choose_the_topics_shown(tmp_path):
    root = _log_dir(tmp_path / "root")
    with LogManager(root) as m:
        m.create_topic("__consumer_offsets", 3, {"cleanup_policy": "compact"})

    def topics(*options):
        r = pylog("describe", root, "--json", *options)
        assert r.returncode == 0, r.stderr
        return sorted({row["topic"] for row in json.loads(r.stdout)})

    assert topics() == ["__consumer_offsets", "events", "orders"]
    assert topics("--exclude-internal-topics") == ["events", "orders"]
    assert topics("--topic", "ord.*") == ["orders"]
    r = pylog("describe", root, "--topic", "ord")  # the whole name, as kafka-topics.sh matches it
    assert r.returncode == 1 and f"no topic of {root} matches --topic 'ord'" in r.stderr.decode()
    r = pylog("describe", root, "--topic", "(")
    assert r.returncode == 1 and "--topic '(' is not a regular expression" in r.stderr.decode()


def test_a_corrupt_batch_empties_the_columns_it_stands_in_and_is_told_on_stderr(tmp_path):
    """A damaged first batch: the oldest timestamp needs it, nothing else does. describe
    used to fail whole; it now shows the partition, leaves that column empty and says
    where the damage is. Batches past the first are not read at all. A batch follows the
    damaged one: a damaged last batch under the clean-shutdown marker is a torn tail,
    where reading stops (tests/log/test_torn_tail.py)."""
    root = _log_dir(tmp_path / "root")
    with LogManager(root) as m:
        m.log("orders", 0).append([Record(b"w", timestamp=TS + 5)])
    segment = root / "orders-0" / "00000000000000000000.log"
    data = bytearray(segment.read_bytes())
    data[70] ^= 0xFF  # inside the first batch's records
    segment.write_bytes(bytes(data))
    r = pylog("describe", root, "--json")
    assert r.returncode == 0, r.stderr
    rows = {(row["topic"], row["partition"]): row for row in json.loads(r.stdout)}
    assert rows[("orders", 0)]["oldest_timestamp"] is None and rows[("orders", 0)]["log_end_offset"] == 4
    assert rows[("orders", 1)]["oldest_timestamp"] == TS + 1
    err = r.stderr.decode()
    assert err.count("\n") == 1 and "orders-0: record batch is corrupt" in err and "position 0" in err


def test_a_directory_without_partitions_is_a_one_line_error(tmp_path):
    (tmp_path / "empty" / "not-a-partition").mkdir(parents=True)
    r = pylog("describe", tmp_path / "empty")
    assert r.returncode == 1 and r.stdout == b""
    err = r.stderr.decode()
    assert err.count("\n") == 1 and "holds no partitions" in err and str(tmp_path / "empty") in err


@needs_samples
def test_a_kafka_partition_directory_is_described_read_only():
    part = [p for p in sample_partitions() if p.name == "orders-0"][0]
    before = {f.name: f.stat().st_mtime_ns for f in part.iterdir()}
    row = json.loads(pylog("describe", part, "--json").stdout)[0]
    with Log.open(part, read_only=True) as log:
        assert row["log_end_offset"] == log.log_end_offset and row["bytes"] == log.size_bytes
    assert {f.name: f.stat().st_mtime_ns for f in part.iterdir()} == before


def test_a_replica_set_root_is_not_taken_for_a_topic_named_broker(tmp_path):
    """A ReplicaSet's root holds one log dir per replica (``broker-<id>``): names that read
    like partitions of a topic "broker", which they are not."""
    from pylog.replication import ReplicaSet
    with ReplicaSet(tmp_path / "rs", "orders-0", replicas=2, fetchers=False) as rs:
        rs.append([b"a", b"b"])
        rs.replicate()
    with LogManager(tmp_path / "rs", read_only=True) as m:
        assert m.topics() == []
    r = pylog("describe", tmp_path / "rs")
    assert r.returncode == 1 and r.stdout == b""
    assert "log dirs broker-0, broker-1 of a replica set: describe one of them" in r.stderr.decode()
    r = pylog("verify", tmp_path / "rs")  # not "0 partition(s) checked, 0 problem(s)": nothing was
    assert r.returncode == 1 and "holds no partitions" in r.stderr.decode()
    assert pylog("verify", tmp_path / "rs" / "broker-0").returncode == 0
    rows = json.loads(pylog("describe", tmp_path / "rs" / "broker-1", "--json").stdout)
    assert [(row["topic"], row["partition"], row["log_end_offset"]) for row in rows] == [("orders", 0, 2)]


def test_a_replica_log_dir_is_recognised_before_its_first_checkpoint(tmp_path):
    """A replica that crashed before writing any checkpoint leaves a log dir holding only its
    partition directory: still a log dir, not a partition of a topic "broker"."""
    with Log.open(tmp_path / "rs" / "broker-0" / "orders-0") as log:
        log.append([b"a"])
    for f in (tmp_path / "rs" / "broker-0").iterdir():
        if f.is_file():
            f.unlink()
    with LogManager(tmp_path / "rs", read_only=True) as m:
        assert m.topics() == []
    with LogManager(tmp_path / "plain", read_only=False) as m:
        m.create_topic("orders", 2)
        m.log("orders", 1).append([b"a"])
    for f in (tmp_path / "plain").iterdir():  # a root before its first checkpoint: partitions still found
        if f.is_file():
            f.unlink()
    with LogManager(tmp_path / "plain", read_only=True) as m:
        assert m.partitions("orders") == [0, 1]
