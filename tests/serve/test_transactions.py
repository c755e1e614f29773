"""Transactions through ``pylog serve``: librdkafka's and kafka-python's transactional
producers commit and abort, read_committed consumers (librdkafka through the server, pylog's ``Log`` in
process) see exactly the committed records; a newer instance fences the older one and
aborts what it left open; offsets committed in a transaction count once it commits, and
librdkafka's consume-transform-produce writes each input once across an abort."""

from __future__ import annotations

import socket
import time

import pytest
from kafka.protocol.admin import (
    DescribeProducersRequest, DescribeProducersResponse, DescribeTransactionsRequest, DescribeTransactionsResponse,
    ListTransactionsRequest, ListTransactionsResponse,
)
from kafka.protocol.consumer import OffsetFetchRequest, OffsetFetchResponse
from kafka.protocol.producer import (
    AddOffsetsToTxnRequest, AddOffsetsToTxnResponse, AddPartitionsToTxnRequest, AddPartitionsToTxnResponse,
    EndTxnRequest, EndTxnResponse, InitProducerIdRequest, InitProducerIdResponse, ProduceRequest, ProduceResponse,
    TxnOffsetCommitRequest, TxnOffsetCommitResponse,
)

from pylog.coordinator.txn_state_reader import read_transaction_states
from pylog.manager import LogManager
from pylog.record import encode_batch
from pylog.serve import Server
from tests.serve.conftest import file_digests, held_log, librdkafka_consume, read_frame, read_log, request_frame

UNKNOWN_TOPIC_OR_PARTITION = 3

confluent_kafka = pytest.importorskip("confluent_kafka")


def _producer(server, transactional_id: str, **settings):
    producer = confluent_kafka.Producer({"bootstrap.servers": server.bootstrap_servers,
                                         "transactional.id": transactional_id, **settings})
    producer.init_transactions(30)
    return producer


def _consume(server, topic: str, count: int, partitions=(0,)) -> list:
    """The values a read_committed librdkafka consumer reads."""
    return [value for _, _, value, _ in librdkafka_consume(server, topic, count, partitions,
                                                           **{"isolation.level": "read_committed"})]


def _committed_values(root: str, topic: str, partitions: int) -> list:
    """What pylog's own read_committed reading of the log dir sees, partition by partition."""
    with LogManager(root, read_only=True) as manager:
        return [r.value for p in range(partitions)
                for r in manager.log(topic, p).records(isolation="committed")]


def test_a_librdkafka_transaction_commits_and_another_aborts(pylog_server):
    with LogManager(pylog_server.root) as manager:
        manager.create_topic("orders", partitions=2)
    producer = _producer(pylog_server, "tx-orders")
    producer.begin_transaction()
    for i in range(6):
        producer.produce("orders", value=b"committed-%d" % i, partition=i % 2)
    producer.commit_transaction(30)
    producer.begin_transaction()
    for i in range(4):
        producer.produce("orders", value=b"aborted-%d" % i, partition=i % 2)
    producer.flush(30)
    producer.abort_transaction(30)
    producer.begin_transaction()
    producer.produce("orders", value=b"last", partition=0)
    producer.commit_transaction(30)

    expected = [b"committed-0", b"committed-2", b"committed-4", b"last", b"committed-1", b"committed-3",
                b"committed-5"]
    got = _consume(pylog_server, "orders", 7, partitions=(0, 1))
    assert sorted(got) == sorted(expected)
    assert _committed_values(pylog_server.root, "orders", 2) == expected
    states = read_transaction_states(pylog_server.root)
    assert states["tx-orders"][1].state == "CompleteCommit"



