"""The v2 batch codec against kafka-python, with property tests and byte-level corruption."""

from __future__ import annotations

import struct

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pylog import (
    CorruptRecordError, IncompleteBatchError, InvalidArgumentError, InvalidRecordError, PylogError, Record, decode_batches, encode_batch,
)
from pylog.record import encode_control_batch, set_base_offset, set_log_append_time, set_partition_leader_epoch
from pylog.record.batch import complete_batch_bytes
from pylog.record.varint import decode_varint, encode_varint

CODECS = ["none", "gzip", "snappy", "lz4", "zstd"]
CODEC_IDS = {name: i for i, name in enumerate(CODECS)}


def kafka_python_builder(records, codec, **kw):
    from kafka.record.default_records import DefaultRecordBatchBuilder
    b = DefaultRecordBatchBuilder(magic=2, compression_type=CODEC_IDS[codec], is_transactional=False,
                                  producer_id=-1, producer_epoch=-1, base_sequence=-1, batch_size=1 << 30)
    for i, r in enumerate(records):
        b.append(i, r.timestamp, r.key, r.value, list(r.headers))
    return bytes(b.build())


def sample_records(n=50):
    return [Record(b"value-%d" % i * (i % 7), key=None if i % 3 else b"k%d" % i, timestamp=1_700_000_000_000 + i,
                   headers=(("h", b"x"), ("n", None)) if i % 4 == 0 else ()) for i in range(n)]


def fixture_ok(max_examples: int):
    """Hypothesis settings for tests that also take the (per-test) ``impl`` fixture."""
    return settings(max_examples=max_examples, deadline=None,
                    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])


@pytest.mark.parametrize("codec", CODECS)
def test_kafka_python_decodes_what_pylog_encodes(codec, impl):
    from kafka.record.default_records import DefaultRecordBatch
    recs = sample_records()
    raw = encode_batch(recs, compression=codec, base_offset=40)
    kb = DefaultRecordBatch(bytearray(raw))
    assert kb.validate_crc()
    got = [(r.offset, r.timestamp, r.key, r.value, [tuple(h) for h in r.headers]) for r in kb]
    assert got == [(40 + i, r.timestamp, r.key, r.value, list(r.headers)) for i, r in enumerate(recs)]


@pytest.mark.parametrize("codec", CODECS)
def test_pylog_decodes_what_kafka_python_encodes(codec, impl):
    recs = sample_records()
    batch = next(decode_batches(kafka_python_builder(recs, codec)))
    assert batch.is_valid() and batch.compression == codec
    assert [(r.offset, r.timestamp, r.key, r.value, tuple(r.headers)) for r in batch] == \
        [(i, r.timestamp, r.key, r.value, tuple(r.headers)) for i, r in enumerate(recs)]


@pytest.mark.parametrize("codec", ["none", "snappy"])
def test_bytes_identical_to_kafka_python_builder(codec, impl):
    recs = sample_records()
    assert encode_batch(recs, compression=codec, partition_leader_epoch=0) == kafka_python_builder(recs, codec)


records_strategy = st.lists(
    st.builds(Record,
              value=st.one_of(st.none(), st.binary(max_size=300)),
              key=st.one_of(st.none(), st.binary(max_size=50)),
              timestamp=st.integers(min_value=0, max_value=2**41),
              headers=st.lists(st.tuples(st.text(max_size=10), st.one_of(st.none(), st.binary(max_size=20))),
                               max_size=4).map(tuple)),
    min_size=1, max_size=40)


@fixture_ok(100)
@given(records=records_strategy, codec=st.sampled_from(CODECS), base=st.integers(0, 2**40))
def test_encode_decode_round_trips_arbitrary_records(impl, records, codec, base):
    batch = next(decode_batches(encode_batch(records, compression=codec, base_offset=base)))
    got = batch.records()
    assert [(r.offset, r.timestamp, r.key, r.value, tuple(r.headers)) for r in got] == \
        [(base + i, r.timestamp, r.key, r.value, tuple(r.headers)) for i, r in enumerate(records)]
    assert batch.max_timestamp == max(r.timestamp for r in records)


@pytest.mark.parametrize("n", [1, 10_000])
def test_one_and_ten_thousand_records_per_batch(n, impl):
    raw = encode_batch([b"%d" % i for i in range(n)], timestamp=5)
    batch = next(decode_batches(raw))
    assert batch.record_count == n and [r.value for r in batch][-1] == b"%d" % (n - 1)


