"""The admin APIs of ``pylog serve`` through confluent-kafka's ``AdminClient`` and
kafka-python's ``KafkaAdminClient``: each change is checked on disk through pylog's
LogManager and Log, and each bad input is answered with Kafka's error code and leaves every
file as it was."""

from __future__ import annotations

import base64
import os
import socket
import uuid

import kafka.errors as kafka_errors
import pytest
from kafka import TopicPartition as KafkaTopicPartition
from kafka.admin import ConfigResource as KafkaConfigResource
from kafka.admin import ConfigResourceType, KafkaAdminClient
from kafka.admin import NewTopic as KafkaNewTopic
from kafka.protocol.admin.cluster import DescribeClusterRequest, DescribeClusterResponse
from kafka.protocol.admin.configs import DescribeConfigsRequest, DescribeConfigsResponse
from kafka.protocol.metadata import MetadataRequest, MetadataResponse

from pylog.checkpoint import read_partition_metadata
from pylog.config import LogConfig
from pylog.manager import LogManager
from pylog.partition_dir import topic_id_of
from pylog.serve import Server
from pylog.serve.topic_ids import topic_uuid
from tests.serve.conftest import file_digests, held_log, read_frame, request_frame

confluent_kafka = pytest.importorskip("confluent_kafka")
from confluent_kafka import TopicCollection, TopicPartition  # noqa: E402
from confluent_kafka.admin import (  # noqa: E402
    AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource, ConfigSource, NewPartitions, NewTopic,
)

TIMEOUT_S = 60
#: Kafka's error codes the tests expect
UNKNOWN_TOPIC_OR_PARTITION, INVALID_REQUEST, UNKNOWN_TOPIC_ID = 3, 42, 100


@pytest.fixture
def admin(pylog_server):
    """confluent-kafka's AdminClient on the server."""
    return AdminClient({"bootstrap.servers": pylog_server.bootstrap_servers})


@pytest.fixture
def kafka_admin(pylog_server):
    """kafka-python's KafkaAdminClient on the server, closed after the test."""
    client = KafkaAdminClient(bootstrap_servers=pylog_server.bootstrap_servers, request_timeout_ms=TIMEOUT_S * 1000)
    yield client
    client.close()


def results(futures: dict) -> dict:
    """Each future's result, or the KafkaError it failed with (confluent-kafka)."""
    out = {}
    for key, future in futures.items():
        try:
            out[key] = future.result(TIMEOUT_S)
        except confluent_kafka.KafkaException as e:
            out[key] = e.args[0]
    return out


def produce(server, topic: str, value: bytes, partition: int = 0) -> None:
    """One record through confluent-kafka's producer, delivered."""
    producer = confluent_kafka.Producer({"bootstrap.servers": server.bootstrap_servers})
    producer.produce(topic, value=value, partition=partition)
    assert producer.flush(TIMEOUT_S) == 0


def raw_request(server, request, version: int, response_class):
    """``request`` sent on a socket of its own at ``version``; the decoded answer."""
    with socket.create_connection(server.address, timeout=TIMEOUT_S) as sock:
        sock.sendall(request_frame(request, version))
        frame = read_frame(sock)
    return response_class.decode(frame, version=version, header=True)


# -- DescribeConfigs ----------------------------------------------------------------------


def test_describe_configs_gives_a_topic_s_settings_with_kafka_s_names_values_and_sources(pylog_server, admin):
    with LogManager(pylog_server.root) as manager:
        manager.create_topic("described", partitions=1, config={"retention_ms": 1000, "cleanup_policy": "compact"})
    got = results(admin.describe_configs([ConfigResource("topic", "described")]))
    entries = next(iter(got.values()))
    assert set(entries) == set(LogConfig().to_kafka())
    assert (entries["retention.ms"].value, entries["retention.ms"].source) == \
        ("1000", ConfigSource.DYNAMIC_TOPIC_CONFIG.value)
    assert (entries["cleanup.policy"].value, entries["cleanup.policy"].source) == \
        ("compact", ConfigSource.DYNAMIC_TOPIC_CONFIG.value)
    assert (entries["segment.bytes"].value, entries["segment.bytes"].source) == \
        (str(LogConfig().segment_bytes), ConfigSource.DEFAULT_CONFIG.value)
    assert not entries["retention.ms"].is_read_only


