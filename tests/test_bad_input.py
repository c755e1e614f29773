"""Bad input: every refused call raises a PylogError subclass naming what is wrong, and
leaves the directory tree byte-identical (same paths, same bytes in every file)."""

from __future__ import annotations

import contextlib
import os

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pylog import (
    InvalidArgumentError, InvalidConfigError, InvalidOffsetError, InvalidRecordError, InvalidTopicError, Log,
    LogConfig, LogDirNotFoundError, LogManager, PylogError, Record, UnknownTopicError, encode_batch,
)
from pylog.record.encode import encode_control_batch

SMALL = dict(segment_index_bytes=1024)  # small preallocated indexes keep snapshots cheap


def snapshot(root) -> dict[str, bytes | None]:
    """Every path under ``root``: a file's bytes, or None for a directory."""
    out: dict[str, bytes | None] = {}
    for dirpath, dirnames, filenames in os.walk(root):
        for d in dirnames:
            out[os.path.join(dirpath, d)] = None
        for f in filenames:
            with open(os.path.join(dirpath, f), "rb") as fh:
                out[os.path.join(dirpath, f)] = fh.read()
    return out


@contextlib.contextmanager
def refused(root, error):
    """The block raises ``error`` (a PylogError) and changes nothing under ``root``."""
    before = snapshot(root)
    with pytest.raises(error) as caught:
        yield caught
    assert isinstance(caught.value, PylogError)
    after = snapshot(root)
    assert sorted(after) == sorted(before), "paths created or removed"
    assert [p for p in before if before[p] != after[p]] == []


@pytest.fixture
def log(tmp_path):
    with Log.open(tmp_path / "t-0", **SMALL) as log:
        log.append([b"existing"])
        log.flush()
        yield log


# -- append's keyword arguments ----------------------------------------------------------------

@pytest.mark.parametrize("options", [
    dict(timestamp=2**64),
    dict(timestamp=2**70),
    dict(timestamp=-5),
    dict(timestamp="now"),
    dict(timestamp=1.5),
    dict(timestamp=[5, 6]),  # two create times for one record
    dict(timestamp=[-5]),
    dict(timestamp=[2**63]),
    dict(timestamp=[True]),
    dict(timestamp=[None]),
    dict(timestamp=["now"]),
    dict(producer_id=2**64, producer_epoch=0, base_sequence=0),
    dict(producer_id=-2),
    dict(producer_id=1, producer_epoch=70000, base_sequence=0),
    dict(producer_id=1, producer_epoch=0, base_sequence=2**40),
    dict(producer_id=1, producer_epoch=0, base_sequence=0, is_transactional="yes"),
    dict(producer_id=True, producer_epoch=0, base_sequence=0),
    dict(producer_epoch=3),
    dict(base_sequence=3),
    dict(is_transactional=True),
    dict(compression="bogus"),
    dict(compression=1),
], ids=repr)
def test_append_refuses_out_of_range_options(tmp_path, log, options):
    with refused(tmp_path, InvalidArgumentError):
        log.append([b"v"], **options)
    assert log.log_end_offset == 1


@pytest.mark.parametrize("records, error", [
    (b"not a list", InvalidArgumentError),
    ("text", InvalidArgumentError),
    ([], InvalidArgumentError),
    ([Record(b"v", timestamp=2**64)], InvalidArgumentError),
    ([Record(b"v", timestamp=-7)], InvalidArgumentError),
    ([Record(b"v", timestamp=5), Record(b"w", timestamp=2**63)], InvalidArgumentError),
    ([Record(b"v", headers=[("k",)])], InvalidArgumentError),
    ([Record(b"v", headers=5)], InvalidArgumentError),
    ([Record(b"v", headers=[(b"k", b"v")])], InvalidArgumentError),
    ([Record(b"v", headers=[("\ud800", b"v")])], InvalidArgumentError),  # a lone surrogate: not UTF-8 text
    ([(b"k", 12)], InvalidArgumentError),
], ids=repr)
def test_append_refuses_bad_records(tmp_path, log, records, error):
    with refused(tmp_path, error):
        log.append(records)


