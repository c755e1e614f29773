"""``pylog dump --offsets-decoder`` / ``--transaction-log-decoder`` print keys and payloads
as Kafka's DumpLogSegments does: ``key: {"type":"T","data":{...}} payload:
{"version":"V","data":{...}}`` through the JSON of Kafka's generated converters,
``<DELETE>`` for a tombstone, a skip notice for what cannot be decoded."""

from __future__ import annotations

from pylog import Log
from pylog.coordinator.offsets_records import GROUP_RECORDS
from tests.cli.test_cli import pylog
from tests.cli.test_dump import dump_lines
from tests.conftest import SAMPLES, needs_samples
from tests.coordinator.wire import (
    NO_TAGS, array, compact_array, compact_blob, compact_string, i8, i16, i32, i64, string,
)


def contents(lines: list[str]) -> list[str]:
    """The ``key: ... payload: ...`` part of each record line."""
    return [line[line.index(" key: ") + 1:] for line in lines if line.startswith("| offset:")]


@needs_samples
def test_legacy_consumer_offsets_sample():
    path = SAMPLES / "real/legacy-magic1-logdir/__consumer_offsets-40/00000000000000000000.log"
    lines = dump_lines("--offsets-decoder", "--files", path)
    assert lines[3].startswith("| offset: 0 CreateTime: 1479457454628 keySize: 10 valueSize: 206 isValid: true")
    member = "consumer-1-341274c8-2f14-4475-96be-d44f261d5fc9"
    assert contents(lines)[:2] == [
        'key: {"type":"2","data":{"group":"GroupA"}} payload: {"version":"1","data":{"protocolType":"consumer",'
        f'"generation":1,"protocol":"range","leader":"{member}","members":[{{"memberId":"{member}",'
        '"clientId":"consumer-1","clientHost":"/192.168.2.20","rebalanceTimeout":300000,"sessionTimeout":30000,'
        '"subscription":{"topics":["foo"],"userData":""},'
        '"assignment":{"assignedPartitions":[{"topic":"foo","partitions":[0]}],"userData":""}}]}}',
        'key: {"type":"1","data":{"group":"GroupA","topic":"foo","partition":0}} payload: {"version":"1",'
        '"data":{"offset":2,"metadata":"","commitTimestamp":1479457455691,"expireTimestamp":1479543855691}}',
    ]


def write_log(tmp_path, records) -> str:
    with Log.open(tmp_path / "p-0") as log:
        log.append(records)
    return str(tmp_path / "p-0" / "00000000000000000000.log")


def test_flexible_group_metadata_tombstones_and_undecodable_records(tmp_path):
    subscription = i16(3) + array([string("t")]) + i32(-1) + array([]) + i32(7) + string("rack\n1")
    member = (compact_string("m") + compact_string(None) + compact_string("c") + compact_string("/h") + i32(10)
              + i32(20) + compact_blob(subscription) + compact_blob(b"\x00") + NO_TAGS)
    group_v4 = (i16(4) + compact_string("consumer") + i32(1) + compact_string("range") + compact_string("m")
                + i64(-1) + compact_array([member]) + NO_TAGS)
    commit_key = i16(1) + string("g") + string("t") + i32(0)
    path = write_log(tmp_path, [
        (i16(2) + string("g"), group_v4),
        (commit_key, None),
        (i16(3) + string("g"), i16(0) + i32(5) + NO_TAGS),
        (i16(99) + string("g"), b"\x00\x00"),
        (commit_key, i16(3) + i64(1)),
    ])
    assert contents(dump_lines("--offsets-decoder", "--files", path)) == [
        'key: {"type":"2","data":{"group":"g"}} payload: {"version":"4","data":{"protocolType":"consumer",'
        '"generation":1,"protocol":"range","leader":"m","currentStateTimestamp":-1,"members":[{"memberId":"m",'
        '"groupInstanceId":null,"clientId":"c","clientHost":"/h","rebalanceTimeout":10,"sessionTimeout":20,'
        '"subscription":{"topics":["t"],"userData":null,"ownedPartitions":[],"generationId":7,'
        '"rackId":"rack\\n1"},"assignment":"AA=="}]}}',
        'key: {"type":"1","data":{"group":"g","topic":"t","partition":0}} payload: <DELETE>',
        'key: {"type":"3","data":{"groupId":"g"}} payload: {"version":"0","data":{"epoch":5}}',
        "key: Unknown record type 99 at offset 3, skipping.",
        "key: Error at offset 4, skipping. OffsetCommitValue v3: 8 bytes end inside a field at byte 8",
    ]


def test_transaction_log_decoder(tmp_path):
    key = i16(0) + string("tx")
    value = (i16(0) + i64(7) + i16(1) + i32(900) + i8(1) + array([string("t") + array([i32(2)])]) + i64(10)
             + i64(9))
    path = write_log(tmp_path, [(key, value), (key, None)])
    lines = dump_lines("--transaction-log-decoder", "--skip-record-metadata", "--files", path)
    assert lines[3:] == [
        '| key: {"type":"0","data":{"transactionalId":"tx"}} payload: {"version":"0","data":{"producerId":7,'
        '"producerEpoch":1,"transactionTimeoutMs":900,"transactionStatus":1,'
        '"transactionPartitions":[{"topic":"t","partitionIds":[2]}],"transactionLastUpdateTimestampMs":10,'
        '"transactionStartTimestampMs":9}}',
        '| key: {"type":"0","data":{"transactionalId":"tx"}} payload: <DELETE>',
    ]


def test_a_record_without_a_key_stops_the_dump_with_an_error(tmp_path):
    path = write_log(tmp_path, [(GROUP_RECORDS.encode_key(2, {"group": "g"}), None), (None, b"v")])
    out = pylog("dump", "--offsets-decoder", "--files", path)
    assert out.returncode == 1
    assert "Failed to decode message at offset 1 using the specified decoder (message had a missing key)" in \
        out.stderr.decode()


def test_decoder_options_exclude_each_other(tmp_path):
    out = pylog("dump", "--offsets-decoder", "--transaction-log-decoder", "--files", "x.log")
    assert out.returncode != 0 and b"not allowed with" in out.stderr