def test_describe_configs_gives_this_broker_s_settings_read_only(pylog_server, admin):
    got = results(admin.describe_configs([ConfigResource("broker", "0")]))
    entries = next(iter(got.values()))
    assert entries["num.partitions"].value == "1" and entries["auto.create.topics.enable"].value == "true"
    assert entries["num.partitions"].source == ConfigSource.DEFAULT_CONFIG.value
    assert all(e.is_read_only for e in entries.values())


def test_describe_configs_through_kafka_python_with_synonyms(pylog_server, kafka_admin):
    with LogManager(pylog_server.root) as manager:
        manager.create_topic("synonyms", partitions=1, config={"retention_ms": 2000})
    got = kafka_admin.describe_configs([KafkaConfigResource(ConfigResourceType.TOPIC, "synonyms")],
                                       include_synonyms=True, config_filter="all")
    entries = got["topic"]["synonyms"]
    assert entries["retention.ms"]["value"] == "2000"
    assert entries["retention.ms"]["config_source"] == "DYNAMIC_TOPIC_CONFIG"
    assert [(s["value"], s["source"]) for s in entries["retention.ms"]["synonyms"]] == [
        ("2000", "DYNAMIC_TOPIC_CONFIG"), (str(LogConfig().retention_ms), "DEFAULT_CONFIG")]
    assert entries["segment.bytes"]["config_type"] == "INT" and entries["retention.ms"]["config_type"] == "LONG"
    assert entries["cleanup.policy"]["config_type"] == "LIST"


def test_describe_configs_of_an_unknown_topic_or_another_broker_is_an_error_and_writes_nothing(pylog_server, admin):
    with LogManager(pylog_server.root) as manager:
        manager.create_topic("kept", partitions=1)
    before = file_digests(pylog_server.root)
    got = results(admin.describe_configs([ConfigResource("topic", "absent")]))
    assert next(iter(got.values())).code() == confluent_kafka.KafkaError.UNKNOWN_TOPIC_OR_PART
    Resource = DescribeConfigsRequest.DescribeConfigsResource
    answer = raw_request(pylog_server, DescribeConfigsRequest(
        resources=[Resource(resource_type=4, resource_name="7", configuration_keys=None),
                   Resource(resource_type=8, resource_name="0", configuration_keys=None),
                   Resource(resource_type=2, resource_name="bad/name", configuration_keys=None),
                   Resource(resource_type=2, resource_name="kept", configuration_keys=["retention.ms", "nope"])],
        include_synonyms=False), 4, DescribeConfigsResponse)
    assert [r.error_code for r in answer.results] == [INVALID_REQUEST, INVALID_REQUEST, 17, 0]
    assert [c.name for c in answer.results[3].configs] == ["retention.ms"]
    assert file_digests(pylog_server.root) == before


# -- CreateTopics -------------------------------------------------------------------------


def test_create_topics_makes_the_partitions_and_records_the_settings_on_disk(pylog_server, admin):
    got = results(admin.create_topics([
        NewTopic("created", num_partitions=3, replication_factor=1,
                 config={"retention.ms": "5000", "cleanup.policy": "compact"}),
        NewTopic("defaulted"),  # -1 and -1: the server's num.partitions and the one replica
        NewTopic("assigned", num_partitions=2, replica_assignment=[[0], [0]])]))
    assert got == {"created": None, "defaulted": None, "assigned": None}
    with LogManager(pylog_server.root, read_only=True) as manager:
        assert manager.partitions("created") == [0, 1, 2]
        assert manager.topic_overrides("created") == {"retention_ms": 5000, "cleanup_policy": "compact"}
        assert manager.partitions("defaulted") == [0] and manager.topic_overrides("defaulted") == {}
        assert manager.partitions("assigned") == [0, 1]
        assert topic_id_of(manager, "created") is not None
    produce(pylog_server, "created", b"v", partition=2)
    with LogManager(pylog_server.root, read_only=True) as manager:
        assert [r.value for r in manager.log("created", 2).records()] == [b"v"]


