"""``pylog dump`` prints, line for line, what Kafka's DumpLogSegments prints: producer
snapshots, KRaft snapshot checkpoints, and legacy messages inside compressed wrappers.

Expected lines are built here from the file bytes (parsed with ``struct``) and from
Kafka's own decoding of the samples, following the tool's print statements."""

from __future__ import annotations

import base64
import gzip
import struct
import zlib

import crc32c
import pytest

from pylog import Log, Record
from pylog.record import encode_batch
from tests.cli.test_cli import pylog
from tests.conftest import needs_samples, sample_logs
from tests.record.expected import expected_rows

SNAPSHOT_HEADER = struct.Struct(">hIi")
SNAPSHOT_ENTRY = struct.Struct(">qhiqiqiq")


def dump_lines(*args) -> list[str]:
    out = pylog("dump", *args)
    assert out.returncode == 0, out.stderr.decode()
    return out.stdout.decode().splitlines()


# --- producer-state snapshots ---------------------------------------------------------

def write_snapshot(path, entries) -> None:
    body = struct.pack(">i", len(entries)) + b"".join(SNAPSHOT_ENTRY.pack(*e) for e in entries)
    path.write_bytes(struct.pack(">hI", 1, crc32c.crc32c(body)) + body)


def kafka_snapshot_line(pid, epoch, last_seq, last_offset, delta, ts, coord, txn_first) -> str:
    """ProducerStateManager.readSnapshot + DumpLogSegments.dumpProducerIdSnapshot."""
    line = (f"producerId: {pid} producerEpoch: {epoch} coordinatorEpoch: {coord} currentTxnFirstOffset: "
            f"{'OptionalLong.empty' if txn_first < 0 else f'OptionalLong[{txn_first}]'} lastTimestamp: {ts}")
    if last_offset >= 0:
        first_seq = last_seq - delta if last_seq >= delta else 2**31 - 1 - (delta - last_seq) + 1
        line += (f" firstSequence: {first_seq} lastSequence: {last_seq} lastOffset: {last_offset} "
                 f"offsetDelta: {delta} timestamp: {ts}")
    return line


def test_snapshot_dump_prints_optional_txn_offset_and_batch_fields_only_when_present(tmp_path):
    path = tmp_path / "00000000000000000121.snapshot"
    write_snapshot(path, [(7, 3, 9, 120, 4, 1700000000123, 5, 116),
                          (8, 0, -1, -1, 0, 1700000000456, -1, -1),
                          (9, 1, 1, 100, 3, 1700000000789, -1, -1)])
    assert dump_lines("--files", path) == [
        f"Dumping {path}",
        "producerId: 7 producerEpoch: 3 coordinatorEpoch: 5 currentTxnFirstOffset: OptionalLong[116] "
        "lastTimestamp: 1700000000123 firstSequence: 5 lastSequence: 9 lastOffset: 120 offsetDelta: 4 "
        "timestamp: 1700000000123",
        "producerId: 8 producerEpoch: 0 coordinatorEpoch: -1 currentTxnFirstOffset: OptionalLong.empty "
        "lastTimestamp: 1700000000456",
        "producerId: 9 producerEpoch: 1 coordinatorEpoch: -1 currentTxnFirstOffset: OptionalLong.empty "
        "lastTimestamp: 1700000000789 firstSequence: 2147483646 lastSequence: 1 lastOffset: 100 offsetDelta: 3 "
        "timestamp: 1700000000789",
    ]


@needs_samples
def test_snapshot_dump_of_kafkas_own_snapshot():
    path = [p for p in sample_logs() if p.parent.name == "lz4-logappendtime-0"][0].with_name(
        "00000000000000002827.snapshot")
    data = path.read_bytes()
    count = SNAPSHOT_HEADER.unpack_from(data)[2]
    entries = [SNAPSHOT_ENTRY.unpack_from(data, SNAPSHOT_HEADER.size + i * SNAPSHOT_ENTRY.size) for i in range(count)]
    assert count > 0
    assert dump_lines("--files", path) == [f"Dumping {path}"] + [kafka_snapshot_line(*e) for e in entries]