def test_negative_timestamp_deltas_and_large_values(impl):
    recs = [Record(b"a", timestamp=10_000), Record(b"b" * 1_000_000, timestamp=5), Record(b"", timestamp=9_999)]
    got = next(decode_batches(encode_batch(recs))).records()
    assert [r.timestamp for r in got] == [10_000, 5, 9_999] and len(got[1].value) == 1_000_000


def test_varints_match_kafkas_encoding():
    assert encode_varint(-1) == b"\x01" and encode_varint(0) == b"\x00" and encode_varint(1) == b"\x02"
    for n in (63, -64, 64, 300, -2**31, 2**31 - 1, 2**63 - 1, -2**63):
        assert decode_varint(encode_varint(n), 0, 10) == (n, len(encode_varint(n)))


def test_control_batches_decode_with_their_marker():
    raw = encode_control_batch(0, producer_id=7, producer_epoch=2, coordinator_epoch=9, base_offset=3)
    b = next(decode_batches(raw))
    assert b.is_control and b.is_transactional
    (marker,) = b.records()
    assert (marker.control_type, marker.coordinator_epoch, marker.offset) == ("ABORT", 9, 3)


def test_unknown_control_type_still_decodes():
    raw = encode_batch([Record(b"\x00\x00", key=struct.pack(">hh", 0, 42), timestamp=1)], is_control=True)
    (r,) = next(decode_batches(raw)).records()
    assert r.control_type == "UNKNOWN" and r.control_type_id == 42


def test_rewrites_keep_the_crc_valid_or_recompute_it():
    raw = bytearray(encode_batch([b"a", b"b"], timestamp=5))
    set_base_offset(raw, 0, 1234)
    set_partition_leader_epoch(raw, 0, 17)
    b = next(decode_batches(bytes(raw)))
    assert b.is_valid() and b.base_offset == 1234 and b.partition_leader_epoch == 17
    set_log_append_time(raw, 0, len(raw), 999)
    b = next(decode_batches(bytes(raw)))
    assert b.is_valid() and b.timestamp_type == "LogAppendTime" and [r.timestamp for r in b] == [999, 999]


# -- bad bytes: one small test per case -------------------------------------------------------------

def good() -> bytearray:
    return bytearray(encode_batch([(b"k", b"value"), (None, b"v2")], timestamp=1000))


def recrc(buf: bytearray) -> bytes:
    import crc32c
    buf[17:21] = struct.pack(">I", crc32c.crc32c(bytes(buf[21:])))
    return bytes(buf)


def test_crc_mismatch_is_reported_with_position():
    buf = good()
    buf[-1] ^= 1
    data = encode_batch([b"x"]) + bytes(buf)
    batches = list(decode_batches(data))
    assert batches[0].is_valid() and not batches[1].is_valid()
    with pytest.raises(CorruptRecordError, match="crc") as e:
        batches[1].records()
    assert e.value.position == len(encode_batch([b"x"]))


def test_record_count_too_large():
    buf = good()
    buf[57:61] = struct.pack(">i", 3)
    with pytest.raises(InvalidRecordError, match="premature|count"):
        next(decode_batches(recrc(buf))).records()


def test_record_count_too_small():
    buf = good()
    buf[57:61] = struct.pack(">i", 1)
    with pytest.raises(InvalidRecordError, match="remaining"):
        next(decode_batches(recrc(buf))).records()


def test_record_count_absurd_is_refused_before_allocating():
    buf = good()
    buf[57:61] = struct.pack(">i", 2**31 - 1)
    with pytest.raises(InvalidRecordError, match="count"):
        next(decode_batches(recrc(buf))).records()


def test_varint_overflow():
    buf = good()
    buf[61:66] = b"\xff\xff\xff\xff\xff"
    with pytest.raises(InvalidRecordError):
        next(decode_batches(recrc(buf))).records()


def test_negative_key_length():
    buf = good()
    i = 61 + 1 + 1 + 1 + 1  # length, attributes, ts delta, offset delta
    buf[i] = 0x05  # zigzag -3
    with pytest.raises(InvalidRecordError):
        next(decode_batches(recrc(buf))).records()


def test_oversized_value_length():
    buf = good()
    i = 61 + 4 + 1 + 1  # ... key length, key "k"
    buf[i] = 0x7E  # 63 bytes: past the record
    with pytest.raises(InvalidRecordError):
        next(decode_batches(recrc(buf))).records()


def test_truncated_batch_is_incomplete_not_corrupt():
    data = encode_batch([b"a"]) + bytes(good())[:-5]
    with pytest.raises(IncompleteBatchError) as e:
        list(decode_batches(data))
    assert e.value.valid_bytes == len(encode_batch([b"a"]))
    assert not isinstance(e.value, CorruptRecordError)
    assert len(list(decode_batches(data, allow_incomplete=True))) == 1