def test_a_header_key_read_from_bytes_that_are_not_utf8_is_written_back_as_those_bytes(tmp_path, log):
    raw = encode_batch([Record(b"v", headers=[("\udcff", b"1")])])  # what decoding b"\xff" gives
    assert b"\x02\xff\x02" in raw
    log.append_batches(raw)
    (copied,) = log.read(1).records()
    assert copied.headers == (("\udcff", b"1"),)
    log.append([copied])
    assert log.read(2).records()[0].headers == (("\udcff", b"1"),)


def test_append_accepts_the_edges_of_each_range(tmp_path):
    log = Log.open(tmp_path / "edges-0", message_timestamp_after_max_ms=2**63 - 1)  # no bound on future times
    info = log.append([b"v"], producer_id=2**63 - 1, producer_epoch=2**15 - 1, base_sequence=2**31 - 1,
                      timestamp=2**63 - 1)
    batch = log.read(info.first_offset).batches()[0]
    assert (batch.producer_id, batch.producer_epoch, batch.base_sequence, batch.max_timestamp) == \
        (2**63 - 1, 2**15 - 1, 2**31 - 1, 2**63 - 1)
    assert log.append([Record(b"w", timestamp=-1)]).num_records == 1
    log.close()


# -- transaction markers ---------------------------------------------------------------------

@pytest.mark.parametrize("args, kwargs", [
    ((-1, 0, True), {}),
    ((5, -1, True), {}),
    ((5, 2**20, True), {}),
    ((5, 0, True), dict(coordinator_epoch=2**40)),
    ((5, 0, True), dict(coordinator_epoch=-1)),
    ((5, 0, "false"), {}),
    ((2**64, 0, True), {}),
], ids=repr)
def test_txn_marker_refuses_out_of_range_arguments(tmp_path, log, args, kwargs):
    with refused(tmp_path, InvalidArgumentError):
        log.append_txn_marker(*args, **kwargs)
    assert log.log_end_offset == 1


def test_encoders_name_the_field_that_does_not_fit():
    with pytest.raises(InvalidArgumentError, match="producer_epoch"):
        encode_batch([b"v"], producer_id=1, producer_epoch=70000, base_sequence=0)
    with pytest.raises(InvalidArgumentError, match="partition_leader_epoch"):
        encode_batch([b"v"], partition_leader_epoch=2**31)
    with pytest.raises(InvalidArgumentError, match="coordinator_epoch"):
        encode_control_batch(1, producer_id=1, producer_epoch=0, coordinator_epoch=2**40)


# -- reads, offsets, truncation --------------------------------------------------------------------

@pytest.mark.parametrize("call, error", [
    (lambda log: log.read(0, isolation="dirty"), InvalidArgumentError),
    (lambda log: log.read(0, max_bytes=-1), InvalidArgumentError),
    (lambda log: log.read(0, max_bytes=True), InvalidArgumentError),
    (lambda log: log.read(2**64), InvalidOffsetError),
    (lambda log: log.read(0, max_offset="1"), InvalidOffsetError),
    (lambda log: log.offset_for_timestamp(2**64), InvalidArgumentError),
    (lambda log: log.offset_for_timestamp(-6), InvalidArgumentError),
    (lambda log: log.offset_for_timestamp("0"), InvalidArgumentError),
    (lambda log: log.truncate_to(-1), InvalidOffsetError),
    (lambda log: log.truncate_to(2**64), InvalidOffsetError),
    (lambda log: log.truncate_to(True), InvalidOffsetError),
    (lambda log: log.delete_records(-1), InvalidOffsetError),
    (lambda log: log.delete_records("1"), InvalidOffsetError),
    (lambda log: setattr(log, "high_watermark", 2**64), InvalidOffsetError),
    (lambda log: setattr(log, "high_watermark", 5), InvalidOffsetError),
    (lambda log: setattr(log, "high_watermark", "1"), InvalidOffsetError),
], ids=range(16))
def test_reads_and_offsets_refuse_bad_arguments(tmp_path, log, call, error):
    with refused(tmp_path, error):
        call(log)


# -- paths -----------------------------------------------------------------------------------