def test_a_corrupt_snapshot_is_reported_and_the_next_file_still_dumped(tmp_path):
    bad, good = tmp_path / "00000000000000000001.snapshot", tmp_path / "00000000000000000002.snapshot"
    write_snapshot(bad, [(7, 0, 0, 0, 0, 1, -1, -1)])
    bad.write_bytes(bad.read_bytes()[:-1] + b"\x01")
    write_snapshot(good, [(7, 0, 0, 0, 0, 1, -1, -1)])
    out = pylog("dump", "--files", f"{bad},{good}")
    assert out.returncode == 1
    assert "CRC" in out.stderr.decode() and str(bad) in out.stderr.decode()
    assert out.stdout.decode().splitlines() == [f"Dumping {bad}", f"Dumping {good}", kafka_snapshot_line(
        7, 0, 0, 0, 0, 1, -1, -1)]


# --- KRaft snapshot checkpoints -------------------------------------------------------

def uvarint(n: int) -> bytes:
    out = bytearray()
    while n >= 0x80:
        out.append(n & 0x7F | 0x80)
        n >>= 7
    return bytes(out + bytes([n]))


def compact_string(s: str) -> bytes:
    return uvarint(len(s) + 1) + s.encode()


def control(type_id: int, value: bytes, ts: int) -> Record:
    return Record(value, key=struct.pack(">hh", 0, type_id), timestamp=ts)


T = 1700000000000
NO_TAGS = b"\x00"
HEADER = struct.pack(">hq", 0, T - 5) + NO_TAGS
KRAFT_VERSION = struct.pack(">hh", 0, 1) + NO_TAGS
VOTERS = (struct.pack(">h", 0) + uvarint(2) + struct.pack(">i", 1) + bytes(range(16))
          + uvarint(2) + compact_string("CONTROLLER") + compact_string("localhost") + struct.pack(">H", 9093) + NO_TAGS
          + struct.pack(">hh", 0, 1) + NO_TAGS + NO_TAGS + NO_TAGS)
FOOTER = struct.pack(">h", 0) + NO_TAGS
LEADER_CHANGE = (struct.pack(">hi", 0, 1) + uvarint(3) + struct.pack(">i", 1) + NO_TAGS + struct.pack(">i", 2)
                 + NO_TAGS + uvarint(2) + struct.pack(">i", 1) + NO_TAGS + NO_TAGS)


def kafka_v2_batch_line(batch: bytes, position: int, *, control_batch: bool) -> str:
    base_offset, _, epoch, magic, crc, attributes, last_delta, _, max_ts, pid, pepoch, seq, count = \
        struct.unpack_from(">qiibIhiqqqhii", batch)
    assert magic == 2 and crc == crc32c.crc32c(batch[21:]) and attributes == (0x20 if control_batch else 0)
    return (f"baseOffset: {base_offset} lastOffset: {base_offset + last_delta} count: {count} baseSequence: {seq} "
            f"lastSequence: {seq} producerId: {pid} producerEpoch: {pepoch} partitionLeaderEpoch: {epoch} "
            f"isTransactional: false isControl: {str(control_batch).lower()} deleteHorizonMs: OptionalLong.empty "
            f"position: {position} CreateTime: {max_ts} size: {len(batch)} magic: 2 compresscodec: none crc: {crc} "
            f"isvalid: true")


def record_head(offset: int, key_size: int, value_size: int) -> str:
    return (f"| offset: {offset} CreateTime: {T} keySize: {key_size} valueSize: {value_size} sequence: -1 "
            f"headerKeys: []")


