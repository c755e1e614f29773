"""Which partition of a coordinator topic holds a group or a transactional id.

Kafka places group ``g`` in ``__consumer_offsets-<p>`` and transactional id ``t`` in
``__transaction_state-<p>`` with ``p = abs(hashCode(id)) % partitions``: Java's
``String.hashCode`` (``h = 31 * h + c`` over the UTF-16 code units, in 32-bit two's
complement) and Kafka's ``Utils.abs``, which maps ``Integer.MIN_VALUE`` to 0 rather than
leaving it negative. Both topics have 50 partitions by default
(``offsets.topic.num.partitions``, ``transaction.state.log.num.partitions``).
"""

from __future__ import annotations

from pylog.arguments import check_int
from pylog.errors import InvalidArgumentError
from pylog.layout import INT32_MAX

DEFAULT_PARTITIONS = 50
_INT32_MIN = -(2**31)


def java_string_hash(s: str) -> int:
    """Java's ``String.hashCode()`` of ``s``. O(len(s)).

    >>> java_string_hash("ab"), java_string_hash("Hello World")
    (3105, -862545276)
    """
    data = s.encode("utf-16-be", "surrogatepass")
    h = 0
    for i in range(0, len(data), 2):
        h = (31 * h + (data[i] << 8 | data[i + 1])) & 0xFFFFFFFF
    return h - 2**32 if h >= 2**31 else h


def kafka_abs(n: int) -> int:
    """Kafka's ``Utils.abs``: ``abs`` of a 32-bit int, with ``Integer.MIN_VALUE`` -> 0."""
    return 0 if n == _INT32_MIN else abs(n)


def partition_for_group(group_id: str, partitions: int = DEFAULT_PARTITIONS) -> int:
    """The ``__consumer_offsets`` partition of ``group_id``. O(len(group_id)).

    >>> partition_for_group("GroupA"), partition_for_group("polygenelubricants")
    (40, 0)
    """
    return _partition_for(group_id, partitions, "group_id")


def partition_for_transactional_id(transactional_id: str, partitions: int = DEFAULT_PARTITIONS) -> int:
    """The ``__transaction_state`` partition of ``transactional_id``."""
    return _partition_for(transactional_id, partitions, "transactional_id")


def _partition_for(key: str, partitions: int, name: str) -> int:
    if not isinstance(key, str):
        raise InvalidArgumentError(f"{name} must be a str, not {type(key).__name__}")
    check_int(partitions, "partitions", (1, INT32_MAX))
    return kafka_abs(java_string_hash(key)) % partitions