def test_open_refuses_a_nul_byte_in_the_path(tmp_path):
    with refused(tmp_path, InvalidArgumentError):
        Log.open(str(tmp_path / "a\0b-0"))


def test_open_refuses_a_300_character_topic_before_creating_anything(tmp_path):
    with refused(tmp_path, InvalidTopicError):
        Log.open(tmp_path / ("x" * 300 + "-0"))


@pytest.mark.parametrize("name", ["orders", "bad topic!-0", "orders-x", "orders-99999999999", "..-0"])
def test_open_refuses_a_bad_directory_name_before_creating_it(tmp_path, name):
    with refused(tmp_path, InvalidTopicError):
        Log.open(tmp_path / name)


def test_open_refuses_a_path_that_is_a_regular_file(tmp_path):
    (tmp_path / "t-0").write_bytes(b"not a directory")
    with refused(tmp_path, InvalidArgumentError):
        Log.open(tmp_path / "t-0")
    with refused(tmp_path, InvalidArgumentError):
        Log.open(tmp_path / "t-0", read_only=True)
    with refused(tmp_path, InvalidArgumentError):
        Log.open(tmp_path / "t-0" / "u-0")


def test_open_refuses_a_parent_name_too_long_without_creating_the_parents(tmp_path):
    with refused(tmp_path, InvalidArgumentError):
        Log.open(tmp_path / "parent" / ("y" * 300) / "t-0")


def test_read_only_open_of_a_missing_directory_is_log_dir_not_found(tmp_path):
    with refused(tmp_path, LogDirNotFoundError) as caught:
        Log.open(tmp_path / "missing-0", read_only=True)
    assert isinstance(caught.value, FileNotFoundError)
    with refused(tmp_path, LogDirNotFoundError):
        LogManager(tmp_path / "missing", read_only=True)


def test_open_refuses_bad_config_before_creating_the_directory(tmp_path):
    with refused(tmp_path, InvalidConfigError):
        Log.open(tmp_path / "t-0", min_cleanable_dirty_ratio="x")


# -- configuration --------------------------------------------------------------------------------

@pytest.mark.parametrize("settings", [
    dict(min_cleanable_dirty_ratio="x"),
    dict(min_cleanable_dirty_ratio="0.5"),
    dict(min_cleanable_dirty_ratio=True),
    dict(preallocate="true"),
    dict(cleanup_policy=5),
    dict(retention_ms=2**70),
    dict(segment_bytes="1048576"),
], ids=repr)
def test_config_refuses_values_of_the_wrong_type(settings):
    with pytest.raises(InvalidConfigError):
        LogConfig(**settings)


def test_config_parses_strings_only_from_kafka_properties():
    cfg = LogConfig.from_kafka({"min.cleanable.dirty.ratio": "0.25", "preallocate": "false"})
    assert (cfg.min_cleanable_dirty_ratio, cfg.preallocate) == (0.25, False)
    assert LogConfig(min_cleanable_dirty_ratio=1).min_cleanable_dirty_ratio == 1.0
    with pytest.raises(InvalidConfigError):
        LogConfig.from_kafka({"min.cleanable.dirty.ratio": "x"})


# -- log dirs and topics -----------------------------------------------------------------------------

@pytest.fixture
def manager(tmp_path):
    with LogManager(tmp_path / "root", **SMALL) as m:
        m.create_topic("events", partitions=3)
        m.create_topic("keyed", partitions=2, config={"cleanup_policy": "compact"})
        yield m


def test_manager_refuses_bad_roots(tmp_path):
    (tmp_path / "file").write_bytes(b"x")
    with refused(tmp_path, InvalidArgumentError):
        LogManager(tmp_path / "file")
    with refused(tmp_path, InvalidArgumentError):
        LogManager(str(tmp_path / "r\0oot"))
    with refused(tmp_path, InvalidArgumentError):
        LogManager(tmp_path / ("z" * 300) / "root")
    with refused(tmp_path, InvalidConfigError):
        LogManager(tmp_path / "root", min_cleanable_dirty_ratio="x")


