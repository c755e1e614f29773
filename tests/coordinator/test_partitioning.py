"""Group and transactional id to coordinator partition, against values worked out by hand
from Java's String.hashCode (h = 31 * h + UTF-16 code unit, 32-bit) and Kafka's Utils.abs."""

from __future__ import annotations

import pytest

from pylog.coordinator.partitioning import (
    java_string_hash, partition_for_group, partition_for_transactional_id,
)
from pylog.errors import InvalidArgumentError


@pytest.mark.parametrize("s, hash_code, partition", [
    ("", 0, 0),
    ("a", 97, 47),                               # 97 % 50
    ("ab", 97 * 31 + 98, 5),                     # 3105 % 50
    ("é", 0xE9, 33),                             # one UTF-16 unit, 233
    ("😀", 0xD83D * 31 + 0xDE00, 49),            # a surrogate pair counts as two units: 1772899
    ("Hello World", -862545276, 26),             # negative hash: abs, then modulo
    ("polygenelubricants", -2**31, 0),           # Integer.MIN_VALUE: Kafka's abs maps it to 0
    ("GroupA", 2141373890, 40),                  # the group of the sample __consumer_offsets-40
])
def test_partition_for_group(s, hash_code, partition):
    assert java_string_hash(s) == hash_code
    assert partition_for_group(s) == partition
    assert partition_for_transactional_id(s) == partition


def test_partition_count_is_honoured_and_checked():
    assert partition_for_group("Hello World", 7) == 862545276 % 7
    with pytest.raises(InvalidArgumentError, match="partitions 0"):
        partition_for_group("g", 0)
    with pytest.raises(InvalidArgumentError, match="group_id must be a str"):
        partition_for_group(b"g")
