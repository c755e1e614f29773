"""A log as an Arrow table or a pandas DataFrame: ``Log.read_arrow`` and ``Log.to_pandas``.

Both read through the columnar decode (pylog/record/columnar.py): no Python object per
record, keys and values wrapped into Arrow without a copy. The table has the schema of
Spark's Kafka source (``key binary, value binary, topic string, partition int32, offset
int64, timestamp timestamp[us, UTC], timestampType int32`` and, with ``include_headers``,
``headers list<struct<key string, value binary>>``), so the same data reads the same way
from pylog, from Spark and from Kafka.

``pyarrow`` (and ``pandas`` for ``to_pandas``) are optional: ``pip install
'pylog-kafka[arrow]'``. Without them the call raises :class:`MissingDependencyError`.
"""

from __future__ import annotations

import importlib

from pylog.errors import MissingDependencyError

#: Bytes per fetch: whole batches, decoded a fetch at a time.
FETCH_BYTES = 8 << 20


def require(module: str, purpose: str):
    """Import an optional package, or raise :class:`MissingDependencyError` naming the extra."""
    try:
        return importlib.import_module(module)
    except ImportError:
        raise MissingDependencyError(
            f"{purpose} needs the optional package {module!r}: pip install 'pylog-kafka[arrow]'") from None


def read_arrow(log, start_offset: int | None = None, end_offset: int | None = None, *,
               isolation: str = "uncommitted", include_headers: bool = False, max_bytes: int = FETCH_BYTES):
    """The data records of ``log`` in ``[start_offset, end_offset)`` (defaults: the whole log)
    as a ``pyarrow.Table``, the same records as ``log.records(...)`` in the same order.

    ``isolation`` is that of :meth:`Log.read`; ``"committed"`` leaves out aborted
    transactions. ``max_bytes`` bounds one fetch; the table holds everything read.
    Cost: O(bytes) in C/numpy plus O(batches + records) light Python steps; memory about
    the size of the keys and values read. Reads only.
    """
    pa = require("pyarrow", "Log.read_arrow")
    # Imported on first use: columnar imports numpy (~0.1 s), and every Log imports this module.
    from pylog.record.columnar import arrow_schema
    batches = [cols.to_arrow(log.topic, log.partition, include_headers=include_headers)
               for cols in _columns(log, start_offset, end_offset, isolation, include_headers, max_bytes)]
    return pa.Table.from_batches(batches, schema=arrow_schema(pa, include_headers))


def to_pandas(log, start_offset: int | None = None, end_offset: int | None = None, **options):
    """:func:`read_arrow` as a ``pandas.DataFrame`` (``timestamp`` in UTC, keys and values
    ``bytes`` or None). Same options and cost, plus pandas' conversion (O(records) objects)."""
    require("pandas", "Log.to_pandas")
    return read_arrow(log, start_offset, end_offset, **options).to_pandas()


def _columns(log, start_offset, end_offset, isolation: str, include_headers: bool, max_bytes: int):
    """The non-empty ``Columns`` of each fetch from ``start_offset`` to ``end_offset``."""
    offset = log.log_start_offset if start_offset is None else max(start_offset, log.log_start_offset)
    while True:
        fetch = log.read(offset, max_bytes, isolation=isolation, max_offset=end_offset)
        if fetch.size_bytes == 0:
            return
        cols = fetch.columns(include_headers=include_headers)
        if cols.num_rows:
            yield cols
        nxt = fetch.next_offset
        if nxt <= offset:
            return
        offset = nxt