def test_create_topics_validate_only_checks_and_writes_nothing(pylog_server, admin):
    before = file_digests(pylog_server.root)
    got = results(admin.create_topics([NewTopic("checked", 2, 1, config={"retention.ms": "1"}),
                                       NewTopic("refused", 2, 1, config={"retention.ms": "soon"})],
                                      validate_only=True))
    assert got["checked"] is None and got["refused"].code() == confluent_kafka.KafkaError.INVALID_CONFIG
    assert file_digests(pylog_server.root) == before


def test_create_topics_answers_kafka_s_error_for_each_bad_topic_and_writes_nothing(pylog_server, admin):
    with LogManager(pylog_server.root) as manager:
        manager.create_topic("existing", partitions=2)
    before = file_digests(pylog_server.root)
    got = results(admin.create_topics([
        NewTopic("existing", 2, 1),
        NewTopic("replicated", 1, 3),
        NewTopic("no-partitions", 0, 1),
        NewTopic("bad-value", 1, 1, config={"segment.bytes": "big"}),
        NewTopic("too-small", 1, 1, config={"segment.bytes": "1"}),
        NewTopic("unknown-setting", 1, 1, config={"retention.forever": "true"}),
        NewTopic("elsewhere", num_partitions=1, replica_assignment=[[1]]),
        NewTopic("bad*name", 1, 1)]))
    KafkaError = confluent_kafka.KafkaError
    assert {name: error.code() for name, error in got.items()} == {
        "existing": KafkaError.TOPIC_ALREADY_EXISTS, "replicated": KafkaError.INVALID_REPLICATION_FACTOR,
        "no-partitions": KafkaError.INVALID_PARTITIONS, "bad-value": KafkaError.INVALID_CONFIG,
        "too-small": KafkaError.INVALID_CONFIG, "unknown-setting": KafkaError.INVALID_CONFIG,
        "elsewhere": KafkaError.INVALID_REPLICA_ASSIGNMENT, "bad*name": KafkaError.TOPIC_EXCEPTION}
    assert "only 1 broker(s)" in got["replicated"].str() and "segment.bytes" in got["too-small"].str()
    assert file_digests(pylog_server.root) == before


def test_create_topics_through_kafka_python_answers_the_id_and_the_settings(pylog_server, kafka_admin):
    answer = kafka_admin.create_topics([KafkaNewTopic("kp", 2, 1, topic_configs={"retention.ms": "7000"})])
    (created,) = answer["topics"]
    assert (created["error_code"], created["num_partitions"], created["replication_factor"]) == (0, 2, 1)
    assert created["configs"]["retention.ms"] == {"value": "7000", "read_only": False,
                                                  "config_source": "DYNAMIC_TOPIC_CONFIG", "is_sensitive": False}
    with LogManager(pylog_server.root, read_only=True) as manager:
        assert manager.partitions("kp") == [0, 1] and manager.topic_overrides("kp") == {"retention_ms": 7000}
        assert str(topic_uuid(topic_id_of(manager, "kp"))) == created["topic_id"]
    before = file_digests(pylog_server.root)
    with pytest.raises(kafka_errors.TopicAlreadyExistsError):
        kafka_admin.create_topics([KafkaNewTopic("kp", 2, 1)])
    with pytest.raises(kafka_errors.InvalidConfigurationError, match="retention.ms"):
        kafka_admin.create_topics([KafkaNewTopic("kp2", 1, 1, topic_configs={"retention.ms": "-7"})])
    assert file_digests(pylog_server.root) == before


# -- Topic ids in Metadata ---------------------------------------------------------------


def metadata(server, topics, version: int = 12):
    """A Metadata request at ``version`` for ``topics`` (``MetadataRequestTopic``s, None: all)."""
    request = MetadataRequest(topics=topics, allow_auto_topic_creation=False,
                              include_topic_authorized_operations=False)
    return raw_request(server, request, version, MetadataResponse)


