"""``RecordReads``: the record-level reads built on ``read(offset, max_bytes, ...)``, one
owner for a local :class:`~pylog.log.log.Log` and a :class:`~pylog.remote.log.RemoteLog`.

A class using it provides ``read``, ``log_start_offset`` and ``log_end_offset``; for
``list_offset`` also ``high_watermark``, ``last_stable_offset``, ``offset_for_timestamp``,
``refresh`` and ``_check_open``.
"""

from __future__ import annotations

import itertools

from pylog.arguments import check_int
from pylog.layout import OFFSET_RANGE
from pylog.log import list_offset
from pylog.record import arrow


class RecordReads:
    """``records``, ``read_to``, ``read_arrow`` and ``to_pandas`` over ``read``; ``list_offset``."""

    read_arrow, to_pandas = arrow.read_arrow, arrow.to_pandas

    def list_offset(self, spec, *, isolation: str | None = None) -> int | None:
        """Kafka's ListOffsets (:func:`pylog.log.list_offset.list_offset`): the offset
        ``spec`` names (``"earliest"``, ``"latest"``, ``"max-timestamp"``, a timestamp in
        ms, or -1 to -5), "latest" being the log end (``isolation=None``), the high
        watermark (``"uncommitted"``) or the last stable offset (``"committed"``); None when
        no readable record matches. O(1) for earliest and latest, else
        O(segments + index interval).

        >>> import tempfile, os
        >>> from pylog import Log
        >>> with tempfile.TemporaryDirectory() as d, Log.open(os.path.join(d, "t-0")) as log:
        ...     _ = log.append([b"a", b"b"], timestamp=1000)
        ...     _ = log.append([b"open"], producer_id=7, producer_epoch=0, base_sequence=0, is_transactional=True)
        ...     [log.list_offset(s, isolation="committed") for s in ("earliest", "latest", 1000, 5000)]
        [0, 2, 0, None]
        """
        self._check_open()
        return list_offset.list_offset(self, spec, isolation)

    def records(self, start_offset: int | None = None, end_offset: int | None = None, *,
                isolation: str = "uncommitted", max_bytes: int = 4 << 20):
        """Iterate data records in ``[start_offset, end_offset)`` (default: all), ``max_bytes`` a
        read; lazily, one read at a time (the records of a read are chained in C, no Python
        step per record). A bad offset raises :class:`InvalidArgumentError` at the call."""
        for name, offset in (("start_offset", start_offset), ("end_offset", end_offset)):
            if offset is not None:
                check_int(offset, name, OFFSET_RANGE)
        return itertools.chain.from_iterable(self._record_lists(start_offset, end_offset, isolation, max_bytes))

    def read_to(self, offset: int, end_offset: int, max_bytes: int = 1 << 20, *,
                isolation: str = "uncommitted"):
        """``read`` up to ``end_offset`` (``max_offset``), except that a legacy (v0/v1)
        compressed wrapper holding offsets on both sides of ``end_offset`` comes whole (its
        offset is its last inner one, past the bound, so the bounded read stops before it):
        the caller keeps its records below ``end_offset``. Cost: ``read``'s, twice
        when such a wrapper is met."""
        fetch = self.read(offset, max_bytes, isolation=isolation, max_offset=end_offset)
        if fetch.size_bytes == 0 and offset < end_offset:
            fetch = self.read(offset, max_bytes, isolation=isolation)
        return fetch

    def _record_lists(self, start_offset, end_offset, isolation: str, max_bytes: int):
        """The records of each batch of :meth:`records`, a list a batch."""
        offset = self.log_start_offset if start_offset is None else max(start_offset, self.log_start_offset)
        while True:
            if end_offset is None:
                fetch = self.read(offset, max_bytes, isolation=isolation)
            else:
                fetch = self.read_to(offset, end_offset, max_bytes, isolation=isolation)
            if fetch.size_bytes == 0:
                return
            if end_offset is None:
                yield from fetch.record_lists()  # holds no list while the next is decoded
            else:
                for records in fetch.record_lists():
                    if records and records[-1].offset >= end_offset:
                        yield [r for r in records if r.offset < end_offset]  # a wrapper read_to gave whole
                        return
                    yield records
            if fetch.next_offset <= offset:
                return
            offset = fetch.next_offset