def test_a_kafka_python_transaction_commits_and_another_aborts(pylog_server):
    from kafka import KafkaConsumer, KafkaProducer, TopicPartition
    with LogManager(pylog_server.root) as manager:
        manager.create_topic("orders", partitions=2)
    producer = KafkaProducer(bootstrap_servers=pylog_server.bootstrap_servers, transactional_id="kp-tx")
    producer.init_transactions()
    producer.begin_transaction()
    producer.send("orders", b"committed-0", partition=0)
    producer.send("orders", b"committed-1", partition=1)
    producer.commit_transaction()
    producer.begin_transaction()
    producer.send("orders", b"aborted", partition=0)
    producer.flush()
    producer.abort_transaction()
    producer.close()
    consumer = KafkaConsumer(bootstrap_servers=pylog_server.bootstrap_servers, isolation_level="read_committed",
                             consumer_timeout_ms=30_000)
    consumer.assign([TopicPartition("orders", 0), TopicPartition("orders", 1)])
    consumer.seek_to_beginning()
    got = []
    for message in consumer:  # each partition's records come whole: the aborted one would come with committed-0
        got.append(message.value)
        if b"committed-0" in got and b"committed-1" in got:
            break
    consumer.close()
    assert sorted(got) == [b"committed-0", b"committed-1"]
    assert _committed_values(pylog_server.root, "orders", 2) == [b"committed-0", b"committed-1"]

# -- on the wire: fencing and bad input ------------------------------------------------------------
INVALID_PRODUCER_EPOCH, INVALID_TXN_STATE, INVALID_PRODUCER_ID_MAPPING, INVALID_TRANSACTION_TIMEOUT = 47, 48, 49, 50
PRODUCER_FENCED, TRANSACTIONAL_ID_NOT_FOUND, INVALID_REGULAR_EXPRESSION = 90, 105, 128
INVALID_REQUEST = 42


def _call(server, request, version: int):
    """``request`` at ``version`` on a new connection, and the server's decoded answer."""
    with socket.create_connection(server.address, timeout=60) as sock:
        sock.sendall(request_frame(request, version))
        answer = read_frame(sock)
    return _RESPONSES[type(request)].decode(answer, version=version, header=True)


_RESPONSES = {InitProducerIdRequest: InitProducerIdResponse, AddPartitionsToTxnRequest: AddPartitionsToTxnResponse,
              EndTxnRequest: EndTxnResponse, ProduceRequest: ProduceResponse,
              AddOffsetsToTxnRequest: AddOffsetsToTxnResponse, TxnOffsetCommitRequest: TxnOffsetCommitResponse,
              OffsetFetchRequest: OffsetFetchResponse, DescribeProducersRequest: DescribeProducersResponse,
              ListTransactionsRequest: ListTransactionsResponse,
              DescribeTransactionsRequest: DescribeTransactionsResponse}


def _init(server, transactional_id: str, timeout_ms: int = 60_000, current=(-1, -1), version: int = 4):
    return _call(server, InitProducerIdRequest(transactional_id=transactional_id, transaction_timeout_ms=timeout_ms,
                                               producer_id=current[0], producer_epoch=current[1]), version)


def _add(server, transactional_id: str, pid: int, epoch: int, topic: str = "t", partitions=(0,),
         version: int = 3) -> list[int]:
    topics = [AddPartitionsToTxnRequest.AddPartitionsToTxnTopic(name=topic, partitions=list(partitions))]
    answer = _call(server, AddPartitionsToTxnRequest(v3_and_below_transactional_id=transactional_id,
                                                     v3_and_below_producer_id=pid, v3_and_below_producer_epoch=epoch,
                                                     v3_and_below_topics=topics), version)
    return [p.partition_error_code for t in answer.results_by_topic_v3_and_below for p in t.results_by_partition]


def _end(server, transactional_id: str, pid: int, epoch: int, commit: bool, version: int = 3) -> int:
    return _call(server, EndTxnRequest(transactional_id=transactional_id, producer_id=pid, producer_epoch=epoch,
                                       committed=commit), version).error_code


def _produce(server, transactional_id: str, pid: int, epoch: int, sequence: int, value: bytes, partition: int = 0):
    batch = encode_batch([value], producer_id=pid, producer_epoch=epoch, base_sequence=sequence,
                         is_transactional=True)
    data = ProduceRequest.TopicProduceData(name="t", partition_data=[
        ProduceRequest.TopicProduceData.PartitionProduceData(index=partition, records=batch)])
    answer = _call(server, ProduceRequest(transactional_id=transactional_id, acks=-1, timeout_ms=1000,
                                          topic_data=[data]), 9)
    return answer.responses[0].partition_responses[0].error_code