def test_kraft_snapshot_dumps_as_a_log_with_its_header_and_footer_records(tmp_path):
    """A snapshot as KRaft writes it: one control batch (SnapshotHeader, KRaftVersion,
    KRaftVoters), the metadata records, a control batch holding the SnapshotFooter."""
    batches = [
        encode_batch([control(3, HEADER, T), control(5, KRAFT_VERSION, T), control(6, VOTERS, T)],
                     base_offset=0, partition_leader_epoch=2, is_control=True),
        encode_batch([Record(b"metadata-record-a", timestamp=T), Record(b"metadata-record-b", timestamp=T)],
                     base_offset=3, partition_leader_epoch=2),
        encode_batch([control(4, FOOTER, T)], base_offset=5, partition_leader_epoch=2, is_control=True),
    ]
    part = tmp_path / "__cluster_metadata-0"
    part.mkdir()
    path = part / "00000000000000000042-0000000002.checkpoint"
    path.write_bytes(b"".join(batches))
    positions = [0, len(batches[0]), len(batches[0]) + len(batches[1])]
    voter = ('{"voterId":1,"voterDirectoryId":"AAECAwQFBgcICQoLDA0ODw","endpoints":[{"name":"CONTROLLER",'
             '"host":"localhost","port":9093}],"kRaftVersionFeature":{"minSupportedVersion":0,'
             '"maxSupportedVersion":1}}')
    assert dump_lines("--files", path, "--print-data-log") == [
        f"Dumping {path}",
        "Snapshot end offset: 42, epoch: 2",
        kafka_v2_batch_line(batches[0], positions[0], control_batch=True),
        record_head(0, 4, len(HEADER)) + f' SnapshotHeader {{"version":0,"lastContainedLogTimestamp":{T - 5}}}',
        record_head(1, 4, len(KRAFT_VERSION)) + ' KRaftVersion {"version":0,"kRaftVersion":1}',
        record_head(2, 4, len(VOTERS)) + ' KRaftVoters {"version":0,"voters":[' + voter + "]}",
        kafka_v2_batch_line(batches[1], positions[1], control_batch=False),
        record_head(3, -1, 17) + " payload: metadata-record-a",
        record_head(4, -1, 17) + " payload: metadata-record-b",
        kafka_v2_batch_line(batches[2], positions[2], control_batch=True),
        record_head(5, 4, len(FOOTER)) + ' SnapshotFooter {"version":0}',
    ]


def test_kraft_bootstrap_snapshot_and_leader_change_records(tmp_path):
    batch = encode_batch([control(2, LEADER_CHANGE, T)], partition_leader_epoch=1, is_control=True)
    boot = tmp_path / "bootstrap.checkpoint"
    boot.write_bytes(batch)
    log = tmp_path / "00000000000000000000.log"
    log.write_bytes(batch)
    leader_change = (record_head(0, 4, len(LEADER_CHANGE))
                     + ' LeaderChange: {"version":0,"leaderId":1,"voters":[{"voterId":1},{"voterId":2}],'
                       '"grantingVoters":[{"voterId":1}]}')
    assert dump_lines("--files", f"{boot},{log}", "--deep-iteration") == [
        f"Dumping {boot}", "KRaft bootstrap snapshot", kafka_v2_batch_line(batch, 0, control_batch=True),
        leader_change,
        f"Dumping {log}", "Log starting offset: 0", kafka_v2_batch_line(batch, 0, control_batch=True),
        leader_change,
    ]


def test_a_checkpoint_not_named_like_a_kraft_snapshot_is_an_error(tmp_path):
    path = tmp_path / "42-2.checkpoint"
    path.write_bytes(encode_batch([control(4, FOOTER, T)], is_control=True))
    out = pylog("dump", "--files", path)
    assert out.returncode == 1
    assert "42-2.checkpoint is not a KRaft snapshot name" in out.stderr.decode()
    assert b"Traceback" not in out.stderr


# --- legacy messages in compressed wrappers -------------------------------------------

