"""``LogConfig.from_kafka`` / ``to_kafka`` (pylog/config.py): Kafka's topic settings by
their Kafka names, Kafka's defaults, round trips and refused values."""

from __future__ import annotations

import pytest

from pylog.config import LogConfig
from pylog.errors import InvalidConfigError

LONG_MAX = str(2**63 - 1)

#: Kafka's topic-level defaults, by Kafka name (Kafka's TopicConfig / LogConfig).
KAFKA_DEFAULTS = {
    "segment.bytes": "1073741824",
    "segment.ms": "604800000",
    "segment.jitter.ms": "0",
    "segment.index.bytes": "10485760",
    "index.interval.bytes": "4096",
    "flush.messages": LONG_MAX,
    "flush.ms": LONG_MAX,
    "retention.ms": "604800000",
    "retention.bytes": "-1",
    "cleanup.policy": "delete",
    "delete.retention.ms": "86400000",
    "min.cleanable.dirty.ratio": "0.5",
    "min.compaction.lag.ms": "0",
    "max.compaction.lag.ms": LONG_MAX,
    "file.delete.delay.ms": "60000",
    "max.message.bytes": "1048588",
    "message.timestamp.type": "CreateTime",
    "message.timestamp.before.max.ms": LONG_MAX,
    "message.timestamp.after.max.ms": "3600000",  # Kafka 4's default (it was unlimited before)
    "compression.type": "producer",
    "preallocate": "false",
}


def test_defaults_are_kafkas():
    kafka = LogConfig().to_kafka()
    assert {name: kafka[name] for name in KAFKA_DEFAULTS} == KAFKA_DEFAULTS


def test_to_kafka_uses_kafka_names_only():
    names = set(LogConfig().to_kafka())
    assert set(KAFKA_DEFAULTS) <= names
    assert "compression" not in names and all("_" not in n for n in names)


def test_from_kafka_of_the_defaults_is_the_default():
    assert LogConfig.from_kafka(KAFKA_DEFAULTS) == LogConfig()
    assert LogConfig.from_kafka({}) == LogConfig()


def test_round_trip_of_changed_settings():
    cfg = LogConfig(segment_bytes=1 << 20, retention_ms=-1, cleanup_policy="compact,delete",
                    min_cleanable_dirty_ratio=0.25, compression="zstd", message_timestamp_after_max_ms=0,
                    message_timestamp_type="LogAppendTime", max_compaction_lag_ms=3_600_000)
    assert LogConfig.from_kafka(cfg.to_kafka()) == cfg


@pytest.mark.parametrize("props, field, value", [
    ({"segment.bytes": "1048576"}, "segment_bytes", 1048576),
    ({"retention.ms": "-1"}, "retention_ms", -1),
    ({"min.cleanable.dirty.ratio": "0.1"}, "min_cleanable_dirty_ratio", 0.1),
    ({"preallocate": "FALSE"}, "preallocate", False),
    ({"message.timestamp.before.max.ms": "60000"}, "message_timestamp_before_max_ms", 60000),
    ({"cleanup.policy": "compact"}, "cleanup_policy", "compact"),
    ({"cleanup.policy": "delete, compact"}, "cleanup_policy", "compact,delete"),  # a list, in any order
    ({"compression.type": "lz4"}, "compression", "lz4"),
    ({"message.timestamp.type": "LogAppendTime"}, "message_timestamp_type", "LogAppendTime"),
])
def test_from_kafka_parses_kafkas_string_values(props, field, value):
    assert getattr(LogConfig.from_kafka(props), field) == value


def test_to_kafka_values_are_strings():
    kafka = LogConfig(min_cleanable_dirty_ratio=1).to_kafka()
    assert all(isinstance(v, str) for v in kafka.values())
    assert kafka["preallocate"] == "false" and kafka["min.cleanable.dirty.ratio"] == "1.0"


@pytest.mark.parametrize("props, named", [
    ({"segment_bytes": "1048576"}, "segment_bytes"),       # the Python name is not a Kafka name
    ({"log.segment.bytes": "1048576"}, "log.segment.bytes"),  # a broker setting, not a topic one
    ({"compression": "gzip"}, "compression"),
    ({"segment.bytes": "x"}, "segment.bytes"),
    ({"segment.bytes": "1.5"}, "segment.bytes"),
    ({"segment.bytes": "13"}, "segment_bytes"),
    ({"segment.bytes": "2147483648"}, "segment_bytes"),
    ({"segment.ms": "0"}, "segment_ms"),
    ({"retention.ms": "-2"}, "retention_ms"),
    ({"flush.ms": "9223372036854775808"}, "flush_ms"),
    ({"min.cleanable.dirty.ratio": "1.5"}, "min_cleanable_dirty_ratio"),
    ({"min.cleanable.dirty.ratio": "half"}, "min.cleanable.dirty.ratio"),
    ({"preallocate": "yes"}, "preallocate"),
    ({"preallocate": "true"}, "preallocate"),  # pylog does not preallocate
    ({"message.timestamp.before.max.ms": "-1"}, "message_timestamp_before_max_ms"),
    ({"message.timestamp.after.max.ms": "-1"}, "message_timestamp_after_max_ms"),
    ({"cleanup.policy": "archive"}, "cleanup_policy"),
    ({"compression.type": "brotli"}, "compression"),
    ({"message.timestamp.type": "Now"}, "message_timestamp_type"),
])
def test_from_kafka_refuses_bad_settings_naming_them(props, named):
    with pytest.raises(InvalidConfigError, match=named.replace(".", r"\.")):
        LogConfig.from_kafka(props)


def test_python_values_must_have_the_fields_type():
    with pytest.raises(InvalidConfigError, match="segment_bytes"):
        LogConfig(segment_bytes="1048576")
    with pytest.raises(InvalidConfigError, match="preallocate"):
        LogConfig(preallocate=1)