@pytest.fixture
def server(tmp_path):
    root = str(tmp_path / "data")
    with LogManager(root) as manager:
        manager.create_topic("t", partitions=2)
    with Server(root, listen=("127.0.0.1", 0), auto_create_topics_enable=False) as server:
        yield server


def test_a_new_instance_fences_the_older_and_aborts_what_it_left_open(server):
    first = _init(server, "tx")
    assert (first.error_code, first.producer_epoch) == (0, 0)
    assert _add(server, "tx", first.producer_id, 0) == [0]
    assert _produce(server, "tx", first.producer_id, 0, 0, b"left open") == 0
    second = _init(server, "tx")
    assert (second.error_code, second.producer_id, second.producer_epoch) == (0, first.producer_id, 1)
    # PRODUCER_FENCED from the versions that know it (KIP-588), INVALID_PRODUCER_EPOCH before, as Kafka answers
    assert _add(server, "tx", first.producer_id, 0) == [PRODUCER_FENCED]
    assert _add(server, "tx", first.producer_id, 0, version=1) == [INVALID_PRODUCER_EPOCH]
    assert _end(server, "tx", first.producer_id, 0, commit=True) == PRODUCER_FENCED
    assert _end(server, "tx", first.producer_id, 0, commit=True, version=1) == INVALID_PRODUCER_EPOCH
    assert _produce(server, "tx", first.producer_id, 0, 1, b"fenced") == INVALID_PRODUCER_EPOCH
    fenced_init = _init(server, "tx", current=(first.producer_id, 0))  # the old one re-initialising (KIP-360)
    assert (fenced_init.error_code, fenced_init.producer_id) == (PRODUCER_FENCED, -1)
    fenced_init = _init(server, "tx", current=(first.producer_id, 0), version=3)
    assert (fenced_init.error_code, fenced_init.producer_id) == (INVALID_PRODUCER_EPOCH, -1)
    bumped = _init(server, "tx", current=(first.producer_id, 1))  # the current one: its epoch is bumped
    assert (bumped.error_code, bumped.producer_id, bumped.producer_epoch) == (0, first.producer_id, 2)
    with read_log(server, "t", 0) as log:
        assert [r.value for r in log.records()] == [b"left open"]
        assert [r.value for r in log.records(isolation="committed")] == []  # aborted by the new instance
        assert log.last_stable_offset == log.log_end_offset


def test_a_transaction_left_open_past_its_timeout_is_aborted_and_its_producer_fenced(tmp_path):
    root = str(tmp_path / "data")
    with LogManager(root) as manager:
        manager.create_topic("t", partitions=1)
    with Server(root, listen=("127.0.0.1", 0), auto_create_topics_enable=False,
                transaction_abort_timed_out_transaction_cleanup_interval_ms=100) as server:
        left = _init(server, "abandoned", timeout_ms=1000)
        assert _add(server, "abandoned", left.producer_id, 0) == [0]
        assert _produce(server, "abandoned", left.producer_id, 0, 0, b"never ended") == 0
        plain = confluent_kafka.Producer({"bootstrap.servers": server.bootstrap_servers})
        plain.produce("t", value=b"after", partition=0)
        assert plain.flush(30) == 0
        # held at the open transaction until the server aborts it, a second after it began
        assert _consume(server, "t", 1) == [b"after"]
        assert _end(server, "abandoned", left.producer_id, 0, commit=True) == PRODUCER_FENCED
        with read_log(server, "t", 0) as log:
            assert [r.value for r in log.records(isolation="committed")] == [b"after"]
            assert log.last_stable_offset == log.log_end_offset


