"""``pylog topics``, ``pylog configs``, ``pylog get-offsets`` and ``pylog delete-records``:
Kafka's options and output, through the real ``pylog`` console script; bad input changes
nothing."""

from __future__ import annotations

import json
import re

import pytest

from pylog import Log, LogManager, Record
from pylog.checkpoint import read_partition_metadata
from tests.cli.test_console_tools import PYLOG, console, ok, one_line_error

pytestmark = pytest.mark.skipif(PYLOG is None, reason="the pylog console script is not installed (pip install -e .)")

DESCRIBE_TOPIC = re.compile(r"^Topic: orders\tTopicId: ([A-Za-z0-9_-]{22})\tPartitionCount: 3\tReplicationFactor: 1"
                            r"\tConfigs: cleanup.policy=compact,segment.bytes=100000$")


def _tree(root) -> dict:
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()
            and p.name != ".lock"}


def test_create_list_describe_as_kafka_topics(tmp_path):
    root = tmp_path / "root"
    assert ok("topics", root, "--create", "--topic", "orders", "--partitions", "3", "--config",
              "cleanup.policy=compact", "--config", "segment.bytes=100000") == "Created topic orders.\n"
    ok("topics", root, "--create", "--topic", "audit")
    assert ok("topics", root, "--list") == "audit\norders\n"
    lines = ok("topics", root, "--describe", "--topic", "ord.*").splitlines()
    topic_id = DESCRIBE_TOPIC.match(lines[0])[1]
    assert lines[1:] == [f"\tTopic: orders\tPartition: {p}\tLeader: 0\tReplicas: 0\tIsr: 0\tElr: N/A\t"
                         "LastKnownElr: N/A" for p in range(3)]
    assert read_partition_metadata(root / "orders-2" / "partition.metadata")["topic_id"] == topic_id
    with LogManager(root, read_only=True) as m:
        assert m.topic_config("orders").segment_bytes == 100000 and m.topic_config("orders").compact
    err = one_line_error("topics", root, "--create", "--topic", "orders")
    assert "already exists" in err
    ok("topics", root, "--create", "--topic", "orders", "--if-not-exists")


def test_describe_filters_keep_what_kafkas_keep_on_a_one_replica_log_dir(tmp_path):
    """One replica a partition, led by the log dir and in sync: nothing is under-replicated,
    unavailable or under min ISR; every partition is at Kafka's default minimum ISR of 1;
    --topics-with-overrides prints the topic lines of topics with settings of their own."""
    root = tmp_path / "root"
    ok("topics", root, "--create", "--topic", "plain")
    ok("topics", root, "--create", "--topic", "tuned", "--partitions", "2", "--config", "retention.ms=1000")
    overrides = ok("topics", root, "--describe", "--topics-with-overrides").splitlines()
    assert len(overrides) == 1 and overrides[0].startswith("Topic: tuned\t")
    for flag in ("--under-replicated-partitions", "--unavailable-partitions", "--under-min-isr-partitions"):
        assert ok("topics", root, "--describe", flag) == ""
    at_min = ok("topics", root, "--describe", "--at-min-isr-partitions").splitlines()
    assert [line.split("\t")[1:3] for line in at_min] == [["Topic: plain", "Partition: 0"],
                                                          ["Topic: tuned", "Partition: 0"],
                                                          ["Topic: tuned", "Partition: 1"]]


def test_alter_only_grows_and_keeps_the_topic_id(tmp_path):
    root = tmp_path / "root"
    ok("topics", root, "--create", "--topic", "t", "--partitions", "2")
    before = _tree(root)
    assert "can only be increased" in one_line_error("topics", root, "--alter", "--topic", "t", "--partitions", "2")
    assert _tree(root) == before
    ok("topics", root, "--alter", "--topic", "t", "--partitions", "4")
    with LogManager(root, read_only=True) as m:
        assert m.partitions("t") == [0, 1, 2, 3]
    ids = {read_partition_metadata(root / f"t-{p}" / "partition.metadata")["topic_id"] for p in range(4)}
    assert len(ids) == 1