def legacy_messages(buf: bytes):
    """(position, offset, crc, magic, attributes, timestamp, key, value) of each entry."""
    pos = 0
    while pos + 12 <= len(buf):
        offset, size = struct.unpack_from(">qi", buf, pos)
        crc, magic, attributes = struct.unpack_from(">IbB", buf, pos + 12)
        if magic >= 2:
            yield pos, offset, None, magic, None, None, None, None
            pos += 12 + size
            continue
        p = pos + 18
        timestamp = -1
        if magic == 1:
            (timestamp,) = struct.unpack_from(">q", buf, p)
            p += 8
        fields = []
        for _ in range(2):
            (n,) = struct.unpack_from(">i", buf, p)
            fields.append(None if n < 0 else buf[p + 4:p + 4 + n])
            p += 4 + max(n, 0)
        yield pos, offset, crc, magic, attributes, timestamp, fields[0], fields[1]
        pos += 12 + size


def kafka_legacy_dump(path, rows, *, print_data: bool) -> list[str]:
    """What DumpLogSegments prints for a log of legacy entries (gzip wrappers or plain)."""
    by_position = {}
    for row in rows:
        by_position.setdefault(row["position"], []).append(row)
    out = [f"Dumping {path}", f"Log starting offset: {int(path.name.split('.')[0])}"]
    data = path.read_bytes()
    for pos, offset, crc, magic, attributes, timestamp, key, value in legacy_messages(data):
        batch = by_position[pos]
        b = batch[0]
        if magic >= 2:
            out.append(f"baseOffset: {b['base_offset']} lastOffset: {b['last_offset']} count: {len(batch)} "
                       f"baseSequence: {b['base_sequence']} lastSequence: "
                       f"{-1 if b['base_sequence'] < 0 else b['base_sequence'] + b['last_offset'] - b['base_offset']} "
                       f"producerId: {b['producer_id']} producerEpoch: {b['producer_epoch']} "
                       f"partitionLeaderEpoch: {b['partition_leader_epoch']} isTransactional: false "
                       f"isControl: false deleteHorizonMs: OptionalLong.empty position: {pos} "
                       f"{b['timestamp_type']}: {b['max_timestamp']} size: {b['size']} magic: 2 "
                       f"compresscodec: {b['codec']} crc: {b['crc']} isvalid: true")
            for r in batch:
                seq = -1 if b["base_sequence"] < 0 else b["base_sequence"] + r["offset"] - b["base_offset"]
                out.append(f"| offset: {r['offset']} {b['timestamp_type']}: {r['timestamp']} keySize: "
                           f"{-1 if r['key'] is None else len(base64.b64decode(r['key']))} valueSize: {r['value_len']} "
                           f"sequence: {seq} headerKeys: [{','.join(h[0] for h in r['headers'])}]")
            continue
        assert crc == zlib.crc32(data[pos + 16:pos + b["size"]])  # the sample's entries are intact
        out.append(f"offset: {offset} position: {pos} {b['timestamp_type']}: {b['max_timestamp']} size: {b['size']} "
                   f"magic: {magic} compresscodec: {b['codec']} crc: {crc} isvalid: true")
        inner = ([(crc, key, value)] if attributes & 7 == 0 else
                 [(c, k, v) for _, _, c, _, _, _, k, v in legacy_messages(gzip.decompress(value))])
        assert len(inner) == len(batch)
        for (inner_crc, k, v), r in zip(inner, batch):
            line = (f"| offset: {r['offset']} {b['timestamp_type']}: {r['timestamp']} "
                    f"keySize: {-1 if k is None else len(k)} valueSize: {-1 if v is None else len(v)} "
                    f"isValid: true crc: {inner_crc}")
            if print_data:
                line += ("" if k is None else f" key: {k.decode()}") + ("" if v is None else f" payload: {v.decode()}")
            out.append(line)
    return out