def test_bad_transactional_requests_get_kafkas_codes_and_write_nothing(server):
    ok = _init(server, "tx")
    pid = ok.producer_id
    assert _add(server, "tx", pid, 0, partitions=(0,)) == [0]
    assert _produce(server, "tx", pid, 0, 0, b"in") == 0
    with held_log(server, "t", 1):  # open (its first open tidies its files) before the digests
        pass
    before = file_digests(server.root)
    assert _init(server, "other", timeout_ms=0).error_code == INVALID_TRANSACTION_TIMEOUT
    assert _init(server, "other", timeout_ms=10**9).error_code == INVALID_TRANSACTION_TIMEOUT
    assert _init(server, "").error_code == INVALID_REQUEST
    assert _init(server, "x" * 40_000).error_code == INVALID_REQUEST  # longer than a record's string
    assert _add(server, "unknown", pid, 0) == [INVALID_PRODUCER_ID_MAPPING]
    assert _add(server, "tx", pid + 1, 0) == [INVALID_PRODUCER_ID_MAPPING]
    assert _add(server, "tx", pid, 5) == [PRODUCER_FENCED]
    assert _add(server, "tx", pid, 0, topic="absent") == [UNKNOWN_TOPIC_OR_PARTITION]
    assert _produce(server, "tx", pid, 0, 0, b"not added", partition=1) == INVALID_TXN_STATE
    assert _produce(server, "unknown", pid, 0, 0, b"x") == INVALID_PRODUCER_ID_MAPPING
    assert _end(server, "unknown", pid, 0, commit=True) == INVALID_PRODUCER_ID_MAPPING
    assert _end(server, "tx", pid, 3, commit=True) == PRODUCER_FENCED
    assert file_digests(server.root) == before
    assert _end(server, "tx", pid, 0, commit=True) == 0
    assert _end(server, "tx", pid, 0, commit=True) == 0  # a retry of the commit
    assert _end(server, "tx", pid, 0, commit=False) == INVALID_TXN_STATE  # no transaction to abort
    fresh = _init(server, "fresh")
    assert _end(server, "fresh", fresh.producer_id, 0, commit=True) == INVALID_TXN_STATE
    with read_log(server, "t", 0) as log:
        assert [r.value for r in log.records(isolation="committed")] == [b"in"]


def test_transactional_requests_before_any_init_producer_id_create_nothing(server):
    with held_log(server, "t", 0):  # open (its first open tidies its files) before the digests
        pass
    before = file_digests(server.root)
    assert _add(server, "tx", 0, 0) == [INVALID_PRODUCER_ID_MAPPING]
    assert _produce(server, "tx", 0, 0, 0, b"x") == INVALID_PRODUCER_ID_MAPPING
    assert _end(server, "tx", 0, 0, commit=False) == INVALID_PRODUCER_ID_MAPPING
    assert file_digests(server.root) == before  # no __transaction_state made for them


def test_verify_only_add_partitions_reports_those_not_in_the_transaction(server):
    ok = _init(server, "tx")
    assert _add(server, "tx", ok.producer_id, 0, partitions=(0,)) == [0]
    with held_log(server, "t", 1):  # open (its first open tidies its files) before the digests
        pass
    request = AddPartitionsToTxnRequest(transactions=[AddPartitionsToTxnRequest.AddPartitionsToTxnTransaction(
        transactional_id="tx", producer_id=ok.producer_id, producer_epoch=0, verify_only=True,
        topics=[AddPartitionsToTxnRequest.AddPartitionsToTxnTopic(name="t", partitions=[0, 1])])])
    before = file_digests(server.root)
    answer = _call(server, request, 4)
    assert [[(p.partition_index, p.partition_error_code) for p in t.results_by_partition]
            for r in answer.results_by_transaction for t in r.topic_results] == [[(0, 0), (1, INVALID_TXN_STATE)]]
    assert file_digests(server.root) == before



def _txn_commit(server, transactional_id: str, pid: int, epoch: int, offset: int) -> int:
    request = TxnOffsetCommitRequest(transactional_id=transactional_id, group_id="g", producer_id=pid,
                                     producer_epoch=epoch, topics=[TxnOffsetCommitRequest.TxnOffsetCommitRequestTopic(
                                         name="t", partitions=[TxnOffsetCommitRequest.TxnOffsetCommitRequestTopic.
                                                               TxnOffsetCommitRequestPartition(
                                                                   partition_index=0, committed_offset=offset,
                                                                   committed_metadata="")])])
    return _call(server, request, 2).topics[0].partitions[0].error_code


def _group_offset(server) -> int:
    request = OffsetFetchRequest(group_id="g", topics=[OffsetFetchRequest.OffsetFetchRequestTopic(
        name="t", partition_indexes=[0])], require_stable=False)
    return _call(server, request, 7).topics[0].partitions[0].committed_offset


