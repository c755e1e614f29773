"""``__transaction_state`` records, byte for byte, and their JSON as Kafka's dump prints it."""

from __future__ import annotations

import pytest

from pylog.coordinator.txn_records import TXN_RECORDS
from tests.coordinator.wire import (
    NO_TAGS, array, compact_array, compact_string, i8, i16, i32, i64, string, tags,
)

KEY = {"transactionalId": "txn-é"}
KEY_BYTES = i16(0) + string("txn-é")
VALUE = {"producerId": 4242, "producerEpoch": 3, "transactionTimeoutMs": 60000, "transactionStatus": 4,
         "transactionPartitions": [{"topic": "t", "partitionIds": [0, 5]}],
         "transactionLastUpdateTimestampMs": 1700000000123, "transactionStartTimestampMs": 1700000000000}
V0_BYTES = (i64(4242) + i16(3) + i32(60000) + i8(4) + array([string("t") + array([i32(0), i32(5)])])
            + i64(1700000000123) + i64(1700000000000))


def v1_bytes(tagged: bytes) -> bytes:
    return (i64(4242) + i16(3) + i32(60000) + i8(4)
            + compact_array([compact_string("t") + compact_array([i32(0), i32(5)]) + NO_TAGS])
            + i64(1700000000123) + i64(1700000000000) + tagged)


@pytest.mark.parametrize("version, value, value_bytes", [
    (0, VALUE, V0_BYTES),
    (1, VALUE, v1_bytes(NO_TAGS)),
    (1, dict(VALUE, previousProducerId=4000, nextProducerId=4300, clientTransactionVersion=2),
     v1_bytes(tags((0, i64(4000)), (1, i64(4300)), (2, i16(2))))),
    (0, dict(VALUE, transactionPartitions=None),
     i64(4242) + i16(3) + i32(60000) + i8(4) + i32(-1) + i64(1700000000123) + i64(1700000000000)),
])
def test_transaction_log_value_round_trip(version, value, value_bytes):
    assert TXN_RECORDS.encode_key(0, KEY) == KEY_BYTES
    assert TXN_RECORDS.encode_value(0, version, value) == i16(version) + value_bytes
    rec = TXN_RECORDS.decode(KEY_BYTES, i16(version) + value_bytes)
    assert rec.key == KEY and rec.value_version == version
    assert {k: rec.value[k] for k in value} == value


def test_tagged_fields_print_only_when_not_their_default():
    key, payload = TXN_RECORDS.dump_text(KEY_BYTES, i16(1) + v1_bytes(tags((1, i64(4300)))), 17)
    assert key == '{"type":"0","data":{"transactionalId":"txn-é"}}'
    assert payload == ('{"version":"1","data":{"producerId":4242,"nextProducerId":4300,"producerEpoch":3,'
                       '"transactionTimeoutMs":60000,"transactionStatus":4,'
                       '"transactionPartitions":[{"topic":"t","partitionIds":[0,5]}],'
                       '"transactionLastUpdateTimestampMs":1700000000123,'
                       '"transactionStartTimestampMs":1700000000000}}')


def test_null_partitions_and_tombstone_json():
    null_parts = i64(1) + i16(0) + i32(100) + i8(0) + i32(-1) + i64(5) + i64(-1)
    assert TXN_RECORDS.dump_text(KEY_BYTES, i16(0) + null_parts, 0)[1] == (
        '{"version":"0","data":{"producerId":1,"producerEpoch":0,"transactionTimeoutMs":100,'
        '"transactionStatus":0,"transactionPartitions":null,"transactionLastUpdateTimestampMs":5,'
        '"transactionStartTimestampMs":-1}}')
    assert TXN_RECORDS.dump_text(KEY_BYTES, None, 0)[1] == "<DELETE>"


def test_a_key_of_another_type_is_an_unknown_record_type():
    assert TXN_RECORDS.dump_text(i16(1) + string("x"), None, 9) == ("Unknown record type 1 at offset 9, skipping.",
                                                                   None)


def test_the_coordinator_writes_partitions_as_kafka_does_null_when_empty_none_once_complete(tmp_path):
    """Kafka's TransactionLog writes a null partition list in the Empty state, and its
    prepareComplete clears the partitions: the markers are written, nothing is pending."""
    from pylog import Log, LogManager
    from pylog.clients import Producer
    with LogManager(tmp_path) as m:
        m.create_topic("t", 1)
    with Producer(tmp_path, transactional_id="tx", transaction_state_partitions=1) as p:
        p.begin_transaction()
        p.send("t", b"v")
        p.commit_transaction()
    with Log.open(tmp_path / "__transaction_state-0", read_only=True) as log:
        values = [TXN_RECORDS.decode(r.key, r.value).value for r in log.records()]
    assert [(v["transactionStatus"], v["transactionPartitions"]) for v in values] == [
        (0, None), (1, [{"topic": "t", "partitionIds": [0]}]), (2, [{"topic": "t", "partitionIds": [0]}]), (4, [])]