def test_size_below_minimum_is_corrupt():
    with pytest.raises(CorruptRecordError, match="minimum"):
        list(decode_batches(b"\0" * 40))


def test_unknown_magic_is_corrupt():
    buf = good()
    buf[16] = 7
    with pytest.raises(CorruptRecordError, match="magic"):
        list(decode_batches(bytes(buf)))


def test_unknown_codec_id():
    buf = good()
    buf[22] = 6
    with pytest.raises(InvalidRecordError, match="compression"):
        next(decode_batches(recrc(buf))).records()


@pytest.mark.parametrize("codec", ["gzip", "snappy", "lz4", "zstd"])
def test_truncated_compressed_payload(codec):
    buf = bytearray(encode_batch([b"value-%d" % i * 20 for i in range(50)], compression=codec))
    cut = buf[:len(buf) - 20]
    cut[8:12] = struct.pack(">i", len(cut) - 12)
    with pytest.raises(InvalidRecordError):
        next(decode_batches(recrc(cut))).records()


def test_decompression_bomb_is_bounded():
    import zlib
    from pylog.record.compression import decompress
    bomb = zlib.compress(b"\0" * (50 << 20), 9)
    c = zlib.compressobj(9, zlib.DEFLATED, 31)
    gz = c.compress(b"\0" * (50 << 20)) + c.flush()
    with pytest.raises(InvalidRecordError, match="past"):
        decompress(1, gz, max_output_bytes=1 << 20)
    assert len(bomb) < 100_000


@fixture_ok(200)
@given(data=st.binary(max_size=400))
def test_random_bytes_raise_only_pylog_errors(impl, data):
    try:
        for b in decode_batches(data):
            b.records()
    except PylogError:
        pass


@fixture_ok(200)
@given(flips=st.lists(st.tuples(st.integers(0, 10_000), st.integers(1, 255)), min_size=1, max_size=8),
       codec=st.sampled_from(CODECS))
def test_mutated_batches_raise_only_pylog_errors(impl, flips, codec):
    buf = bytearray(encode_batch([Record(b"v" * i, b"k%d" % i, 5, (("h", b"x"),) * (i % 3)) for i in range(40)],
                                 compression=codec))
    for pos, x in flips:
        buf[pos % len(buf)] ^= x
    try:
        for b in decode_batches(bytes(buf)):
            b.records(verify=False)
    except PylogError:
        pass


# -- more: fast paths, byte identity as a property, headers, bombs --------------------------------

key_value = st.tuples(st.one_of(st.none(), st.binary(max_size=60)), st.one_of(st.none(), st.binary(max_size=400)))


def assert_same_bytes_as_kafka_python(ours: bytes, theirs: bytes, codec: str):
    """Byte identity, except where kafka-python alone keeps a batch uncompressed because
    compressing did not shrink it (Kafka's Java builder always compresses, as pylog does):
    then the records must still be the same."""
    if codec != "none" and theirs[22] & 0x07 == 0:
        mine = next(decode_batches(ours))
        assert mine.compression == codec
        assert [(r.offset, r.timestamp, r.key, r.value) for r in mine] == \
            [(r.offset, r.timestamp, r.key, r.value) for r in next(decode_batches(theirs))]
    else:
        assert ours == theirs


@fixture_ok(80)
@given(pairs=st.lists(key_value, min_size=1, max_size=150), codec=st.sampled_from(["none", "snappy"]))
def test_fast_paths_are_byte_identical_to_kafka_python(impl, pairs, codec):
    ts = 1_700_000_000_000
    records = [Record(v, k, ts) for k, v in pairs]
    expected = kafka_python_builder(records, codec)
    ours = encode_batch(pairs, compression=codec, partition_leader_epoch=0, timestamp=ts)
    assert_same_bytes_as_kafka_python(ours, expected, codec)
    assert encode_batch(records, compression=codec, partition_leader_epoch=0) == ours
    values = [v for _, v in pairs]
    assert_same_bytes_as_kafka_python(encode_batch(values, compression=codec, partition_leader_epoch=0, timestamp=ts),
                                      kafka_python_builder([Record(v, None, ts) for v in values], codec), codec)


def test_snappy_batch_is_byte_identical_to_kafka_python_when_compression_pays(impl):
    pairs = [(b"key-%d" % (i % 10), b"compressible value %d " % i * 5) for i in range(500)]
    expected = kafka_python_builder([Record(v, k, 5) for k, v in pairs], "snappy")
    assert expected[22] & 0x07 == 2
    assert encode_batch(pairs, compression="snappy", partition_leader_epoch=0, timestamp=5) == expected