@pytest.mark.parametrize("call, error", [
    (lambda m: m.create_topic("x" * 300), InvalidTopicError),
    (lambda m: m.create_topic("bad topic!"), InvalidTopicError),
    (lambda m: m.create_topic("new", 1, config={"min_cleanable_dirty_ratio": "0.5"}), InvalidConfigError),
    (lambda m: m.create_topic("new", 2**40), InvalidConfigError),
    (lambda m: m.topic("events").append([b"v"], timestamp=2**64), InvalidArgumentError),
    (lambda m: m.topic("events").append([b"v"], producer_id=1, producer_epoch=70000, base_sequence=0),
     InvalidArgumentError),
    (lambda m: m.topic("events").append([b"v"], partition=True), InvalidArgumentError),
    (lambda m: m.topic("events").append(b"v"), InvalidArgumentError),
    # a bad record in the last partition's group: the earlier partitions are not written either
    (lambda m: m.topic("events").append([(b"k%d" % i, b"v") for i in range(20)] + [(b"k", 5)]), InvalidArgumentError),
    (lambda m: m.topic("events").append([(b"k%d" % i, b"v") for i in range(20)] +
                                        [Record(b"v", b"k", timestamp=2**64)]), InvalidArgumentError),
    (lambda m: _keyless_after_keyed(m.topic("keyed")), InvalidRecordError),
    (lambda m: m.log("events", True), UnknownTopicError),
    (lambda m: m.log("events", 2**40), UnknownTopicError),
    (lambda m: m.log("bad topic!", 0), InvalidTopicError),
], ids=range(14))
def test_manager_and_topic_refuse_bad_input(tmp_path, manager, call, error):
    manager.flush()
    with refused(tmp_path, error):
        call(manager)


def _keyless_after_keyed(topic):
    topic.partition_for(None)  # null keys go to partition 1 now, after partition 0's keyed records
    topic.append([(b"k%d" % i, b"v") for i in range(20)] + [b"no key"])


# -- anything at all --------------------------------------------------------------------------------

_ODD_INTS = st.sampled_from([-2**80, -2**63 - 1, -2**63, -2**31 - 1, -2**15 - 1, -3, -2, -1, 0, 1, 2**15 - 1, 2**15,
                             2**31 - 1, 2**31, 2**63 - 1, 2**63, 2**64, 2**80])
_ANYTHING = st.one_of(_ODD_INTS, st.integers(), st.none(), st.booleans(), st.floats(), st.text(max_size=5),
                      st.binary(max_size=5), st.lists(st.integers(), max_size=2))
_OPTIONS = st.fixed_dictionaries({}, optional={
    name: _ANYTHING for name in ("producer_id", "producer_epoch", "base_sequence", "is_transactional", "timestamp")
} | {"compression": st.one_of(st.sampled_from(["none", "gzip", "lz4", "zstd", "snappy"]), _ANYTHING)})


def test_append_with_random_options_raises_only_pylog_errors_and_changes_nothing_when_refused(tmp_path):
    with Log.open(tmp_path / "t-0", **SMALL) as log:

        @settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
        @given(_OPTIONS, st.one_of(st.none(), _ANYTHING))
        def attempt(options, record_timestamp):
            before = snapshot(tmp_path)
            try:
                log.append([Record(b"v", b"k", timestamp=record_timestamp)], **options)
            except (PylogError, TypeError):
                assert snapshot(tmp_path) == before
        attempt()


def test_an_append_that_would_carry_the_log_end_past_int64_is_refused(tmp_path, log):
    """The log end offset is an int64: a follower batch ending at 2**63 - 1 is refused,
    and so is a leader's append once the log holds offset 2**63 - 2."""
    with refused(tmp_path, InvalidOffsetError):
        log.append_as_follower(encode_batch([b"x"], base_offset=2**63 - 1))
    log.append_as_follower(encode_batch([b"x"], base_offset=2**63 - 2))
    log.flush()
    with refused(tmp_path, InvalidOffsetError):
        log.append([b"y"])
    assert log.log_end_offset == 2**63 - 1 and log.read(2**63 - 2).records()[0].value == b"x"


# -- clients and replication ------------------------------------------------------------------------
# Every public client and replication entry point checks its arguments before it touches a file.