def test_metadata_gives_each_topic_the_id_create_topics_gave_it(pylog_server, admin):
    results(admin.create_topics([NewTopic("with-id", 2)]))
    with LogManager(pylog_server.root, read_only=True) as manager:
        written = topic_uuid(topic_id_of(manager, "with-id"))
    assert written != uuid.UUID(int=0)
    answer = metadata(pylog_server, None)
    assert [(t.name, t.topic_id, t.error_code) for t in answer.topics] == [("with-id", written, 0)]
    described = results(admin.describe_topics(TopicCollection(["with-id"])))["with-id"]
    assert str(described.topic_id) == base64.b64encode(written.bytes).decode().rstrip("=")  # librdkafka: standard base64


def test_metadata_finds_a_topic_by_its_id_and_answers_an_unknown_id_unknown(pylog_server, admin):
    results(admin.create_topics([NewTopic("found", 3)]))
    with LogManager(pylog_server.root, read_only=True) as manager:
        topic_id = topic_uuid(topic_id_of(manager, "found"))
    stranger = uuid.uuid4()
    answer = metadata(pylog_server, [MetadataRequest.MetadataRequestTopic(name=None, topic_id=topic_id),
                                     MetadataRequest.MetadataRequestTopic(name=None, topic_id=stranger)])
    found, unknown = answer.topics
    assert (found.name, found.topic_id, found.error_code, len(found.partitions)) == ("found", topic_id, 0, 3)
    assert (unknown.name, unknown.topic_id, unknown.error_code, unknown.partitions) == (
        None, stranger, UNKNOWN_TOPIC_ID, [])
    assert not os.path.exists(os.path.join(pylog_server.root, f"{stranger}-0"))


def test_a_topic_metadata_creates_gets_an_id_and_one_made_without_the_server_has_none(pylog_server):
    with LogManager(pylog_server.root) as manager:
        manager.create_topic("made-apart", 1)
    produce(pylog_server, "auto-made", b"first")  # Metadata creates it (auto.create.topics.enable)
    with LogManager(pylog_server.root, read_only=True) as manager:
        auto_id = topic_id_of(manager, "auto-made")
        assert auto_id is not None and topic_id_of(manager, "made-apart") is None
        assert read_partition_metadata(os.path.join(pylog_server.root, "auto-made-0", "partition.metadata")) == {
            "version": "0", "topic_id": auto_id}
    ids = {t.name: t.topic_id for t in metadata(pylog_server, None).topics}
    assert ids == {"auto-made": topic_uuid(auto_id), "made-apart": None}  # the zero UUID, as kafka-python decodes it
    assert [t.name for t in metadata(pylog_server, None, version=9).topics] == ["auto-made", "made-apart"]


# -- DeleteTopics -------------------------------------------------------------------------


def test_delete_topics_removes_the_partitions_and_the_settings(pylog_server, admin, kafka_admin):
    with LogManager(pylog_server.root) as manager:
        manager.create_topic("doomed", partitions=2, config={"retention_ms": 1000}).append([b"gone"], partition=0)
        manager.create_topic("doomed-too", partitions=1)
        manager.create_topic("kept", partitions=1)
    produce(pylog_server, "doomed", b"served")  # the server holds the log open
    assert results(admin.delete_topics(["doomed"])) == {"doomed": None}
    answer = kafka_admin.delete_topics(["doomed-too"])
    assert [(r["name"], r["error_code"]) for r in answer["topics"]] == [("doomed-too", 0)]
    with LogManager(pylog_server.root, read_only=True) as manager:
        assert manager.topics() == ["kept"]
        assert manager.metadata.all_overrides().get("doomed") is None
    assert sorted(n for n in os.listdir(pylog_server.root) if n.startswith("doomed")) == []
    assert results(admin.create_topics([NewTopic("doomed", 1, 1)])) == {"doomed": None}
    produce(pylog_server, "doomed", b"reborn")
    with LogManager(pylog_server.root, read_only=True) as manager:
        assert [(r.offset, r.value) for r in manager.log("doomed", 0).records()] == [(0, b"reborn")]


def test_delete_topics_by_topic_id(pylog_server, kafka_admin):
    kafka_admin.create_topics([KafkaNewTopic("by-id", 1, 1)])
    with LogManager(pylog_server.root, read_only=True) as manager:
        topic_id = topic_uuid(topic_id_of(manager, "by-id"))
    answer = kafka_admin.delete_topics([topic_id])
    assert [(r["name"], r["topic_id"], r["error_code"]) for r in answer["topics"]] == [("by-id", str(topic_id), 0)]
    with LogManager(pylog_server.root, read_only=True) as manager:
        assert manager.topics() == []


