"""Checks of what public calls are given, against the ranges ``pylog/layout.py`` names.

Each check raises :class:`InvalidArgumentError` (or the error class the caller names)
saying which argument is wrong and what it accepts. Public entry points call them first,
before any lock is taken or byte written, so a refused call changes nothing. O(1) each.
"""

from __future__ import annotations

from pylog.errors import InvalidArgumentError
from pylog.layout import (
    COMPRESSION_NAMES, COORDINATOR_EPOCH_RANGE, INT32_MAX, PRODUCER_EPOCH_RANGE, PRODUCER_ID_RANGE, SEQUENCE_RANGE, TIMESTAMP_RANGE,
)


def check_int(value, name: str, bounds: tuple[int, int], *, error=InvalidArgumentError) -> int:
    """``value`` if it is an int (a bool is not) within ``bounds`` (inclusive)."""
    if not isinstance(value, int) or isinstance(value, bool):
        raise error(f"{name} must be an int, not {type(value).__name__}")
    low, high = bounds
    if not low <= value <= high:
        raise error(f"{name} {value} is outside [{low}, {high}]")
    return value


def check_topic_partition(value, name: str = "partition") -> tuple[str, int]:
    """``value`` as ``(topic, partition)`` if it is such a pair (a ``TopicPartition`` or a
    tuple): a topic name and an int partition >= 0."""
    if isinstance(value, (str, bytes)) or not hasattr(value, "__len__") or len(value) != 2:
        raise InvalidArgumentError(f"{name} must be a (topic, partition) pair such as TopicPartition('t', 0), "
                                   f"not {value!r}")
    topic, partition = value
    if not isinstance(topic, str) or not topic:
        raise InvalidArgumentError(f"{name} {value!r}: the topic must be a non-empty str")
    check_int(partition, f"{name} {value!r}: the partition", (0, INT32_MAX))
    return topic, partition


def check_bool(value, name: str) -> bool:
    """``value`` if it is a bool: a flag written into the format is never guessed from truthiness."""
    if not isinstance(value, bool):
        raise InvalidArgumentError(f"{name} must be True or False, not {value!r}")
    return value


def check_name(value, name: str, *, max_bytes: int = 32767):
    """``value`` if it is a non-empty str of at most ``max_bytes`` bytes in UTF-8 (a client
    id, a group or transactional id: Kafka writes them as int16-length strings)."""
    if not isinstance(value, str) or not value:
        raise InvalidArgumentError(f"{name} must be a non-empty str, not {value!r}")
    if len(value.encode()) > max_bytes:
        raise InvalidArgumentError(f"{name} is {len(value.encode())} bytes in UTF-8, more than {max_bytes}")
    return value


def check_function(value, name: str):
    """``value`` if it is None or callable (a serializer, a deserializer)."""
    if value is not None and not callable(value):
        raise InvalidArgumentError(f"{name} must be a function or None, not {value!r}")
    return value


def check_choice(value, name: str, choices) -> str:
    """``value`` if it is one of ``choices`` (strings)."""
    if not isinstance(value, str) or value not in choices:
        raise InvalidArgumentError(f"{name} must be one of {', '.join(choices)}, got {value!r}")
    return value


def _check_timestamp(value, name: str = "timestamp"):
    """None, or a timestamp in ms since the epoch (-1: none), or a list of them, one per
    record of an append (its items are checked as the records are encoded, at C speed)."""
    if isinstance(value, list):
        return value
    return None if value is None else check_int(value, name, TIMESTAMP_RANGE)


def check_timestamps(values: list, label: str) -> list:
    """``values`` if each is a timestamp in ms (an int in ``TIMESTAMP_RANGE``): one pass at
    C speed; the first bad one is named with ``label.format(i=index)``."""
    low, high = TIMESTAMP_RANGE
    if values and (set(map(type, values)) != {int} or min(values) < low or max(values) > high):
        for i, t in enumerate(values):
            check_int(t, label.format(i=i), TIMESTAMP_RANGE)
    return values


def check_records_iterable(records) -> None:
    """An append's ``records``: an iterable of records, not one ``bytes`` or ``str`` value."""
    if isinstance(records, (bytes, bytearray, memoryview, str)) or not hasattr(records, "__iter__"):
        raise InvalidArgumentError(f"append takes an iterable of records, not {type(records).__name__}; "
                                   f"wrap a single value in a list")


def check_append_options(*, compression=None, producer_id=-1, producer_epoch=-1, base_sequence=-1,
                         is_transactional=False, timestamp=None) -> None:
    """The keyword arguments of ``Log.append`` (and ``Topic.append``, which passes them on)."""
    if compression is not None:
        check_choice(compression, "compression", COMPRESSION_NAMES)
    _check_producer(producer_id, producer_epoch, base_sequence, is_transactional)
    _check_timestamp(timestamp)


def _check_producer(producer_id, producer_epoch, base_sequence, is_transactional) -> None:
    """An append's producer fields: all -1 (no producer), or an id >= 0 with an epoch and a
    base sequence >= 0; transactional appends need a producer."""
    check_int(producer_id, "producer_id", PRODUCER_ID_RANGE)
    check_int(producer_epoch, "producer_epoch", PRODUCER_EPOCH_RANGE)
    check_int(base_sequence, "base_sequence", SEQUENCE_RANGE)
    check_bool(is_transactional, "is_transactional")
    if producer_id >= 0 and (base_sequence < 0 or producer_epoch < 0):
        raise InvalidArgumentError(
            f"producer {producer_id} appends need base_sequence >= 0 and producer_epoch >= 0")
    if producer_id < 0 and (base_sequence >= 0 or producer_epoch >= 0):
        raise InvalidArgumentError("producer_epoch and base_sequence need a producer_id")
    if is_transactional and producer_id < 0:
        raise InvalidArgumentError("transactional appends need a producer_id")


def check_txn_marker(producer_id, producer_epoch, commit, coordinator_epoch) -> None:
    """A transaction marker's fields: a real producer (id and epoch >= 0), a bool outcome,
    a non-negative int32 coordinator epoch."""
    check_int(producer_id, "producer_id", (0, PRODUCER_ID_RANGE[1]))
    check_int(producer_epoch, "producer_epoch", (0, PRODUCER_EPOCH_RANGE[1]))
    check_bool(commit, "commit")
    check_int(coordinator_epoch, "coordinator_epoch", COORDINATOR_EPOCH_RANGE)