from pylog.clients import Consumer, OffsetAndMetadata, Producer, TopicPartition  # noqa: E402
from pylog.errors import ClientStateError  # noqa: E402
from pylog.replication import ProcessReplicaSet, ReplicaSet  # noqa: E402

TP = TopicPartition("t", 0)


@pytest.fixture
def client_root(tmp_path):
    root = str(tmp_path / "logs")
    with LogManager(root) as m:
        m.create_topic("t", 1)
    with Producer(root) as p:
        p.send("t", b"v").get()
    return root


@pytest.mark.parametrize("offsets, group", [
    (None, "g"), ({TP: 1}, 5), ([1], "g"), ({TP: -1}, "g"), ({TP: "1"}, "g"), ({"x": 1}, "g"), ({TP: 1}, ""),
    ({TP: OffsetAndMetadata(1, 5)}, "g"), ({TP: 1}, None),
], ids=repr)
def test_send_offsets_to_transaction_refuses_bad_arguments_before_writing(client_root, offsets, group):
    with Producer(client_root, transactional_id="tx") as p:
        p.begin_transaction()
        with refused(client_root, InvalidArgumentError):
            p.send_offsets_to_transaction(offsets, group)
        p.abort_transaction()


@pytest.mark.parametrize("call, error", [
    (lambda c: c.subscribe(pattern="["), InvalidArgumentError),
    (lambda c: c.subscribe(pattern=5), InvalidArgumentError),
    (lambda c: c.subscribe(["t"], listener=5), InvalidArgumentError),
    (lambda c: c.subscribe(5), InvalidArgumentError),
    (lambda c: c.subscribe([5]), InvalidTopicError),
    (lambda c: c.subscribe(["bad topic!"]), InvalidTopicError),
    (lambda c: c.subscribe(["t"], pattern="t"), InvalidArgumentError),
    (lambda c: (c.assign([TP]), c.commit([1])), InvalidArgumentError),
    (lambda c: (c.assign([TP]), c.commit({TP: -1})), InvalidArgumentError),
    (lambda c: (c.assign([TP]), c.commit({"t": 1})), InvalidArgumentError),
    (lambda c: (c.assign([TP]), c.commit_async(5)), InvalidArgumentError),
    (lambda c: c.assign(5), InvalidArgumentError),
], ids=range(12))
def test_consumer_calls_refuse_bad_arguments_before_writing(client_root, call, error):
    with Consumer(client_root, "g", enable_auto_commit=False) as c:
        with refused(client_root, error):
            call(c)


@pytest.mark.parametrize("options", [
    dict(session_timeout_ms="x"), dict(session_timeout_ms=0), dict(heartbeat_interval_ms=-1),
    dict(heartbeat_interval_ms=20_000, session_timeout_ms=10_000), dict(max_poll_interval_ms=0),
    dict(fetch_max_bytes="big"), dict(enable_auto_commit="yes"), dict(auto_commit_interval_ms=-5),
    dict(client_id=5), dict(consumer_timeout_ms=-1), dict(consumer_timeout_ms="x"),
    dict(exclude_internal_topics=1), dict(key_deserializer=5), dict(value_deserializer="json"),
    dict(partition_assignment_strategy="bogus"), dict(partition_assignment_strategy=5), dict(max_poll_records=0),
    dict(group_id=5),
], ids=repr)
def test_consumer_refuses_bad_settings_when_made(client_root, options):
    with refused(client_root, InvalidArgumentError):
        Consumer(client_root, **{"group_id": "g", **options})


@pytest.mark.parametrize("options", [
    dict(transactional_id="a", transaction_timeout_ms=2**40), dict(transactional_id="a", transaction_timeout_ms=-1),
    dict(transactional_id="a", transaction_timeout_ms=0), dict(transactional_id="a", transaction_timeout_ms="x"),
    dict(transactional_id=""), dict(transactional_id=5), dict(transactional_id="x" * 40_000),
    dict(enable_idempotence="yes"), dict(compression_type="bogus"), dict(max_block_ms=-1), dict(client_id=5),
    dict(key_serializer=5), dict(value_serializer="json"), dict(linger_ms=-1), dict(batch_size="x"),
    dict(transactional_id="a", transaction_state_partitions=0),
], ids=range(16))
def test_producer_refuses_bad_settings_before_writing(client_root, options):
    with refused(client_root, InvalidArgumentError):
        Producer(client_root, **options)