def test_offsets_committed_in_a_transaction_count_only_once_it_commits(server):
    pid = _init(server, "tx").producer_id
    assert _add(server, "tx", pid, 0) == [0]
    assert _txn_commit(server, "tx", pid, 0, 5) == INVALID_TXN_STATE  # AddOffsetsToTxn first
    assert _call(server, AddOffsetsToTxnRequest(transactional_id="tx", producer_id=pid, producer_epoch=0,
                                                group_id="g"), 3).error_code == 0
    assert _txn_commit(server, "tx", pid, 1, 5) == INVALID_PRODUCER_EPOCH
    assert _txn_commit(server, "tx", pid, 0, 5) == 0
    assert _group_offset(server) == -1  # not before the commit
    assert _end(server, "tx", pid, 0, commit=False) == 0
    assert _group_offset(server) == -1  # nor after an abort
    assert _call(server, AddOffsetsToTxnRequest(transactional_id="tx", producer_id=pid, producer_epoch=0,
                                                group_id="g"), 3).error_code == 0
    assert _txn_commit(server, "tx", pid, 0, 7) == 0
    assert _end(server, "tx", pid, 0, commit=True) == 0
    assert _group_offset(server) == 7


def _list(server, states=(), producer_ids=(), duration_ms: int = -1, pattern: str | None = None):
    answer = _call(server, ListTransactionsRequest(state_filters=list(states), producer_id_filters=list(producer_ids),
                                                   duration_filter=duration_ms, transactional_id_pattern=pattern), 2)
    if answer.error_code:
        return answer.error_code
    return answer.unknown_state_filters, [(t.transactional_id, t.producer_id, t.transaction_state)
                                          for t in answer.transaction_states]


def test_describe_producers_and_list_transactions_show_an_open_transaction(server):
    assert _list(server) == ([], [])  # no transactional id yet (and nothing created for the question)
    pid = _init(server, "tx").producer_id
    other = _init(server, "done").producer_id
    assert _add(server, "tx", pid, 0, partitions=(1,)) == [0]
    assert _produce(server, "tx", pid, 0, 0, b"a", partition=1) == 0
    assert _produce(server, "tx", pid, 0, 1, b"b", partition=1) == 0
    assert _list(server) == ([], [("done", other, "Empty"), ("tx", pid, "Ongoing")])
    assert _list(server, states=["Ongoing", "Bogus"]) == (["Bogus"], [("tx", pid, "Ongoing")])
    assert _list(server, producer_ids=[other]) == ([], [("done", other, "Empty")])
    assert _list(server, states=["Ongoing"], duration_ms=3_600_000) == ([], [])  # open for less than an hour
    assert _list(server, pattern="do.*") == ([], [("done", other, "Empty")])  # the whole id matches, as Java's matches()
    assert _list(server, pattern="t") == ([], [])  # "tx" is not matched whole by "t"
    assert _list(server, pattern="") == _list(server)
    assert _list(server, pattern="t[x") == INVALID_REGULAR_EXPRESSION
    request = DescribeProducersRequest(topics=[DescribeProducersRequest.TopicRequest(name="t", partition_indexes=[1, 0]),
                                               DescribeProducersRequest.TopicRequest(name="absent",
                                                                                     partition_indexes=[0])])
    answer = _call(server, request, 0)
    described = {(t.name, p.partition_index): (p.error_code, [(s.producer_id, s.producer_epoch, s.last_sequence,
                                                               s.current_txn_start_offset) for s in p.active_producers])
                 for t in answer.topics for p in t.partitions}
    assert described == {("t", 1): (0, [(pid, 0, 1, 0)]), ("t", 0): (0, []),
                         ("absent", 0): (UNKNOWN_TOPIC_OR_PARTITION, [])}
    assert _end(server, "tx", pid, 0, commit=True) == 0
    assert _list(server, states=["CompleteCommit"]) == ([], [("tx", pid, "CompleteCommit")])


