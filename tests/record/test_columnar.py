"""Columnar decode: the same records as the object decoder, as columns and Arrow, with
both implementations (C speedups and numpy)."""

from __future__ import annotations

import struct

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pylog import CorruptRecordError, InvalidRecordError, PylogError, Record, decode_batches, encode_batch
from pylog.record import encode_control_batch
from pylog.record.columnar import Columns, arrow_schema, decode_columns
from tests.conftest import needs_samples, sample_logs

CODECS = ["none", "gzip", "snappy", "lz4", "zstd"]


def fixture_ok(max_examples: int):
    """Hypothesis settings for tests that also take the (per-test) ``impl`` fixture."""
    return settings(max_examples=max_examples, deadline=None,
                    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])


def _objects(data, include_control=False):
    return [r for b in decode_batches(data, allow_incomplete=True) for r in b.records()
            if include_control or not r.is_control]


def _assert_same(cols: Columns, recs, *, headers=True):
    assert cols.num_rows == len(recs)
    assert cols.offsets.tolist() == [r.offset for r in recs]
    assert cols.timestamps.tolist() == [r.timestamp for r in recs]
    assert cols.keys() == [r.key for r in recs]
    assert cols.values() == [r.value for r in recs]
    if headers:
        assert cols.headers == [tuple(r.headers) for r in recs]
    assert cols.offsets.dtype == np.int64 and cols.timestamps.dtype == np.int64
    assert cols.key_offsets.dtype == np.int32 and cols.value_offsets.dtype == np.int32
    assert len(cols.key_offsets) == len(cols.value_offsets) == cols.num_rows + 1


@needs_samples
@pytest.mark.parametrize("log_path", sample_logs(), ids=lambda p: "/".join(p.parts[-2:]))
def test_columns_match_the_object_decoder_on_every_kafka_sample(log_path, impl):
    data = log_path.read_bytes()
    _assert_same(decode_columns(data, include_headers=True), _objects(data))
    with_control = decode_columns(data, include_control=True)
    _assert_same(with_control, _objects(data, include_control=True), headers=False)
    types = {b.position: b.timestamp_type for b in decode_batches(data)}
    assert set(with_control.timestamp_types.tolist()) <= {-1, 0, 1} and (
        -1 in with_control.timestamp_types.tolist()) == ("NoTimestampType" in types.values())


record = st.builds(
    Record,
    value=st.one_of(st.none(), st.binary(max_size=300)),
    key=st.one_of(st.none(), st.binary(max_size=40)),
    timestamp=st.integers(min_value=0, max_value=2**42),
    headers=st.lists(st.tuples(st.text(max_size=8), st.one_of(st.none(), st.binary(max_size=16))),
                     max_size=3).map(tuple))
batch_spec = st.tuples(st.lists(record, min_size=1, max_size=60), st.sampled_from(CODECS), st.booleans())


@fixture_ok(120)
@given(batches=st.lists(batch_spec, min_size=1, max_size=5), control_at=st.integers(-1, 5))
def test_columns_match_the_object_decoder_on_generated_batches(impl, batches, control_at):
    data, offset = b"", 0
    for i, (recs, codec, append_time) in enumerate(batches):
        if i == control_at:
            data += encode_control_batch(1, producer_id=1, producer_epoch=0, base_offset=offset, timestamp=3)
            offset += 1
        data += encode_batch(recs, base_offset=offset, compression=codec, log_append_time=77,
                             timestamp_type="LogAppendTime" if append_time else "CreateTime")
        offset += len(recs)
    _assert_same(decode_columns(data, include_headers=True), _objects(data))
    _assert_same(decode_columns(data), _objects(data), headers=False)
    _assert_same(decode_columns(data, include_control=True), _objects(data, True), headers=False)
    lo, hi = offset // 3, 2 * offset // 3 + 1
    bounded = decode_columns(data, min_offset=lo, max_offset=hi, include_headers=True)
    _assert_same(bounded, [r for r in _objects(data) if lo <= r.offset < hi])


def test_nulls_bounds_and_timestamp_types(impl):
    raw = encode_batch([Record(None, key=b"k", timestamp=10), Record(b"v", timestamp=11), (None, b"")],
                       base_offset=100, timestamp=12)
    raw += encode_batch([b"x"], base_offset=103, timestamp_type="LogAppendTime", log_append_time=999)
    cols = decode_columns(raw)
    assert cols.keys() == [b"k", None, None, None]
    assert cols.values() == [None, b"v", b"", b"x"]
    assert cols.timestamps.tolist() == [10, 11, 12, 999]
    assert cols.timestamp_types.tolist() == [0, 0, 0, 1]
    assert decode_columns(raw, min_offset=101, max_offset=103).offsets.tolist() == [101, 102]


def test_ten_thousand_record_batch_of_large_values(impl):
    values = [bytes([i % 251]) * (i % 700) for i in range(10_000)]
    cols = decode_columns(encode_batch(values, timestamp=5))
    assert cols.values() == values and cols.offsets.tolist() == list(range(10_000))


def test_records_with_length_varints_of_three_bytes(impl):
    values = [b"a" * 9000, b"b", b"c" * 70_000]
    assert decode_columns(encode_batch(values, timestamp=1)).values() == values


def test_control_records_are_skipped_unless_asked_for(impl):
    data = encode_batch([b"a"], base_offset=0, timestamp=1)
    data += encode_control_batch(0, producer_id=3, producer_epoch=1, coordinator_epoch=5, base_offset=1,
                                 timestamp=2)
    assert decode_columns(data).offsets.tolist() == [0]
    cols = decode_columns(data, include_control=True)
    assert cols.offsets.tolist() == [0, 1]
    assert cols.keys()[1] == struct.pack(">hh", 0, 0) and cols.values()[1] == struct.pack(">hi", 0, 5)