def test_fast_path_refuses_what_it_cannot_encode(impl):
    with pytest.raises(InvalidArgumentError, match="value"):
        encode_batch([(b"k", "text")] * 100)
    with pytest.raises(InvalidArgumentError):
        encode_batch([(b"k", b"v", b"extra")] * 100)
    mixed = [(b"k", b"v")] * 70 + [b"plain"]
    assert [(r.key, r.value) for r in next(decode_batches(encode_batch(mixed)))][-2:] == \
        [(b"k", b"v"), (None, b"plain")]


def test_commit_marker_carries_its_coordinator_epoch():
    raw = encode_control_batch(1, producer_id=11, producer_epoch=4, coordinator_epoch=123, base_offset=9,
                               timestamp=77)
    b = next(decode_batches(raw))
    (marker,) = b.records()
    assert (marker.control_type, marker.control_type_id, marker.coordinator_epoch) == ("COMMIT", 1, 123)
    assert (b.producer_id, b.producer_epoch, marker.offset, marker.timestamp) == (11, 4, 9, 77)


def test_control_key_too_short_is_invalid():
    raw = encode_batch([Record(b"\x00\x00\x00\x00\x00\x00", key=b"\x00", timestamp=1)], is_control=True)
    with pytest.raises(InvalidRecordError, match="control"):
        next(decode_batches(raw)).records()


def test_set_log_append_time_on_a_batch_inside_a_larger_buffer():
    first = encode_batch([b"a"], timestamp=1)
    buf = bytearray(first + encode_batch([b"b", b"c"], base_offset=1, timestamp=2))
    set_log_append_time(buf, len(first), len(buf) - len(first), 555)
    a, b = decode_batches(bytes(buf))
    assert a.is_valid() and b.is_valid() and b.max_timestamp == 555 and [r.timestamp for r in b] == [555, 555]


def with_headers() -> bytearray:
    return bytearray(encode_batch([Record(b"v", None, 1000, (("hk", b"hv"),))]))


def header_at() -> int:
    # length, attributes, ts delta, offset delta, key length (null), value length, "v", header count
    return 61 + 1 + 1 + 1 + 1 + 1 + 1 + 1 + 1


def test_negative_header_key_length():
    buf = with_headers()
    buf[header_at()] = 0x03  # zigzag -2
    with pytest.raises(InvalidRecordError, match="header key length"):
        next(decode_batches(recrc(buf))).records()


def test_oversized_header_value_length():
    buf = with_headers()
    buf[header_at() + 1 + 2] = 0x7E  # header value length 63: past the record
    with pytest.raises(InvalidRecordError, match="header value length"):
        next(decode_batches(recrc(buf))).records()


def test_negative_header_count():
    buf = with_headers()
    buf[header_at() - 1] = 0x03
    with pytest.raises(InvalidRecordError, match="header count"):
        next(decode_batches(recrc(buf))).records()


def test_oversized_key_length():
    buf = good()
    buf[61 + 4] = 0x7E  # key length 63 in a 12-byte record
    with pytest.raises(InvalidRecordError):
        next(decode_batches(recrc(buf))).records()


def test_negative_record_count():
    buf = good()
    buf[57:61] = struct.pack(">i", -1)
    with pytest.raises(InvalidRecordError, match="negative"):
        next(decode_batches(recrc(buf))).records()


def test_negative_batch_length_is_corrupt():
    buf = good()
    buf[8:12] = struct.pack(">i", -5)
    with pytest.raises(CorruptRecordError, match="minimum"):
        list(decode_batches(bytes(buf)))


def test_buffer_ending_inside_a_header_is_incomplete():
    data = encode_batch([b"a"]) + bytes(good())[:10]
    with pytest.raises(IncompleteBatchError) as e:
        list(decode_batches(data))
    assert e.value.valid_bytes == len(encode_batch([b"a"]))


def test_v2_batch_below_its_61_byte_header_is_corrupt():
    buf = good()
    buf[8:12] = struct.pack(">i", 30)
    with pytest.raises(CorruptRecordError, match="61"):
        list(decode_batches(bytes(buf)))


@pytest.mark.parametrize("codec", ["gzip", "snappy", "lz4", "zstd"])
def test_decompression_bomb_is_bounded_for(codec):
    from pylog.record.compression import CODEC_IDS as IDS, compress, decompress
    bomb = compress(IDS[codec], b"\0" * (8 << 20))
    assert len(bomb) < 1 << 20
    with pytest.raises(InvalidRecordError, match="past"):
        decompress(IDS[codec], bomb, max_output_bytes=1 << 20)