def test_delete_removes_the_topic_and_a_new_one_of_that_name_starts_at_zero(tmp_path):
    root = tmp_path / "root"
    with LogManager(root) as m:
        t = m.create_topic("t", 2, {"retention_ms": 1000})
        t.append([b"x"] * 10, partition=0)
        m.log("t", 0).delete_records(6)
        m.create_topic("other", 1)
    ok("topics", root, "--delete", "--topic", "t")
    assert ok("topics", root, "--list") == "other\n"
    assert not any(line.startswith("t ") for f in ("log-start-offset-checkpoint", "recovery-point-offset-checkpoint")
                   for line in (root / f).read_text().splitlines())
    ok("topics", root, "--create", "--topic", "t")
    with LogManager(root, read_only=True) as m:
        assert m.log("t", 0).log_start_offset == 0 and m.topic_config("t").retention_ms == 604800000


def test_delete_is_refused_while_a_writer_holds_the_topic(tmp_path):
    root = tmp_path / "root"
    with LogManager(root) as m:
        m.create_topic("t", 2)
    with Log.open(root / "t-1") as writer:
        writer.append([b"busy"])
        before = _tree(root)
        assert "lock" in one_line_error("topics", root, "--delete", "--topic", "t").lower()
        assert _tree(root) == before


@pytest.mark.parametrize("topic", ["__consumer_offsets", "__transaction_state", ".*"])
def test_delete_refuses_kafkas_internal_topics_and_deletes_nothing(tmp_path, topic):
    """Deleting __consumer_offsets loses every group's offsets, __transaction_state every
    transactional id: refused as kafka-topics.sh refuses it, a pattern matching one too."""
    root = tmp_path / "root"
    with LogManager(root) as m:
        m.create_topic("t", 1)
        m.create_topic("__consumer_offsets", 2)
        m.create_topic("__transaction_state", 2)
    before = _tree(root)
    err = one_line_error("topics", root, "--delete", "--topic", topic)
    assert "is a kafka internal topic and is not allowed to be marked for deletion" in err, err
    assert _tree(root) == before


def test_delete_of_a_pattern_leaves_internal_topics_out_when_told(tmp_path):
    root = tmp_path / "root"
    with LogManager(root) as m:
        m.create_topic("t", 1)
        m.create_topic("__consumer_offsets", 2)
    ok("topics", root, "--delete", "--topic", ".*", "--exclude-internal-topics")
    assert ok("topics", root, "--list") == "__consumer_offsets\n"


def _offsets_topic(root):
    with LogManager(root) as m:
        t = m.create_topic("t", 12)
        for p in (0, 1, 10):
            t.append([Record(b"v", timestamp=1000 * (i + 1)) for i in range(p + 2)], partition=p)


def test_configs_describes_and_alters_a_topics_settings_as_kafka_configs(tmp_path):
    root = tmp_path / "root"
    ok("topics", root, "--create", "--topic", "events", "--config", "retention.ms=86400000")
    assert ok("configs", root, "--describe", "--topic", "events") == (
        "Dynamic configs for topic events are:\n"
        "  retention.ms=86400000 sensitive=false synonyms={DYNAMIC_TOPIC_CONFIG:retention.ms=86400000}\n")
    assert ok("configs", root, "--alter", "--entity-type", "topics", "--entity-name", "events", "--add-config",
              "cleanup.policy=[compact,delete],segment.bytes=1048576", "--delete-config",
              "retention.ms") == "Completed updating config for topic events.\n"
    assert ok("configs", root, "--describe", "--topic", "events").splitlines()[1:] == [
        "  cleanup.policy=compact,delete sensitive=false synonyms={DYNAMIC_TOPIC_CONFIG:cleanup.policy=compact,delete}",
        "  segment.bytes=1048576 sensitive=false synonyms={DYNAMIC_TOPIC_CONFIG:segment.bytes=1048576}"]
    every = ok("configs", root, "--describe", "--topic", "events", "--all").splitlines()
    assert every[0] == "All configs for topic events are:"
    assert "  retention.ms=604800000 sensitive=false synonyms={DEFAULT_CONFIG:retention.ms=604800000}" in every
    assert re.search(r"\tConfigs: cleanup.policy=compact,delete,segment.bytes=1048576$",
                     ok("topics", root, "--describe"), re.M)
    with LogManager(root) as m:  # a log opened from now on takes them
        config = m.log("events", 0).config
        assert (config.cleanup_policy, config.segment_bytes, config.retention_ms) == ("compact,delete", 1048576,
                                                                                    604_800_000)