def test_producer_transaction_timeout_takes_kafkas_bounds(client_root):
    """Kafka's broker takes 1 ms up to its transaction.max.timeout.ms (15 minutes)."""
    with Producer(client_root, transactional_id="a", transaction_timeout_ms=900_000):
        pass
    with refused(client_root, InvalidArgumentError):
        Producer(client_root, transactional_id="a", transaction_timeout_ms=900_001)


@pytest.mark.parametrize("replica_set", [ReplicaSet, ProcessReplicaSet])
@pytest.mark.parametrize("replicas", [10**6, [0, 2**40], 0, -1, [0, 0]], ids=repr)
def test_replica_sets_refuse_replica_counts_and_ids_out_of_range_at_once(tmp_path, replica_set, replicas):
    with refused(tmp_path, InvalidArgumentError):
        replica_set(tmp_path / "rs", "p-0", replicas=replicas)


@pytest.mark.parametrize("replica_set", [ReplicaSet, ProcessReplicaSet])
@pytest.mark.parametrize("options, error", [
    (dict(name=5), InvalidArgumentError), (dict(name=b"p-0"), InvalidArgumentError),
    (dict(segment_bytes=b"x"), InvalidConfigError), (dict(no_such_setting=1), InvalidConfigError),
], ids=range(4))
def test_replica_sets_refuse_bad_names_and_log_settings_before_starting(tmp_path, replica_set, options, error):
    options = dict(options)
    name = options.pop("name", "p-0")
    with refused(tmp_path, error):
        replica_set(tmp_path / "rs", name, replicas=1, **options)


def test_replica_set_calls_refuse_bad_arguments(tmp_path):
    with ReplicaSet(tmp_path / "rs", "p-0", replicas=1) as rs:
        for call in (lambda: rs.serve(5), lambda: rs.serve("no-such-host.invalid"),
                     lambda: rs.append([b"x"], timeout_ms=2**70)):
            with pytest.raises(PylogError):
                call()


def test_process_replica_set_calls_refuse_bad_arguments(tmp_path):
    with ProcessReplicaSet(tmp_path / "rs", "p-0", replicas=1) as rs:
        for call in (lambda: rs.append(None), lambda: rs.append(5), lambda: rs.append([b"x"], timeout_ms=2**70),
                     lambda: rs.client(-1), lambda: rs.client("x"), lambda: rs.process([1])):
            with pytest.raises(InvalidArgumentError):
                call()
        assert [r.value for r in rs.records()] == []


@pytest.mark.parametrize("call, error", [
    (lambda p, c: p.send([1], b"x"), InvalidTopicError),
    (lambda p, c: p.send_batch({}, [b"x"]), InvalidTopicError),
    (lambda p, c: p.send_batch("t", None), InvalidArgumentError),
    (lambda p, c: p.flush("soon"), InvalidArgumentError),
    (lambda p, c: p.close(-1), InvalidArgumentError),
    (lambda p, c: p.futures[0].get(timeout="x"), InvalidArgumentError),
    (lambda p, c: p.futures[1].get(timeout=[1]), InvalidArgumentError),
    (lambda p, c: c.offsets_for_times([TP]), InvalidArgumentError),
    (lambda p, c: c.beginning_offsets(None), InvalidArgumentError),
    (lambda p, c: c.end_offsets(5), InvalidArgumentError),
    (lambda p, c: c.commit_async({TP: 0}, callback="log it"), InvalidArgumentError),
    (lambda p, c: c.committed(None), InvalidArgumentError),
], ids=range(12))
def test_client_calls_refuse_bad_arguments_before_writing(client_root, call, error):
    with Producer(client_root) as p, Consumer(client_root, "g", enable_auto_commit=False) as c:
        c.assign([TP])
        p.futures = [p.send("t", b"x"), p.send_batch("t", [b"x"])]
        p.flush()
        with refused(client_root, error):
            call(p, c)
