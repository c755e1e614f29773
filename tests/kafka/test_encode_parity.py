"""The batches pylog's ``encode_batch`` builds against those Kafka's ``MemoryRecordsBuilder``
builds from the same records (the driver io.pylog.interop.encode.EncodeBatches): byte for byte
uncompressed and with lz4 (Kafka's output is deterministic), with gzip where Java and Python
load the same zlib, with zstd where zstd-jni and python-zstandard carry the same libzstd
(else the frame's framing is compared); snappy is Google's C++ codec in Kafka and the Rust
``snap`` codec in pylog, so its xerial framing is compared. Every pair decodes to the same
batch and records, through pylog's decoder and through Kafka's DumpLogSegments.
"""

from __future__ import annotations

import base64
import json
import os
import random
import re
import shutil
import subprocess
from pathlib import Path

import pytest
import zstandard

from pylog import Record
from pylog.layout import CONTROL_KEY, END_TXN_MARKER
from pylog.record import decode_batches, encode_batch
from pylog.record.encode import encode_control_batch
from tests.kafka.broker import LIB

ENCODE_BATCHES = "io.pylog.interop.encode.EncodeBatches"
DUMP_LOG_SEGMENTS = "org.apache.kafka.tools.DumpLogSegments"
BATCH_HEADER_BYTES = 61
T0_MS = 1_700_000_000_000
#: a value larger than an lz4 block (64 KiB) and a snappy block (32 KiB), compressible
LARGE_VALUE_BYTES = 150_000
XERIAL_HEADER_BYTES = 16
ZSTD_FRAME_HEADER_BYTES = 6
ZSTD_EMPTY_LAST_BLOCK = b"\x01\x00\x00"


# --- the records and batches compared ------------------------------------------------------