def test_deleting_a_topic_that_is_not_there_or_is_internal_is_refused_and_writes_nothing(pylog_server, admin,
                                                                                         kafka_admin):
    with LogManager(pylog_server.root) as manager:
        manager.create_topic("__consumer_offsets", partitions=1)
    before = file_digests(pylog_server.root)
    got = results(admin.delete_topics(["absent", "__consumer_offsets"]))
    assert got["absent"].code() == confluent_kafka.KafkaError.UNKNOWN_TOPIC_OR_PART
    assert got["__consumer_offsets"].code() == confluent_kafka.KafkaError.INVALID_REQUEST
    answer = kafka_admin.delete_topics([uuid.uuid4()], raise_errors=False)
    assert [r["error_code"] for r in answer["topics"]] == [UNKNOWN_TOPIC_ID]
    assert file_digests(pylog_server.root) == before


# -- CreatePartitions ---------------------------------------------------------------------


def test_create_partitions_grows_a_topic_keeping_its_id_and_records(pylog_server, admin, kafka_admin):
    kafka_admin.create_topics([KafkaNewTopic("growing", 1, 1)])
    produce(pylog_server, "growing", b"first")
    assert results(admin.create_partitions([NewPartitions("growing", 3)])) == {"growing": None}
    kafka_admin.create_partitions({"growing": 5})
    with LogManager(pylog_server.root, read_only=True) as manager:
        assert manager.partitions("growing") == [0, 1, 2, 3, 4]
        assert [r.value for r in manager.log("growing", 0).records()] == [b"first"]
        ids = {read_partition_metadata(os.path.join(pylog_server.root, f"growing-{p}", "partition.metadata"))
               ["topic_id"] for p in range(5)}
    assert len(ids) == 1
    produce(pylog_server, "growing", b"new", partition=4)
    with LogManager(pylog_server.root, read_only=True) as manager:
        assert [r.value for r in manager.log("growing", 4).records()] == [b"new"]


def test_create_partitions_refuses_what_does_not_grow_or_another_node_and_writes_nothing(pylog_server, admin,
                                                                                       kafka_admin):
    with LogManager(pylog_server.root) as manager:
        manager.create_topic("two", partitions=2)
    before = file_digests(pylog_server.root)
    got = results(admin.create_partitions([NewPartitions("two", 2), NewPartitions("absent", 3)]))
    assert got["two"].code() == confluent_kafka.KafkaError.INVALID_PARTITIONS
    assert got["absent"].code() == confluent_kafka.KafkaError.UNKNOWN_TOPIC_OR_PART
    got = results(admin.create_partitions([NewPartitions("two", 3, replica_assignment=[[1]])]))
    assert got["two"].code() == confluent_kafka.KafkaError.INVALID_REPLICA_ASSIGNMENT
    assert results(admin.create_partitions([NewPartitions("two", 4)], validate_only=True)) == {"two": None}
    with pytest.raises(kafka_errors.InvalidPartitionsError):
        kafka_admin.create_partitions({"two": 1})
    assert file_digests(pylog_server.root) == before


# -- IncrementalAlterConfigs --------------------------------------------------------------


