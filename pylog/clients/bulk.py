"""The records of ``Producer.send_batch``: columns (lists, tuples, numpy arrays, pandas
Series, Arrow arrays) turned into the items ``Log.append`` takes, every record checked
before anything is appended, and their sizes for the producer's ``batch_size``.

An item is the cheapest form ``Log.append`` encodes: the value ``bytes`` itself for a
record with only a value, a ``(key, value)`` tuple with a key, a :class:`Record` when it
has headers or a timestamp. Plain bytes columns cost a ``b"".join`` each to check and
size (C speed); anything else is checked record by record in Python.
"""

from __future__ import annotations

from bisect import bisect_left
from itertools import accumulate, chain
from operator import add, itemgetter

from pylog.errors import InvalidArgumentError
from pylog.record.encode import check_record
from pylog.record.record import Record

#: A record's fixed fields in a batch, added to its key and value for ``batch_size``.
RECORD_OVERHEAD_BYTES = 21


def record_item(value, key=None, headers=None, timestamp_ms=None):
    """One record as an item, checked: :class:`InvalidArgumentError` says what is wrong."""
    if type(value) is bytes and not headers and timestamp_ms is None and (key is None or type(key) is bytes):
        return value if key is None else (key, value)
    return check_record(Record(value, key, timestamp_ms, _header_tuple(headers)))


def item_bytes(item) -> int:
    """The size an item counts for in ``batch_size``: its key and value plus the overhead."""
    if type(item) is bytes:
        return RECORD_OVERHEAD_BYTES + len(item)
    key, value = item if type(item) is tuple else (item.key, item.value)
    return RECORD_OVERHEAD_BYTES + (0 if key is None else len(key)) + (0 if value is None else len(value))


def bulk_items(values, keys=None, headers=None, timestamps_ms=None) -> tuple[list, list | None, "RecordSizes"]:
    """The items of the records given as columns, their keys (a list, or None) and their
    sizes. Raises :class:`InvalidArgumentError` naming the first bad record or column. The
    returned lists may be the caller's own: the caller copies what it keeps."""
    if values is None:
        raise InvalidArgumentError("values must be a column (one item per record), not None")
    values = _as_list(values, "values")
    n = len(values)
    keys, headers, timestamps_ms = (_as_list(c, name, n) for c, name in
                                    ((keys, "keys"), (headers, "headers"), (timestamps_ms, "timestamps_ms")))
    if headers is None and timestamps_ms is None:
        try:
            payload = len(b"".join(values)) + (0 if keys is None else len(b"".join(keys)))
        except TypeError:
            pass  # a None, or not bytes: checked one by one below
        else:  # no None anywhere: the values alone, or (key, value) pairs
            items = values if keys is None else list(zip(keys, values))
            kind = VALUES if keys is None else PAIRS
            return items, keys, RecordSizes(items, payload + RECORD_OVERHEAD_BYTES * n, kind)
    items = [_checked(i, values[i], None if keys is None else keys[i], None if headers is None else headers[i],
                      None if timestamps_ms is None else timestamps_ms[i]) for i in range(n)]
    return items, keys, RecordSizes(items, sum(map(item_bytes, items)))


#: What a run of items holds: values only, ``(key, value)`` pairs of bytes, or any item.
VALUES, PAIRS, ANY = "values", "pairs", "any"


class RecordSizes:
    """The sizes of a run of items, for cutting it into batches of ``batch_size``: the
    total is known; prefix sums are built the first time a cut falls inside the run (at C
    speed for values and pairs)."""
    __slots__ = ("items", "total_bytes", "_kind", "_sums")

    def __init__(self, items: list, total_bytes: int, kind: str = ANY):
        self.items, self.total_bytes, self._kind, self._sums = items, total_bytes, kind, None

    def fill(self, lo: int, room_bytes: int) -> tuple[int, int]:
        """``(hi, size_bytes)``: the items from ``lo`` that fill ``room_bytes``, up to and
        including the first one that reaches it, or all the rest if they do not."""
        n = len(self.items)
        if self._sums is None:
            if lo == 0 and self.total_bytes < room_bytes:
                return n, self.total_bytes
            self._sums = [0, *accumulate(_item_sizes(self.items, self._kind))]
        sums = self._sums
        hi = min(bisect_left(sums, sums[lo] + room_bytes, lo + 1), n)
        return hi, sums[hi] - sums[lo]

    def of(self, positions: list[int]) -> "RecordSizes":
        """The sizes of the items at ``positions``, as a run of their own."""
        items = [self.items[i] for i in positions]
        if self._kind == PAIRS:  # the keys' and values' lengths, two calls of C a record
            total_bytes = sum(map(len, chain.from_iterable(items))) + RECORD_OVERHEAD_BYTES * len(items)
        else:
            total_bytes = sum(_item_sizes(items, self._kind))
        return RecordSizes(items, total_bytes, self._kind)


def _item_sizes(items: list, kind: str):
    """``item_bytes`` of each item, without a Python call per item for values and pairs."""
    if kind == VALUES:
        payloads = map(len, items)
    elif kind == PAIRS:
        payloads = map(add, map(len, map(itemgetter(0), items)), map(len, map(itemgetter(1), items)))
    else:
        return map(item_bytes, items)
    return map(RECORD_OVERHEAD_BYTES.__add__, payloads)


def _checked(i: int, value, key, headers, timestamp_ms):
    try:
        return record_item(value, key, headers, timestamp_ms)
    except InvalidArgumentError as e:
        raise InvalidArgumentError(f"record {i}: {e}") from None


def _header_tuple(headers) -> tuple:
    if not headers:
        return ()
    if not isinstance(headers, (str, bytes, bytearray, memoryview)):
        try:
            return tuple(headers)
        except TypeError:
            pass
    raise InvalidArgumentError(f"record headers must be (str, bytes or None) pairs, not {headers!r:.80}")


def _as_list(column, name: str, length: int | None = None) -> list | None:
    """``column`` (a sequence, numpy array, pandas Series, Arrow array) as a list, as long as
    ``length`` when given; None stays None."""
    if column is None:
        return None
    if type(column) is not list:
        given = column
        convert = getattr(column, "to_pylist", None) or getattr(column, "tolist", None)  # Arrow; numpy, pandas
        try:
            column = None if isinstance(given, (str, bytes, bytearray, memoryview)) else (
                convert() if convert is not None else list(given))
        except TypeError:
            column = None
        if type(column) is not list:
            raise InvalidArgumentError(f"{name} must be a column (one item per record), not {type(given).__name__}")
    if length is not None and len(column) != length:
        raise InvalidArgumentError(f"{name} has {len(column)} items for {length} values")
    return column