def _describe_transactions(server, *transactional_ids) -> list:
    answer = _call(server, DescribeTransactionsRequest(transactional_ids=list(transactional_ids)), 0)
    return [(t.error_code, t.transactional_id, t.transaction_state, t.transaction_timeout_ms, t.producer_id,
             t.producer_epoch, [(d.topic, d.partitions) for d in t.topics], t.transaction_start_time_ms)
            for t in answer.transaction_states]


def test_describe_transactions_gives_each_id_s_state_partitions_and_start(server):
    assert _describe_transactions(server, "tx") == [(TRANSACTIONAL_ID_NOT_FOUND, "tx", "", 0, -1, -1, [], -1)]
    pid = _init(server, "tx", timeout_ms=45_000).producer_id
    before_ms = int(time.time() * 1000)
    assert _add(server, "tx", pid, 0, partitions=(1, 0)) == [0, 0]
    (ongoing, unknown) = _describe_transactions(server, "tx", "nobody")
    assert ongoing[:7] == (0, "tx", "Ongoing", 45_000, pid, 0, [("t", [0, 1])])
    assert before_ms - 1_000 <= ongoing[7] <= int(time.time() * 1000)
    assert unknown[:2] == (TRANSACTIONAL_ID_NOT_FOUND, "nobody")
    assert _end(server, "tx", pid, 0, commit=False) == 0
    assert _describe_transactions(server, "tx")[0][:7] == (0, "tx", "CompleteAbort", 45_000, pid, 0, [])


# -- consume-transform-produce ----------------------------------------------------------------------
def test_consume_transform_produce_with_offsets_in_the_transactions_and_an_abort_midway(pylog_server):
    """Read "in" in a group, write each record upper-cased to "out" in transactions that
    carry the group's offsets (send_offsets_to_transaction); the second transaction is
    aborted after its records and offsets were sent, and its input read again. "out",
    read_committed, holds every input once; the group's committed offsets are the end."""
    inputs = [b"record-%02d" % i for i in range(20)]
    with LogManager(pylog_server.root) as manager:
        manager.create_topic("in", partitions=2)
        manager.create_topic("out", partitions=1)
        for i, value in enumerate(inputs):
            manager.log("in", i % 2).append([value])
    consumer = confluent_kafka.Consumer({"bootstrap.servers": pylog_server.bootstrap_servers, "group.id": "ctp",
                                         "enable.auto.commit": False, "auto.offset.reset": "earliest",
                                         "isolation.level": "read_committed"})
    consumer.subscribe(["in"])
    producer = _producer(pylog_server, "tx-ctp")
    done, transactions, aborted = 0, 0, False
    deadline = time.monotonic() + 90
    while done < len(inputs) and time.monotonic() < deadline:
        messages = [m for m in consumer.consume(num_messages=4, timeout=0.5) if m.error() is None]
        if not messages:
            continue
        producer.begin_transaction()
        for m in messages:
            producer.produce("out", value=m.value().upper(), partition=0)
        producer.send_offsets_to_transaction(consumer.position(consumer.assignment()),
                                             consumer.consumer_group_metadata(), 30)
        transactions += 1
        if transactions == 2 and not aborted:
            producer.flush(30)
            producer.abort_transaction(30)
            aborted = True
            committed = consumer.committed(consumer.assignment(), 30)
            for tp in committed:  # read again from what the group committed
                consumer.seek(confluent_kafka.TopicPartition(tp.topic, tp.partition,
                                                             tp.offset if tp.offset >= 0 else 0))
            continue
        producer.commit_transaction(30)
        done += len(messages)
    assert aborted and done == len(inputs)
    committed = consumer.committed([confluent_kafka.TopicPartition("in", p) for p in (0, 1)], 30)
    consumer.close()
    assert sorted((tp.partition, tp.offset) for tp in committed) == [(0, 10), (1, 10)]
    out = _consume(pylog_server, "out", len(inputs))
    assert sorted(out) == sorted(v.upper() for v in inputs)
    assert sorted(_committed_values(pylog_server.root, "out", 1)) == sorted(v.upper() for v in inputs)
    with LogManager(pylog_server.root, read_only=True) as manager:
        everything = [r.value for r in manager.log("out", 0).records()]
    assert len(everything) > len(inputs)  # the aborted records are in the log, skipped by committed reads