def _legacy_samples(*, text_only: bool):
    """Small logs holding legacy entries, plain or gzip (which the test can decompress on
    its own); ``text_only``: the reference logs, whose keys and values are UTF-8 text."""
    out = []
    for p in sample_logs():
        if p.stat().st_size > 100_000 or (text_only and p.parent.parent.name != "reference"):
            continue
        kinds = {(r["magic"], r["codec"]) for r in expected_rows(p)}
        legacy = {c for m, c in kinds if m < 2}
        if legacy and legacy <= {"none", "gzip"}:
            out.append(p)
    return out


@needs_samples
def test_deep_dump_of_legacy_messages_prints_each_inner_messages_crc():
    paths = _legacy_samples(text_only=False)
    expected = [line for p in paths for line in kafka_legacy_dump(p, expected_rows(p), print_data=False)]
    assert dump_lines("--files", ",".join(map(str, paths)), "--deep-iteration") == expected


@needs_samples
def test_print_data_log_of_legacy_messages():
    paths = _legacy_samples(text_only=True)
    expected = [line for p in paths for line in kafka_legacy_dump(p, expected_rows(p), print_data=True)]
    assert dump_lines("--files", ",".join(map(str, paths)), "--print-data-log") == expected


# --- record contents and the end of the file ------------------------------------------

def test_skip_record_metadata_starts_each_content_line_with_the_indent(tmp_path):
    with Log.open(tmp_path / "t-0") as log:
        log.append([Record(b"v0", timestamp=T), Record(b"v1", key=b"k1", timestamp=T)])
    path = tmp_path / "t-0" / "00000000000000000000.log"
    lines = dump_lines("--files", path, "--print-data-log", "--skip-record-metadata")
    assert lines[3:] == ["| payload: v0", "| key: k1 payload: v1"]


def test_max_bytes_cut_inside_a_batch_is_not_reported_as_invalid_bytes(tmp_path):
    with Log.open(tmp_path / "t-0") as log:
        for i in range(3):
            log.append([Record(b"value-%d" % i, timestamp=T)])
    path = tmp_path / "t-0" / "00000000000000000000.log"
    size = path.stat().st_size
    cut = dump_lines("--files", path, "--max-bytes", size - 5)
    assert len(cut) == 4 and not any(line.startswith("Found") for line in cut)
    path.write_bytes(path.read_bytes() + b"\x00" * 7)
    assert dump_lines("--files", path)[-1] == "Found 7 invalid bytes at the end of 00000000000000000000.log"


def _segment_with_indexes(tmp_path):
    """A closed segment with several index and time index entries; its directory."""
    d = tmp_path / "t-0"
    with Log.open(d, index_interval_bytes=100) as log:
        for i in range(20):
            log.append([Record(b"v%02d" % i + b"." * 100, timestamp=1_700_000_000_000 + i)])
        log.roll()
    return d


def _put_entry(path, index: int, fmt: str, *fields) -> None:
    data = bytearray(path.read_bytes())
    struct.pack_into(fmt, data, index * struct.calcsize(fmt), *fields)
    path.write_bytes(bytes(data))


def test_a_time_index_is_checked_against_its_log_as_kafkas_tool_does(tmp_path):
    d = _segment_with_indexes(tmp_path)
    tindex = d / "00000000000000000000.timeindex"
    r = pylog("dump", "--verify-index-only", tindex)
    assert r.returncode == 0 and r.stderr == b""
    last = len(tindex.read_bytes()) // 12 - 1
    ts, offset = struct.unpack_from(">qi", tindex.read_bytes(), last * 12)
    _put_entry(tindex, last, ">qi", ts + 5, offset)
    r = pylog("dump", "--verify-index-only", tindex)
    assert r.stderr.decode().splitlines() == [f"Found timestamp mismatch in :{tindex}",
                                              f"  Index timestamp: {ts + 5}, log timestamp: {ts}"]