@pytest.mark.parametrize("codec", ["gzip", "snappy", "lz4", "zstd"])
def test_garbage_compressed_payload(codec):
    buf = bytearray(encode_batch([b"value"] * 20, compression=codec))
    buf[61:] = bytes(range(len(buf) - 61))
    with pytest.raises(InvalidRecordError):
        next(decode_batches(recrc(buf))).records()


def _decoded_prefix(data) -> int | str:
    """What decode_batches makes of ``data``: the bytes of its complete batches, or the
    error it raises."""
    try:
        return sum(b.size for b in decode_batches(data))
    except IncompleteBatchError as e:
        return e.valid_bytes
    except CorruptRecordError as e:
        return f"corrupt at {e.position}"


def _prefix(data) -> int | str:
    try:
        return complete_batch_bytes(data)
    except CorruptRecordError as e:
        return f"corrupt at {e.position}"


@settings(max_examples=300, deadline=None)
@given(sizes=st.lists(st.integers(1, 300), min_size=1, max_size=5), cut=st.integers(0, 2000),
       flip=st.tuples(st.integers(0, 2000), st.integers(0, 255)))
def test_complete_batch_bytes_cuts_where_decoding_would(sizes, cut, flip):
    """The follower's cut of a fetch to whole batches reads sizes only, yet ends, or finds
    corruption, exactly where decoding every batch does."""
    data = bytearray(b"".join(encode_batch([b"v" * n], base_offset=i) for i, n in enumerate(sizes)))
    data = data[:cut] if cut < len(data) else data
    if flip[0] < len(data):
        data[flip[0]] = flip[1]
    assert _prefix(bytes(data)) == _decoded_prefix(bytes(data))
    assert _prefix(memoryview(data)) == _decoded_prefix(bytes(data))


def test_records_decoded_in_c_are_whole_and_left_to_reference_counting(tmp_path):
    """The C decoder builds each Record without running its __init__ and leaves it
    untracked by the cycle collector (it holds bytes, ints, None and header tuples only,
    like a tuple of atomic values): every field as the Python decoder gives it, control
    records still built through their own class, and reads not slowed by collector passes
    over millions of young records (benches/bench_read.py)."""
    import gc

    from pylog import Log, Record
    from pylog.record import backend
    if "c" not in backend.available():
        pytest.skip("pylog._speedups is not built")
    with Log.open(tmp_path / "t-0") as log:
        log.append([Record(b"v", key=b"k", timestamp=7, headers=[("h", b"x"), ("n", None)]), b"w"])
        log.append([b"t"], producer_id=3, producer_epoch=0, base_sequence=0, is_transactional=True)
        log.append_txn_marker(3, 0, commit=True)
        fields = lambda r: (r.value, r.key, r.timestamp, r.headers, r.offset, r.topic, r.partition,  # noqa: E731
                            r.timestamp_type)
        with backend.use("python"):
            expected = [fields(r) for r in log.records()]
        with backend.use("c"):
            read = log.records()
            assert [fields(r) for r in read] == expected
            assert not any(gc.is_tracked(r) for r in log.read(0).records())
            [control] = [r for b in log.read(3).batches() for r in b.records()]
            assert control.is_control and control.control_type_id == 1  # COMMIT


def test_records_keep_the_offset_deltas_they_are_given_as_compaction_writes_them():
    from kafka.record.default_records import DefaultRecordBatchBuilder

    from pylog.record import build_batch
    from pylog.record.encode import encode_records
    records = [Record(b"a", b"k1", 10, (("h", b"x"),)), Record(None, b"k2", 12), Record(b"c", None, 11)]
    deltas = [0, 3, 7]
    payload, count, max_ts = encode_records(records, 10, offset_deltas=deltas)
    assert (count, max_ts) == (3, 12)
    ours = build_batch(payload, count, base_offset=100, base_timestamp=10, max_timestamp=12, last_offset_delta=7,
                       partition_leader_epoch=0)
    theirs = DefaultRecordBatchBuilder(2, 0, False, -1, -1, -1, 1 << 30)
    for delta, r in zip(deltas, records):
        theirs.append(delta, r.timestamp, r.key, r.value, list(r.headers))
    kafka_python = bytearray(theirs.build())
    struct.pack_into(">q", kafka_python, 0, 100)  # kafka-python leaves the base offset to the log
    assert ours == bytes(kafka_python)
    assert [r.offset for r in next(decode_batches(ours))] == [100, 103, 107]
