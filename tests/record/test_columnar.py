"""Columnar decode: the same records as the object decoder, as columns and Arrow."""

from __future__ import annotations

import pytest

from pylog import Record, decode_batches, encode_batch
from pylog.record.columnar import decode_columns
from tests.conftest import needs_samples, sample_logs


def _objects(data, include_control=False):
    return [r for b in decode_batches(data) for r in b.records() if include_control or not r.is_control]


@needs_samples
@pytest.mark.parametrize("log_path", sample_logs(), ids=lambda p: "/".join(p.parts[-2:]))
def test_columns_match_the_object_decoder_on_every_kafka_sample(log_path):
    data = log_path.read_bytes()
    cols = decode_columns(data, include_headers=True)
    recs = _objects(data)
    assert list(cols.offsets) == [r.offset for r in recs]
    assert list(cols.timestamps) == [r.timestamp for r in recs]
    assert cols.keys() == [r.key for r in recs]
    assert cols.values() == [r.value for r in recs]
    assert cols.headers == [tuple(r.headers) for r in recs]


def test_nulls_bounds_and_timestamp_types():
    raw = encode_batch([Record(None, key=b"k", timestamp=10), Record(b"v", timestamp=11), (None, b"")],
                       base_offset=100, timestamp=12)
    raw += encode_batch([b"x"], base_offset=103, timestamp_type="LogAppendTime", log_append_time=999)
    cols = decode_columns(raw)
    assert cols.keys() == [b"k", None, None, None]
    assert cols.values() == [None, b"v", b"", b"x"]
    assert list(cols.timestamps) == [10, 11, 12, 999]
    assert list(cols.timestamp_types) == [0, 0, 0, 1]
    assert list(decode_columns(raw, min_offset=101, max_offset=103).offsets) == [101, 102]


def test_arrow_batch_has_sparks_kafka_schema_and_shares_the_value_buffer():
    pa = pytest.importorskip("pyarrow")
    cols = decode_columns(encode_batch([(b"k%d" % i, b"v%d" % i) for i in range(5)], timestamp=1000))
    rb = cols.to_arrow("topic", 3, include_headers=True)
    assert [f.name for f in rb.schema] == ["key", "value", "topic", "partition", "offset", "timestamp",
                                           "timestampType", "headers"]
    assert rb.schema.field("value").type == pa.binary()
    assert rb.schema.field("timestamp").type == pa.timestamp("us", tz="UTC")
    assert rb.column("value").to_pylist() == [b"v%d" % i for i in range(5)]
    assert rb.column("topic").to_pylist() == ["topic"] * 5
    assert rb.column("partition").to_pylist() == [3] * 5
    assert rb.column("timestamp").to_pylist()[0].timestamp() == 1.0
    assert rb.column("value").buffers()[2].address == pa.py_buffer(cols.value_data).address


def test_corrupt_batch_is_reported_not_returned():
    from pylog import CorruptRecordError
    raw = bytearray(encode_batch([b"a", b"b"]))
    raw[-1] ^= 0xFF
    with pytest.raises(CorruptRecordError):
        decode_columns(bytes(raw))
