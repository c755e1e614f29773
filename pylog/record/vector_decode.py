"""Decoding many v2 records to objects at once with numpy, the ``numpy`` backend's decoder
for batches of at least ``backend.VECTOR_MIN_RECORDS`` records (docs/format/batch.md).

The numpy scan (:mod:`pylog.record.scan`) finds every record's fields, then one
comprehension builds the records: the same records as :mod:`pylog.record.python_codec`'s
loop, which also decodes any batch the scan refuses so that its error names the fault.
Cost: O(bytes) numpy work plus one object per record.
"""

from __future__ import annotations

import numpy as np

from pylog.record import python_codec
from pylog.record.scan import Malformed, parse_all_headers, scan_numpy


def decode_records_vectorised(buf, count: int, base_offset: int, base_timestamp: int, append_time, record_type,
                              topic=None, partition=None, timestamp_type=None) -> list:
    """``count`` v2 records of the uncompressed ``buf``, as
    :func:`pylog.record.python_codec.decode_records` returns them (same arguments, same
    errors). O(len(buf))."""
    buf = bytes(buf)
    try:
        f = scan_numpy(buf, np.array([count]), np.array([len(buf)]))
        headers = parse_all_headers(buf, f, True)
    except Malformed:  # the loop names the fault
        return python_codec.decode_records(buf, count, base_offset, base_timestamp, append_time, record_type,
                                           topic, partition, timestamp_type)
    timestamps = [append_time] * count if append_time is not None else (f.ts_delta + base_timestamp).tolist()
    out = [record_type(buf[p:p + n] if n >= 0 else None, buf[q:q + m] if m >= 0 else None, t, h, o)
           for p, n, q, m, t, h, o in zip(f.value_pos.tolist(), f.value_len.tolist(), f.key_pos.tolist(),
                                          f.key_len.tolist(), timestamps, headers,
                                          (f.off_delta + base_offset).tolist())]
    if timestamp_type is not None:
        for r in out:
            r.topic, r.partition, r.timestamp_type = topic, partition, timestamp_type
    return out