@pytest.mark.parametrize("args, message", [
    (["--topic", "nope", "--add-config", "retention.ms=1"], "topic 'nope' does not exist"),
    (["--topic", "events", "--add-config", "retention.mss=1"], "unknown topic setting 'retention.mss'"),
    (["--topic", "events", "--add-config", "retention.ms=5,segment.bytes=1"], "segment.bytes=1: "),
    (["--topic", "events", "--add-config", "segment.bytes=big"], "segment.bytes = 'big' is not a valid int"),
    (["--topic", "events", "--add-config", "retention.ms"], "'retention.ms' is not K=V"),
    (["--topic", "events", "--delete-config", "retention.ms,bogus"], "unknown topic setting(s) bogus"),
    (["--topic", "events", "--add-config", "retention.ms=5", "--delete-config", "retention.ms"],
     "retention.ms both added and deleted"),
    (["--topic", "events"], "--alter needs --add-config or --delete-config"),
    (["--add-config", "retention.ms=5"], "--alter needs --topic"),
])
def test_a_bad_config_alteration_is_one_line_and_changes_nothing(tmp_path, args, message):
    root = tmp_path / "root"
    ok("topics", root, "--create", "--topic", "events", "--config", "retention.ms=86400000")
    before = (root / "topic-configs.json").read_bytes()
    assert message in one_line_error("configs", root, "--alter", *args)
    assert (root / "topic-configs.json").read_bytes() == before


def test_get_offsets_prints_kafkas_lines_in_kafkas_order(tmp_path):
    root = tmp_path / "root"
    _offsets_topic(root)
    latest = ok("get-offsets", root, "--topic", "t", "--partitions", "0,1,10,2").splitlines()
    assert latest == ["t:0:2", "t:1:3", "t:10:12", "t:2:0"]  # sorted as "t-10" < "t-2", as Kafka sorts
    assert ok("get-offsets", root, "--topic", "t", "--partitions", "10", "--time", "-2") == "t:10:0\n"
    assert ok("get-offsets", root, "--partitions", "0,1,10", "--time", "2500") == "t:1:2\nt:10:2\n"  # p0 has none
    assert ok("get-offsets", root, "--partitions", "10", "--time", "max-timestamp") == "t:10:11\n"
    assert len(ok("get-offsets", root).splitlines()) == 12
    assert "no topic-partition" in one_line_error("get-offsets", root, "--topic", "nope")
    assert "--time" in one_line_error("get-offsets", root, "--time", "yesterday")


def test_get_offsets_max_timestamp_names_the_largest_timestamps_offset_below_the_log_start_as_kafka(tmp_path):
    """Kafka's ListOffsets for max-timestamp looks only at the segments: the first record
    with the largest timestamp, even where delete_records moved the log start past it."""
    root = tmp_path / "root"
    with LogManager(root) as m:
        t = m.create_topic("t", 2)
        t.append([Record(b"v", timestamp=ts) for ts in (300, 100, 200)], partition=0)
        for ts in (100, 200, 300, 300, 250):
            t.append([Record(b"v", timestamp=ts)], partition=1)
        assert t.log(0).delete_records(1) == 1 and t.log(1).delete_records(3) == 3
    assert ok("get-offsets", root, "--time", "-3") == "t:0:0\nt:1:2\n"
    assert ok("get-offsets", root, "--time", "-2") == "t:0:1\nt:1:3\n"