def test_incremental_alter_configs_sets_deletes_and_appends_on_disk_and_in_the_open_log(pylog_server, admin):
    with LogManager(pylog_server.root) as manager:
        manager.create_topic("altered", partitions=1, config={"retention_ms": 1000, "segment_bytes": 1 << 20})
    produce(pylog_server, "altered", b"v")  # the server holds the log open
    resource = ConfigResource("topic", "altered", incremental_configs=[
        ConfigEntry("max.message.bytes", "2000", incremental_operation=AlterConfigOpType.SET),
        ConfigEntry("retention.ms", None, incremental_operation=AlterConfigOpType.DELETE),
        ConfigEntry("cleanup.policy", "compact", incremental_operation=AlterConfigOpType.APPEND)])
    assert list(results(admin.incremental_alter_configs([resource])).values()) == [None]
    with LogManager(pylog_server.root, read_only=True) as manager:
        assert set(manager.topic_overrides("altered")) == {"segment_bytes", "max_message_bytes", "cleanup_policy"}
        config = manager.topic_config("altered")
        assert (config.segment_bytes, config.max_message_bytes, config.retention_ms, config.cleanup_policy) == \
            (1 << 20, 2000, LogConfig().retention_ms, "compact,delete")
    with held_log(pylog_server, "altered", 0) as log:  # the log the server holds took it at once
        assert log.config.max_message_bytes == 2000
    producer = confluent_kafka.Producer({"bootstrap.servers": pylog_server.bootstrap_servers})
    producer.produce("altered", key=b"k", value=b"x" * 3000, partition=0)
    producer.flush(TIMEOUT_S)
    with LogManager(pylog_server.root, read_only=True) as manager:  # past the new limit: refused
        assert [r.value for r in manager.log("altered", 0).records()] == [b"v"]
    subtract = ConfigResource("topic", "altered", incremental_configs=[
        ConfigEntry("cleanup.policy", "delete", incremental_operation=AlterConfigOpType.SUBTRACT)])
    assert list(results(admin.incremental_alter_configs([subtract])).values()) == [None]
    with LogManager(pylog_server.root, read_only=True) as manager:
        assert manager.topic_overrides("altered")["cleanup_policy"] == "compact"


def test_incremental_alter_configs_through_kafka_python(pylog_server, kafka_admin):
    kafka_admin.create_topics([KafkaNewTopic("kp-altered", 1, 1)])
    answer = kafka_admin.alter_configs([KafkaConfigResource(ConfigResourceType.TOPIC, "kp-altered",
                                                            configs={"retention.ms": ("SET", "60000")})])
    assert answer == {"topic": {"kp-altered": "OK"}}
    with LogManager(pylog_server.root, read_only=True) as manager:
        assert manager.topic_overrides("kp-altered") == {"retention_ms": 60000}


def test_bad_alterations_answer_kafka_s_errors_and_write_nothing(pylog_server, admin):
    with LogManager(pylog_server.root) as manager:
        manager.create_topic("guarded", partitions=1, config={"retention_ms": 1000})
    before = file_digests(pylog_server.root)

    def alter(name, *entries, validate_only=False, kind="topic"):
        resource = ConfigResource(kind, name, incremental_configs=list(entries))
        return next(iter(results(admin.incremental_alter_configs([resource], validate_only=validate_only)).values()))

    def entry(name, value, op=AlterConfigOpType.SET):
        return ConfigEntry(name, value, incremental_operation=op)

    KafkaError = confluent_kafka.KafkaError
    assert alter("guarded", entry("retention.ms", "forever")).code() == KafkaError.INVALID_CONFIG
    assert alter("guarded", entry("retention.everything", "1")).code() == KafkaError.INVALID_CONFIG
    assert alter("guarded", entry("segment.bytes", "1")).code() == KafkaError.INVALID_CONFIG
    assert alter("guarded", entry("retention.ms", "5", AlterConfigOpType.APPEND)).code() == KafkaError.INVALID_CONFIG
    assert alter("guarded", entry("cleanup.policy", "delete", AlterConfigOpType.SUBTRACT)).code() == \
        KafkaError.INVALID_CONFIG  # an empty policy
    assert alter("absent", entry("retention.ms", "5")).code() == KafkaError.UNKNOWN_TOPIC_OR_PART
    assert alter("0", entry("num.partitions", "5"), kind="broker").code() == KafkaError.INVALID_REQUEST
    assert alter("guarded", entry("retention.ms", "5"), validate_only=True) is None
    assert file_digests(pylog_server.root) == before
    assert pylog_server.manager.topic_overrides("guarded") == {"retention_ms": 1000}


# -- DeleteRecords ------------------------------------------------------------------------


def _segment_files(root: str, partition_dir: str) -> list[str]:
    return sorted(n for n in os.listdir(os.path.join(root, partition_dir)) if n.endswith(".log"))