@pytest.mark.parametrize("kind, fmt, entry, error", [
    ("index", ">ii", (-5, 0), "has non-zero size but the last offset is -5 which is less than the base offset 0"),
    ("timeindex", ">qi", (1000, 3), "has non-zero size but the last timestamp is 1000 which is less than the first"),
])
def test_the_index_sanity_check_is_kafkas_startup_check(tmp_path, kind, fmt, entry, error):
    d = _segment_with_indexes(tmp_path)
    path = d / f"00000000000000000000.{kind}"
    assert pylog("dump", "--index-sanity-check", path).stdout.decode().splitlines()[-1] == \
        f"{path} passed sanity check."
    _put_entry(path, len(path.read_bytes()) // struct.calcsize(fmt) - 1, fmt, *entry)
    r = pylog("dump", "--index-sanity-check", path)
    assert r.returncode == 1 and error in r.stderr.decode() and "passed" not in r.stdout.decode()


# --- text and stderr summaries as Kafka's tool prints them ---------------------------------

def test_bytes_that_are_not_utf8_print_as_javas_string_decoder_prints_them(tmp_path):
    """Java replaces an encoded surrogate (ED A0 80) with one U+FFFD, where Python's
    errors="replace" writes three."""
    with Log.open(tmp_path / "t-0") as log:
        log.append([Record(b"v\xed\xa0\x80w\xc0", key=b"k\xed\xbf\xbf", headers=[("h\udced\udca0\udc80", None)],
                           timestamp=T)])
    path = tmp_path / "t-0" / "00000000000000000000.log"
    assert dump_lines("--print-data-log", "--files", path)[3] == (
        f"| offset: 0 CreateTime: {T} keySize: 4 valueSize: 6 sequence: -1 headerKeys: [h\ufffd] "
        "key: k\ufffd payload: v\ufffdw\ufffd")


def test_stderr_summaries_follow_every_file_as_kafka_prints_them(tmp_path):
    """Non-consecutive offsets are checked from -1 (a log that starts past 0 has one), and
    each summary is printed after the last file's dump."""
    paths = []
    for name, start in (("a-0", 5), ("b-0", 0)):
        with Log.open(tmp_path / name) as log:
            log.replica_view.truncate_fully_and_start_at(start)
            log.append([b"x", b"y"])
        paths.append(tmp_path / name / f"{start:020d}.log")
    out = pylog("dump", "--deep-iteration", "--files", ",".join(map(str, paths)))
    assert out.returncode == 0
    assert out.stdout.decode().splitlines()[-1].startswith("| offset: 1 ")
    assert out.stderr.decode().splitlines() == [f"Non-consecutive offsets in {paths[0]}", "  -1 is followed by 5"]


def test_cluster_metadata_decoder_prints_feature_levels_as_kafka_and_skips_types_it_does_not_decode(tmp_path):
    feature = uvarint(1) + uvarint(12) + uvarint(0) + compact_string("metadata.version") + struct.pack(">h", 27) \
        + NO_TAGS
    unknown_type = uvarint(1) + uvarint(18) + uvarint(0) + NO_TAGS  # an ACL: not decoded
    with Log.open(tmp_path / "__cluster_metadata-0") as log:
        log.append([Record(feature, timestamp=T), Record(unknown_type, timestamp=T)])
    path = tmp_path / "__cluster_metadata-0" / "00000000000000000000.log"
    lines = dump_lines("--cluster-metadata-decoder", "--skip-record-metadata", "--files", path)
    assert lines[3:] == [
        '| payload: {"type":"FEATURE_LEVEL_RECORD","version":0,"data":{"name":"metadata.version","featureLevel":27}}',
        "| payload: Error at 1, skipping. pylog does not decode metadata record type 18"]


def test_kafkas_decoders_pylog_does_not_implement_are_refused_by_name(tmp_path):
    out = pylog("dump", "--share-group-state-decoder", "--files", tmp_path / "00000000000000000000.log")
    assert out.returncode == 1 and out.stdout == b""
    assert "--share-group-state-decoder (__share_group_state records) is not implemented" in out.stderr.decode()