def mixed_records(seed: int, n: int, large: bool = False) -> list[Record]:
    """Keys, null keys and values, empty values, headers (a null header value, a key beyond
    ASCII), timestamps before and after the first record's."""
    rng = random.Random(seed)
    words = [b"alpha", b"beta", b"gamma", b"\xff\x00\x01", "é€😀".encode()]
    out = []
    for i in range(n):
        value = b" ".join(rng.choice(words) for _ in range(rng.randrange(1, 30)))
        if large and i == 1:
            value = b"".join(rng.choice(words) for _ in range(LARGE_VALUE_BYTES // 5))
        out.append(Record(None if i % 7 == 3 else (b"" if i % 7 == 5 else value),
                          key=None if i % 2 else b"key-%d" % rng.randrange(100),
                          timestamp=T0_MS + rng.randrange(-5000, 5000),
                          headers=[("trace", b"t%d" % i), ("ĥ", None)] if i % 3 == 0 else []))
    return out


def cases() -> list[dict]:
    """Each: pylog's ``encode_batch`` keyword arguments plus ``records``; for each codec and
    level an uncompressed and a compressed batch of the same records."""
    small, large = mixed_records(1, 12), mixed_records(2, 4, large=True)
    out = []
    for codec, levels in (("gzip", [None, 1, 9]), ("snappy", [None]), ("lz4", [None, 9, 3, 12, 17]),
                          ("zstd", [None, 1, 9, -5])):
        for records in (small, large):
            out.append(dict(records=records, compression="none"))
            out += [dict(records=records, compression=codec, compression_level=level) for level in levels]
    producer = dict(producer_id=4242, producer_epoch=3, base_sequence=2_147_483_640)
    for codec in ("none", "lz4", "gzip"):
        out += [dict(records=small, compression=codec, base_offset=1_000_000, partition_leader_epoch=7, **producer),
                dict(records=small, compression=codec, is_transactional=True, **producer),
                dict(records=small, compression=codec, timestamp_type="LogAppendTime", log_append_time=T0_MS + 9)]
    return out


def markers() -> list[dict]:
    return [dict(control_type=control_type, producer_id=77, producer_epoch=2, coordinator_epoch=coordinator_epoch,
                 base_offset=base_offset, timestamp=T0_MS, partition_leader_epoch=4)
            for control_type, coordinator_epoch, base_offset in ((1, 5, 40), (0, 0, 0))]


def _b64(data: bytes | None) -> str | None:
    return None if data is None else base64.b64encode(data).decode()


def kafka_description(case: dict) -> dict:
    return {"codec": case["compression"], "level": case.get("compression_level"),
            "timestampType": case.get("timestamp_type", "CreateTime"),
            "logAppendTime": case.get("log_append_time", -1), "baseOffset": case.get("base_offset", 0),
            "producerId": case.get("producer_id", -1), "producerEpoch": case.get("producer_epoch", -1),
            "baseSequence": case.get("base_sequence", -1), "transactional": case.get("is_transactional", False),
            "partitionLeaderEpoch": case.get("partition_leader_epoch", -1),
            "records": [{"timestamp": r.timestamp, "key": _b64(r.key), "value": _b64(r.value),
                         "headers": [[k, _b64(v)] for k, v in r.headers]} for r in case["records"]]}


def kafka_marker_description(marker: dict) -> dict:
    return {"codec": "none", "baseOffset": marker["base_offset"], "producerId": marker["producer_id"],
            "producerEpoch": marker["producer_epoch"], "transactional": True,
            "partitionLeaderEpoch": marker["partition_leader_epoch"], "records": [],
            "marker": {"type": "COMMIT" if marker["control_type"] == 1 else "ABORT",
                       "coordinatorEpoch": marker["coordinator_epoch"], "timestamp": marker["timestamp"]}}


def pylog_batch(case: dict) -> bytes:
    return encode_batch(**case)


# --- which codec libraries match ----------------------------------------------------------

def _loaded_libz(binary: Path) -> str | None:
    if shutil.which("ldd") is None or not binary.exists():
        return None
    found = re.search(r"libz\.so\.\d+ => (\S+)", subprocess.run(["ldd", str(binary)], capture_output=True,
                                                                  text=True).stdout)
    return os.path.realpath(found.group(1)) if found else None


def same_zlib() -> bool:
    """Java's libzip and Python's zlib module load one shared libz."""
    import zlib
    java = Path(os.path.realpath(shutil.which("java") or "java"))
    java_libz = _loaded_libz(java.parent.parent / "lib" / "libzip.so")
    return java_libz is not None and java_libz == _loaded_libz(Path(getattr(zlib, "__file__", "")))


def zstd_jni_version() -> str | None:
    jar = next(iter(sorted(LIB.glob("zstd-jni-*.jar"))), None)
    found = jar and re.match(r"zstd-jni-(\d+\.\d+\.\d+)", jar.name)
    return found.group(1) if found else None


def same_libzstd() -> bool:
    return zstd_jni_version() == ".".join(map(str, zstandard.ZSTD_VERSION))


def byte_identity_expected(codec: str) -> bool:
    return codec in ("none", "lz4") or (codec == "gzip" and same_zlib()) or (codec == "zstd" and same_libzstd())


# --- the comparisons ----------------------------------------------------------------------

def decoded(data: bytes) -> tuple:
    """Every header field and record of the one batch in ``data``, as pylog decodes it."""
    batches = list(decode_batches(data))
    assert len(batches) == 1
    b = batches[0]
    assert b.is_valid()
    head = (b.base_offset, b.last_offset, b.record_count, b.magic, b.compression, b.timestamp_type, b.max_timestamp,
            b.producer_id, b.producer_epoch, b.base_sequence, b.partition_leader_epoch, b.is_transactional,
            b.is_control)
    return head, [(r.offset, r.timestamp, r.key, r.value, tuple(r.headers)) for r in b.records(verify=True)]


def assert_same_framing(codec: str, kafka: bytes, pylog: bytes) -> None:
    k, p = kafka[BATCH_HEADER_BYTES:], pylog[BATCH_HEADER_BYTES:]
    if codec == "zstd":
        assert p[:ZSTD_FRAME_HEADER_BYTES] == k[:ZSTD_FRAME_HEADER_BYTES]
        assert p.endswith(ZSTD_EMPTY_LAST_BLOCK) and k.endswith(ZSTD_EMPTY_LAST_BLOCK)
    elif codec == "snappy":
        assert p[:XERIAL_HEADER_BYTES] == k[:XERIAL_HEADER_BYTES]


@pytest.fixture(scope="module")
def kafka_batches(kafka_tool, tmp_path_factory) -> dict:
    """Kafka's bytes for every case and marker, from one JVM."""
    path = tmp_path_factory.mktemp("encode") / "batches.json"
    path.write_text(json.dumps([kafka_description(c) for c in cases()] +
                               [kafka_marker_description(m) for m in markers()]))
    lines = kafka_tool(ENCODE_BATCHES, path).stdout.split()
    data = [base64.b64decode(line) for line in lines]
    assert len(data) == len(cases()) + len(markers())
    return {"cases": data[:len(cases())], "markers": data[len(cases()):]}


def case_id(case: dict) -> str:
    return "-".join(f"{k}={v}" for k, v in case.items() if k != "records") + f"-n={len(case['records'])}"


@pytest.mark.parametrize("index", range(len(cases())), ids=[case_id(c) for c in cases()])
def test_batch_bytes_and_decoding_match_kafkas(kafka_batches, index):
    case = cases()[index]
    kafka, pylog = kafka_batches["cases"][index], pylog_batch(case)
    assert decoded(pylog) == decoded(kafka)
    if byte_identity_expected(case["compression"]):
        assert pylog == kafka
    else:
        assert_same_framing(case["compression"], kafka, pylog)


def test_transaction_markers_match_kafkas(kafka_batches):
    for marker, kafka in zip(markers(), kafka_batches["markers"]):
        pylog = encode_control_batch(**marker)
        assert pylog == kafka
        head, records = decoded(pylog)
        key, value = records[0][2], records[0][3]
        assert CONTROL_KEY.unpack(key)[1] == marker["control_type"]
        assert END_TXN_MARKER.unpack(value)[1] == marker["coordinator_epoch"]


def test_kafkas_tool_reads_pylogs_batches_as_it_reads_its_own(kafka_tool, kafka_batches, tmp_path):
    """Every pair written as a segment each (offsets made consecutive): DumpLogSegments prints
    the same records for both, and the same batch lines but for sizes, positions and CRCs."""
    pylog_log = tmp_path / "pylog" / "00000000000000000000.log"
    kafka_log = tmp_path / "kafka" / "00000000000000000000.log"
    for log, batches in ((pylog_log, [pylog_batch(c) for c in cases()]), (kafka_log, kafka_batches["cases"])):
        log.parent.mkdir()
        offset, out = 0, bytearray()
        for data in batches:
            batch = bytearray(data)
            batch[:8] = offset.to_bytes(8, "big")  # the base offset is outside the CRC
            offset = next(decode_batches(bytes(batch))).last_offset + 1
            out += batch
        log.write_bytes(bytes(out))
    done = kafka_tool(DUMP_LOG_SEGMENTS, "--print-data-log", "--files", f"{pylog_log},{kafka_log}")
    dumps = done.stdout.split("Dumping ")[1:]
    unplaced = [re.sub(r" (position|size|crc): \d+", "", text) for text in dumps]
    assert unplaced[0].split("\n", 1)[1] == unplaced[1].split("\n", 1)[1]
    assert unplaced[0].count("| offset:") == sum(len(c["records"]) for c in cases())
