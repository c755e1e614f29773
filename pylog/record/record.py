"""``Record``: one Kafka record as a user appends it and as a reader gets it back."""

from __future__ import annotations

from pylog.errors import InvalidArgumentError, InvalidRecordError
from pylog.layout import CONTROL_KEY, CONTROL_TYPE_NAMES, END_TXN_MARKER
from pylog.record import backend


class Record:
    """One record: ``value``, ``key``, ``timestamp`` (ms), ``headers`` and, once read,
    its place: ``offset``, ``topic``, ``partition`` and ``timestamp_type``.

    ``key``/``value`` are ``bytes`` or ``None``; ``headers`` is a tuple of
    ``(str, bytes | None)`` pairs. Plain ``bytes`` and ``(key, value)`` tuples are
    accepted wherever a ``Record`` is. ``timestamp_type`` is Kafka's name for what the
    timestamp means, taken from the record's batch: ``"CreateTime"``, ``"LogAppendTime"``
    or ``"NoTimestampType"`` (a magic 0 message). Records read through a :class:`~pylog.Log`
    (``read(...).records()``, ``records()``) have all four; a record decoded straight from
    a batch has its ``offset`` only; the place of a record not read is None.
    The place is not part of equality: a record read back equals the one appended.
    With the C speedups built, ``Record`` is their C type (same attributes and behaviour;
    a decoded record's offset, timestamp and headers are made objects on first access);
    records they decode are not tracked by the cycle collector (they hold no container that
    could lead back to them): do not store a record inside its own fields.

    >>> r = Record(b"v", key=b"k", timestamp=5)
    >>> (r.key, r.value, r.timestamp, r.offset, r.topic, r.partition, r.timestamp_type)
    (b'k', b'v', 5, None, None, None, None)
    """

    __slots__ = ("value", "key", "timestamp", "headers", "offset", "topic", "partition", "timestamp_type")

    is_control = False

    def __init__(self, value, key=None, timestamp=None, headers=(), offset=None):
        self.value = value
        self.key = key
        self.timestamp = timestamp
        self.headers = headers
        self.offset = offset
        self.topic = self.partition = self.timestamp_type = None  # filled by a read

    def __repr__(self) -> str:
        return (f"Record(offset={self.offset!r}, timestamp={self.timestamp!r}, key={self.key!r}, "
                f"value={_short(self.value)}, headers={self.headers!r})")

    def __eq__(self, other) -> bool:
        if not isinstance(other, __class__):
            return NotImplemented
        return (self.offset == other.offset and self.timestamp == other.timestamp
                and self.key == other.key and self.value == other.value
                and tuple(self.headers) == tuple(other.headers))

    __hash__ = None  # mutable


#: The pure-Python ``Record``: pylog's record without the C speedups, tested beside the C one.
PyRecord = Record
if backend.speedups is not None:  # fixed at import: records outlive any switch of the backend
    Record, freed_as_record = backend.speedups.Record, backend.speedups.freed_as_record
else:  # no C compiler at install time, or PYLOG_NO_SPEEDUPS
    def freed_as_record(cls: type) -> type:
        """``cls``: with the C speedups, a subclass of Record adding no field whose
        instances are freed by Record's own dealloc (a quarter of the cost of freeing one)."""
        return cls
if backend.speedups is not None:
    Record.__doc__ = PyRecord.__doc__
    PyRecord.__name__ = PyRecord.__qualname__ = "PyRecord"  # what its pickles name


class ControlRecord(Record):
    """The single record of a control batch: a COMMIT/ABORT transaction marker or another
    control type (``control_type`` is the name, e.g. ``"COMMIT"``, or ``"UNKNOWN"``)."""

    __slots__ = ("control_type", "control_type_id", "coordinator_epoch")

    is_control = True

    def __init__(self, value, key=None, timestamp=None, headers=(), offset=None):
        super().__init__(value, key, timestamp, headers, offset)
        if key is None or len(key) < CONTROL_KEY.size:
            raise InvalidRecordError("control record key is shorter than 4 bytes")
        version, type_id = CONTROL_KEY.unpack_from(key)
        if version < 0:
            raise InvalidRecordError(f"control record key has negative version {version}")
        self.control_type_id = type_id
        self.control_type = CONTROL_TYPE_NAMES.get(type_id, "UNKNOWN")
        self.coordinator_epoch = None
        if type_id in (0, 1):
            if value is None or len(value) < END_TXN_MARKER.size:
                raise InvalidRecordError("transaction marker value is shorter than 6 bytes")
            self.coordinator_epoch = END_TXN_MARKER.unpack_from(value)[1]

    def __repr__(self) -> str:
        return f"ControlRecord(offset={self.offset!r}, type={self.control_type}, timestamp={self.timestamp!r})"


def _short(value) -> str:
    if value is None or len(value) <= 32:
        return repr(value)
    return repr(bytes(value[:32]))[:-1] + f"...' ({len(value)} bytes)"


def as_record(item) -> Record:
    """Coerce what users pass (``Record``, ``bytes``, ``(key, value)``) into a ``Record``."""
    if isinstance(item, Record):
        return item
    if isinstance(item, (bytes, bytearray, memoryview)):
        return Record(bytes(item))
    if isinstance(item, tuple) and len(item) == 2:
        return Record(item[1], key=item[0])
    if item is None:
        return Record(None)
    raise InvalidArgumentError(
        f"cannot append {type(item).__name__}: expected Record, bytes or a (key, value) tuple")