def test_get_offsets_leaves_out_krafts_metadata_log_as_kafka_does(tmp_path):
    """A broker's log dir holds __cluster_metadata-0, KRaft's log: no topic Kafka's tool lists."""
    root = tmp_path / "root"
    with LogManager(root) as m:
        m.create_topic("t", 1).append([b"v"], partition=0)
        m.create_topic("__cluster_metadata", 1).append([b"record"], partition=0)
    assert ok("get-offsets", root) == "t:0:1\n"
    assert "no topic-partition" in one_line_error("get-offsets", root, "--topic", "__cluster_metadata")


def test_get_offsets_takes_kafkas_topic_partition_patterns_and_tiered_times(tmp_path):
    root = tmp_path / "root"
    _offsets_topic(root)
    ok("topics", root, "--create", "--topic", "u", "--partitions", "3")
    assert ok("get-offsets", root, "--topic-partitions", "t:1-3,u:2") == "t:1:3\nt:2:0\nu:2:0\n"
    assert ok("get-offsets", root, "--topic-partitions", "t:10-,:-1") == "t:0:2\nt:10:12\nt:11:0\nu:0:0\n"
    assert ok("get-offsets", root, "--topic-partitions", "t:10", "--time", "earliest-local") == "t:10:0\n"
    assert ok("get-offsets", root, "--topic-partitions", "t:10", "--time", "-5") == ""  # nothing is tiered
    assert "cannot be used with --topic" in one_line_error("get-offsets", root, "--topic-partitions", "t",
                                                           "--topic", "t")
    assert "'t:x' is not" in one_line_error("get-offsets", root, "--topic-partitions", "t:x")


def test_delete_records_prints_the_new_low_watermarks(tmp_path):
    root = tmp_path / "root"
    _offsets_topic(root)
    spec = tmp_path / "offsets.json"
    spec.write_text(json.dumps({"partitions": [{"topic": "t", "partition": 10, "offset": 5},
                                               {"topic": "t", "partition": 1, "offset": -1}], "version": 1}))
    assert ok("delete-records", root, "--offset-json-file", spec).splitlines() == [
        "Executing records delete operation", "Records delete operation completed:",
        "partition: t-10\tlow_watermark: 5", "partition: t-1\tlow_watermark: 3"]
    assert ok("get-offsets", root, "--partitions", "1,10", "--time", "earliest") == "t:1:3\nt:10:5\n"


@pytest.mark.parametrize("content, message", [
    ("{not json", "is not valid JSON"),
    ('{"partitions": [{"topic": "t", "partition": 0, "offset": 1}], "version": 2}', "version 2"),
    ('{"partitions": [{"topic": "t", "partition": "0", "offset": 1}]}', "partitions[0]"),
    ('{"partitions": [{"topic": "t", "partition": 0, "offset": 1}, {"topic": "t", "partition": 0, "offset": 2}]}',
     "duplicate topic partitions: t-0"),
    ('{"partitions": [{"topic": "t", "partition": 0, "offset": 1}, {"topic": "t", "partition": 99, "offset": 1}]}',
     "no partition t-99"),
    ('{"partitions": [{"topic": "t", "partition": 0, "offset": 1}, {"topic": "t", "partition": 1, "offset": 4}]}',
     "past the high watermark 3"),
])
def test_a_bad_offset_file_is_one_line_and_deletes_nothing(tmp_path, content, message):
    root = tmp_path / "root"
    _offsets_topic(root)
    before = _tree(root)
    spec = tmp_path / "offsets.json"
    spec.write_text(content)
    assert message in one_line_error("delete-records", root, "--offset-json-file", spec)
    assert _tree(root) == before