def test_torn_final_batch_is_ignored(impl):
    whole = encode_batch([b"a", b"b"], timestamp=1)
    data = whole + encode_batch([b"c"], base_offset=2, timestamp=1)[:-3]
    assert decode_columns(data).values() == [b"a", b"b"]


def test_crc_mismatch_names_the_position_of_the_bad_batch(impl):
    first = encode_batch([b"a"], timestamp=1)
    bad = bytearray(encode_batch([b"b", b"c"], base_offset=1, timestamp=1))
    bad[-2] ^= 0x01  # the last value byte: "c" -> "b"
    with pytest.raises(CorruptRecordError) as e:
        decode_columns(first + bytes(bad), position_base=1000, path="x.log")
    assert e.value.position == 1000 + len(first) and e.value.path == "x.log"
    assert decode_columns(first + bytes(bad), verify=False).values() == [b"a", b"b", b"b"]


def test_structural_fault_names_the_position_of_the_bad_batch(impl):
    import crc32c
    first = encode_batch([b"a"] * 40, timestamp=1)
    bad = bytearray(encode_batch([b"b"] * 40, base_offset=40, timestamp=1))
    bad[57:61] = struct.pack(">i", 39)  # one record fewer than the bytes hold
    bad[17:21] = struct.pack(">I", crc32c.crc32c(bytes(bad[21:])))
    with pytest.raises(InvalidRecordError) as e:
        decode_columns(first + bytes(bad))
    assert e.value.position == len(first)


@fixture_ok(200)
@given(flips=st.lists(st.tuples(st.integers(0, 10_000), st.integers(1, 255)), min_size=1, max_size=6),
       codec=st.sampled_from(CODECS), verify=st.booleans())
def test_mutated_bytes_raise_only_pylog_errors(impl, flips, codec, verify):
    buf = bytearray(encode_batch([(b"k%d" % i, b"v" * i) for i in range(40)], compression=codec)
                    + encode_batch([Record(b"x", headers=(("h", b"1"),))], base_offset=40))
    for pos, x in flips:
        buf[pos % len(buf)] ^= x
    try:
        decode_columns(bytes(buf), verify=verify, include_headers=True)
    except PylogError:
        pass


def test_concat_and_slice_keep_rows_in_order():
    a = decode_columns(encode_batch([(b"k1", b"v1"), (None, b"v2")], timestamp=1))
    b = decode_columns(encode_batch([b"v3", None], base_offset=2, timestamp=2))
    both = Columns.concat([a, Columns.empty(), b])
    assert both.values() == [b"v1", b"v2", b"v3", None] and both.keys() == [b"k1", None, None, None]
    picked = both.slice(np.array([True, False, True, True]))
    assert picked.values() == [b"v1", b"v3", None] and picked.offsets.tolist() == [0, 2, 3]
    assert Columns.concat([]).num_rows == 0


def test_arrow_batch_has_exactly_sparks_kafka_schema():
    pa = pytest.importorskip("pyarrow")
    types = pytest.importorskip("pyspark.sql.types")
    from pyspark.sql.pandas.types import to_arrow_schema
    spark_schema = types.StructType([
        types.StructField("key", types.BinaryType()), types.StructField("value", types.BinaryType()),
        types.StructField("topic", types.StringType()), types.StructField("partition", types.IntegerType()),
        types.StructField("offset", types.LongType()), types.StructField("timestamp", types.TimestampType()),
        types.StructField("timestampType", types.IntegerType()),
        types.StructField("headers", types.ArrayType(types.StructType([
            types.StructField("key", types.StringType()), types.StructField("value", types.BinaryType())])))])
    expected = to_arrow_schema(spark_schema, timezone="UTC")
    cols = decode_columns(encode_batch([Record(b"v", b"k", 1, (("h", None),))], timestamp=1), include_headers=True)
    assert cols.to_arrow("t", 0).schema.equals(expected)
    assert arrow_schema(pa, True).equals(expected)
    assert cols.to_arrow("t", 0, include_headers=False).schema.equals(pa.schema(list(expected)[:7]))


def test_arrow_batch_values_and_wraps_the_buffers_without_copying(impl):
    pa = pytest.importorskip("pyarrow")
    recs = [Record(b"v%d" % i, None if i == 2 else b"k%d" % i, 1000 + i, (("h", b"%d" % i),)) for i in range(5)]
    cols = decode_columns(encode_batch(recs, base_offset=7), include_headers=True)
    rb = cols.to_arrow("topic", 3)
    assert rb.column("key").to_pylist() == [r.key for r in recs]
    assert rb.column("value").to_pylist() == [r.value for r in recs]
    assert rb.column("topic").to_pylist() == ["topic"] * 5
    assert rb.column("partition").to_pylist() == [3] * 5
    assert rb.column("offset").to_pylist() == list(range(7, 12))
    assert [t.timestamp() for t in rb.column("timestamp").to_pylist()] == [1.0 + i / 1000 for i in range(5)]
    assert rb.column("timestampType").to_pylist() == [0] * 5
    assert rb.column("headers").to_pylist()[4] == [{"key": "h", "value": b"4"}]
    assert rb.column("value").buffers()[2].address == pa.py_buffer(cols.value_data).address
    assert rb.column("key").buffers()[1].address == cols.key_offsets.ctypes.data
    assert rb.column("offset").buffers()[1].address == cols.offsets.ctypes.data