def test_delete_records_moves_the_log_start_and_deletes_the_segments_below(pylog_server, admin, kafka_admin):
    with LogManager(pylog_server.root) as manager:
        topic = manager.create_topic("trimmed", partitions=2, config={"segment_bytes": 200})
        for i in range(20):
            topic.append([b"record-%02d" % i], partition=0)
            topic.append([b"record-%02d" % i], partition=1)
    segments_before = _segment_files(pylog_server.root, "trimmed-0")
    got = results(admin.delete_records([TopicPartition("trimmed", 0, 12)]))
    assert [(tp.partition, deleted.low_watermark) for tp, deleted in got.items()] == [(0, 12)]
    answer = kafka_admin.delete_records({KafkaTopicPartition("trimmed", 1): -1})  # -1: the high watermark
    assert [(tp.partition, r["low_watermark"]) for tp, r in answer.items()] == [(1, 20)]
    pylog_server.stop()
    with LogManager(pylog_server.root, read_only=True) as manager:
        log = manager.log("trimmed", 0)
        assert (log.log_start_offset, [r.offset for r in log.records()][0]) == (12, 12)
        assert manager.log("trimmed", 1).log_start_offset == 20
    assert len(_segment_files(pylog_server.root, "trimmed-0")) < len(segments_before)


def test_delete_records_past_the_high_watermark_or_of_an_unknown_partition_writes_nothing(pylog_server, admin,
                                                                                        kafka_admin):
    with LogManager(pylog_server.root) as manager:
        manager.create_topic("short", partitions=1).append([b"a", b"b", b"c"], partition=0)
    assert results(admin.delete_records([TopicPartition("short", 0, 0)]))  # the server opens the log: no change
    before = file_digests(pylog_server.root)
    got = results(admin.delete_records([TopicPartition("short", 0, 4)]))
    assert [e.code() for e in got.values()] == [confluent_kafka.KafkaError.OFFSET_OUT_OF_RANGE]
    with pytest.raises(kafka_errors.UnknownTopicOrPartitionError):  # sent without the client's metadata check
        kafka_admin.delete_records({KafkaTopicPartition("short", 5): 1}, partition_leader_id=0)
    assert file_digests(pylog_server.root) == before


# -- DescribeCluster ----------------------------------------------------------------------


def test_describe_cluster_gives_the_cluster_id_and_this_node_as_broker_and_controller(tmp_path):
    with Server(str(tmp_path / "data"), listen=("127.0.0.1", 0), node_id=3, cluster_id="edge-cluster") as server:
        admin = AdminClient({"bootstrap.servers": server.bootstrap_servers})
        cluster = admin.describe_cluster(request_timeout=TIMEOUT_S).result(TIMEOUT_S)
        assert (cluster.cluster_id, cluster.controller.id) == ("edge-cluster", 3)
        assert [(n.id, n.host, n.port) for n in cluster.nodes] == [(3, server.host, server.port)]
        kafka_admin = KafkaAdminClient(bootstrap_servers=server.bootstrap_servers)
        try:
            described = kafka_admin.describe_cluster()
        finally:
            kafka_admin.close()
    assert (described["cluster_id"], described["controller_id"]) == ("edge-cluster", 3)
    assert [(b["broker_id"], b["host"], b["port"]) for b in described["brokers"]] == [(3, server.host, server.port)]


def test_describe_cluster_answers_on_the_wire_at_each_version(pylog_server):
    for version in (0, 1, 2):
        answer = raw_request(pylog_server, DescribeClusterRequest(include_cluster_authorized_operations=False),
                             version, DescribeClusterResponse)
        assert (answer.error_code, answer.cluster_id, answer.controller_id) == (0, "pylog", 0)
        assert [(b.broker_id, b.host, b.port) for b in answer.brokers] == [(0, pylog_server.host, pylog_server.port)]


def test_a_topic_named_twice_in_one_request_is_invalid_and_neither_is_made(pylog_server, kafka_admin):
    answer = kafka_admin.create_topics([KafkaNewTopic("twice", 1, 1), KafkaNewTopic("twice", 2, 1),
                                        KafkaNewTopic("once", 1, 1)], raise_errors=False)
    assert [(t["name"], t["error_code"]) for t in answer["topics"]] == [
        ("twice", INVALID_REQUEST), ("twice", INVALID_REQUEST), ("once", 0)]
    with LogManager(pylog_server.root, read_only=True) as manager:
        assert manager.topics() == ["once"]
