"""``(key, value)`` tuples take the encoders' fast paths and encode as the Records they stand for."""

from __future__ import annotations

from pylog.record.batch import decode_batches
from pylog.record.encode import encode_batch, encode_batch_buffer
from pylog.record.record import Record


def test_pairs_encode_byte_for_byte_as_records(impl):
    pairs = [(b"k%d" % i, b"v%d" % i) for i in range(100)] + [(None, b"no key"), (b"no value", None), b"plain"]
    records = [Record(v, key=k) for k, v in pairs[:-1]] + [Record(b"plain")]
    assert bytes(encode_batch_buffer(pairs, timestamp=7)) == bytes(encode_batch(records, timestamp=7))


def test_pairs_decode_back_to_their_keys_and_values(impl):
    pairs = [(b"k%d" % i, b"v%d" % i) for i in range(50)] + [(None, None)]
    (batch,) = decode_batches(bytes(encode_batch_buffer(pairs, timestamp=7)))
    assert [(r.key, r.value, r.offset, r.timestamp) for r in batch] == \
        [(k, v, i, 7) for i, (k, v) in enumerate(pairs)]
