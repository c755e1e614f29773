"""``LogConfig``: Kafka's topic-level settings, with Kafka's defaults, in Python spelling.

Every field maps to the Kafka name with dots (``segment_bytes`` <-> ``segment.bytes``);
``LogConfig.from_kafka({"segment.bytes": "1048576"})`` reads a Kafka properties map.
Values are checked on construction: a bad one raises :class:`InvalidConfigError`
naming the setting. Python values must have the field's type (an int where an int
belongs, a number for ``min_cleanable_dirty_ratio``, a bool for ``preallocate``);
Kafka's string values are parsed by ``from_kafka`` only, so ``"0.5"`` and ``"x"``
given in Python are both refused. ``preallocate`` must stay False: pylog does not
preallocate segment files. The CreateTime timestamp bounds are enforced on client appends
(:mod:`pylog.log.validation`).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, fields

from pylog.errors import InvalidConfigError
from pylog.layout import INT32_MAX
from pylog.layout import INT64_MAX as LONG_MAX

CLEANUP_POLICIES = ("delete", "compact", "compact,delete")
TIMESTAMP_TYPES = ("CreateTime", "LogAppendTime")
COMPRESSION_TYPES = ("producer", "uncompressed", "none", "gzip", "snappy", "lz4", "zstd")


@dataclass(frozen=True)
class LogConfig:
    """One partition's settings. Immutable; ``replace(**changes)`` returns a new one.

    >>> LogConfig(segment_bytes=1 << 20).segment_bytes
    1048576
    >>> LogConfig().retention_ms
    604800000
    """

    segment_bytes: int = 1024 * 1024 * 1024
    segment_ms: int = 7 * 24 * 60 * 60 * 1000
    segment_jitter_ms: int = 0
    segment_index_bytes: int = 10 * 1024 * 1024
    index_interval_bytes: int = 4096
    flush_messages: int = LONG_MAX
    flush_ms: int = LONG_MAX
    retention_ms: int = 7 * 24 * 60 * 60 * 1000
    retention_bytes: int = -1
    cleanup_policy: str = "delete"
    delete_retention_ms: int = 24 * 60 * 60 * 1000
    min_cleanable_dirty_ratio: float = 0.5
    min_compaction_lag_ms: int = 0
    max_compaction_lag_ms: int = LONG_MAX
    file_delete_delay_ms: int = 60_000
    max_message_bytes: int = 1024 * 1024 + 12
    message_timestamp_type: str = "CreateTime"
    message_timestamp_before_max_ms: int = LONG_MAX
    message_timestamp_after_max_ms: int = 60 * 60 * 1000  # Kafka 4's default: one hour
    compression: str = "producer"
    preallocate: bool = False
    producer_id_expiration_ms: int = 24 * 60 * 60 * 1000
    #: how often the cleaner thread of a LogManager or of a client process applies retention and
    #: compaction to the log (Kafka's broker-wide log.retention.check.interval.ms, 5 minutes)
    retention_check_interval_ms: int = 5 * 60 * 1000
    #: tier the topic's closed segments to the LogManager's ``remote_storage`` (KIP-405)
    remote_storage_enable: bool = False
    #: how long / how many bytes of a tiered topic stay on the local disk once copied; -2: as
    #: ``retention_ms`` / ``retention_bytes`` (Kafka's local.retention.ms/bytes)
    local_retention_ms: int = -2
    local_retention_bytes: int = -2
    #: how often a LogManager's tiering task copies and expires segments (Kafka's broker-wide
    #: remote.log.manager.task.interval.ms, 30 seconds)
    remote_log_manager_task_interval_ms: int = 30_000
    #: partitions of the ``__remote_log_metadata`` topic a LogManager creates when it first tiers
    #: (Kafka's remote.log.metadata.topic.num.partitions)
    remote_log_metadata_topic_num_partitions: int = 50

    def __post_init__(self):
        for f in fields(self):
            _check_type(self, f)
        _at_least(self, "segment_bytes", 14)
        _at_least(self, "segment_ms", 1)
        _at_least(self, "segment_jitter_ms", 0)
        _at_least(self, "segment_index_bytes", 4)
        _at_least(self, "index_interval_bytes", 0)
        _at_least(self, "flush_messages", 1)
        _at_least(self, "flush_ms", 0)
        _at_least(self, "retention_ms", -1)
        _at_least(self, "retention_bytes", -1)
        _at_least(self, "delete_retention_ms", 0)
        _at_least(self, "file_delete_delay_ms", 0)
        _at_least(self, "max_message_bytes", 0)
        _at_least(self, "min_compaction_lag_ms", 0)
        _at_least(self, "max_compaction_lag_ms", 1)
        _at_least(self, "producer_id_expiration_ms", 1)
        _at_least(self, "retention_check_interval_ms", 1)
        _at_least(self, "message_timestamp_before_max_ms", 0)
        _at_least(self, "message_timestamp_after_max_ms", 0)
        _at_least(self, "local_retention_ms", -2)
        _at_least(self, "local_retention_bytes", -2)
        _at_least(self, "remote_log_manager_task_interval_ms", 1)
        _at_least(self, "remote_log_metadata_topic_num_partitions", 1)
        if self.preallocate:
            raise InvalidConfigError("preallocate=True is not supported: pylog does not preallocate segment "
                                     "files (Kafka's default, preallocate=false)")
        if self.segment_bytes > INT32_MAX:
            raise InvalidConfigError(f"segment_bytes must be at most {INT32_MAX} (a segment file's limit), "
                                     f"got {self.segment_bytes}")
        if not 0.0 <= self.min_cleanable_dirty_ratio <= 1.0:
            raise InvalidConfigError(
                f"min_cleanable_dirty_ratio must be in [0, 1], got {self.min_cleanable_dirty_ratio!r}")
        policy = ",".join(sorted(p.strip() for p in str(self.cleanup_policy).split(",")))
        if policy not in CLEANUP_POLICIES:
            raise InvalidConfigError(
                f"cleanup_policy must be one of {', '.join(CLEANUP_POLICIES)}, got {self.cleanup_policy!r}")
        object.__setattr__(self, "cleanup_policy", policy)
        if self.remote_storage_enable:
            self._check_tiering()
        if self.message_timestamp_type not in TIMESTAMP_TYPES:
            raise InvalidConfigError(f"message_timestamp_type must be CreateTime or LogAppendTime, "
                                     f"got {self.message_timestamp_type!r}")
        if self.compression not in COMPRESSION_TYPES:
            raise InvalidConfigError(
                f"compression must be one of {', '.join(COMPRESSION_TYPES)}, got {self.compression!r}")

    def _check_tiering(self) -> None:
        """Kafka's checks of a tiered topic (LogConfig.validateTopicLogConfigValues)."""
        if self.compact:
            raise InvalidConfigError("remote_storage_enable: compacted topics cannot be tiered "
                                     f"(cleanup_policy={self.cleanup_policy})")
        for local, total in (("local_retention_ms", "retention_ms"), ("local_retention_bytes", "retention_bytes")):
            local_value, total_value = getattr(self, local), getattr(self, total)
            if total_value == -1 or local_value == -2:
                continue
            if local_value == -1:
                raise InvalidConfigError(f"{local} must not be -1 as {total} is {total_value}")
            if local_value > total_value:
                raise InvalidConfigError(f"{local} must not be more than {total} ({total_value}), got {local_value}")

    # -- derived ---------------------------------------------------------------------
    @property
    def compact(self) -> bool:
        """True when ``cleanup_policy`` includes compact."""
        return "compact" in self.cleanup_policy

    @property
    def delete(self) -> bool:
        """True when ``cleanup_policy`` includes delete."""
        return "delete" in self.cleanup_policy

    @property
    def max_segment_ms(self) -> int:
        """``segment_ms``, or ``min(segment_ms, max_compaction_lag_ms)`` for compacted topics."""
        return min(self.segment_ms, self.max_compaction_lag_ms) if self.compact else self.segment_ms

    @property
    def resolved_local_retention_ms(self) -> int:
        """``local_retention_ms``, or ``retention_ms`` where it is -2 (Kafka's localRetentionMs())."""
        return self.retention_ms if self.local_retention_ms == -2 else self.local_retention_ms

    @property
    def resolved_local_retention_bytes(self) -> int:
        """``local_retention_bytes``, or ``retention_bytes`` where it is -2."""
        return self.retention_bytes if self.local_retention_bytes == -2 else self.local_retention_bytes

    @property
    def target_compression(self) -> str | None:
        """The codec appends are written with, or None to keep the producer's ("producer")."""
        if self.compression == "producer":
            return None
        return "none" if self.compression == "uncompressed" else self.compression

    # -- construction ----------------------------------------------------------------
    def replace(self, **changes) -> "LogConfig":
        """A copy with ``changes`` applied; unknown names raise :class:`InvalidConfigError`."""
        return build_config(self, changes)

    @classmethod
    def from_kafka(cls, props: dict) -> "LogConfig":
        """Build from Kafka property names and string values (``{"retention.ms": "1000"}``)."""
        return cls(**cls.kafka_overrides(props))

    @classmethod
    def kafka_overrides(cls, props: dict) -> dict:
        """Kafka property names and string values as field names and typed values
        (``{"retention.ms": "1000"}`` -> ``{"retention_ms": 1000}``), each parsed and
        range-checked; :class:`InvalidConfigError` for an unknown name or a bad value."""
        overrides = {}
        for key, raw in props.items():
            f = KAFKA_FIELDS.get(key)
            if f is None:
                raise InvalidConfigError(f"unknown topic setting {key!r}")
            overrides[f.name] = _parse(f, raw)
            try:
                cls(**{f.name: overrides[f.name]})  # this setting's own range check
            except InvalidConfigError as e:
                raise InvalidConfigError(f"{key}={raw}: {e}") from None
        cls(**overrides)  # the checks between settings
        return overrides

    def to_kafka(self) -> dict[str, str]:
        """The settings as Kafka property names and string values."""
        out = {}
        for f in fields(self):
            value = getattr(self, f.name)
            out[kafka_name(f.name)] = str(value).lower() if f.type == "bool" else str(value)
        return out


def kafka_name(field_name: str) -> str:
    """A setting's Kafka property name: ``retention_ms`` -> ``retention.ms``."""
    return "compression.type" if field_name == "compression" else field_name.replace("_", ".")


#: Kafka property name -> the LogConfig field that holds it.
KAFKA_FIELDS = {kafka_name(f.name): f for f in fields(LogConfig)}


def build_config(base: LogConfig | dict | None, overrides: dict) -> LogConfig:
    """``base`` (a LogConfig, a dict of fields or None) with ``overrides`` applied."""
    if base is None:
        base = LogConfig()
    elif isinstance(base, dict):
        base, overrides = LogConfig(), {**base, **overrides}
    elif not isinstance(base, LogConfig):
        raise InvalidConfigError(f"config must be a LogConfig or dict, not {type(base).__name__}")
    known = {f.name for f in fields(LogConfig)}
    unknown = sorted(map(str, set(overrides) - known))
    if unknown:
        raise InvalidConfigError(f"unknown setting(s) {', '.join(unknown)}; known: {', '.join(sorted(known))}")
    return dataclasses.replace(base, **overrides) if overrides else base


#: The Python types each field type accepts (a bool is never taken for a number).
_FIELD_TYPES = {"int": (int,), "float": (int, float), "str": (str,), "bool": (bool,)}


def _check_type(cfg: LogConfig, f) -> None:
    value = getattr(cfg, f.name)
    if isinstance(value, bool) and f.type != "bool" or not isinstance(value, _FIELD_TYPES[f.type]):
        hint = " (LogConfig.from_kafka parses Kafka's string values)" if isinstance(value, str) else ""
        raise InvalidConfigError(f"{f.name} must be of type {f.type}, got {value!r}{hint}")
    if f.type == "int" and value > LONG_MAX:
        raise InvalidConfigError(f"{f.name} must be at most {LONG_MAX} (a Kafka long), got {value}")
    if f.type == "float":
        object.__setattr__(cfg, f.name, float(value))


def _at_least(cfg: LogConfig, name: str, minimum: int) -> None:
    value = getattr(cfg, name)
    if value < minimum:
        raise InvalidConfigError(f"{name} must be at least {minimum}, got {value}")


def _parse(f, raw):
    if not isinstance(raw, str):
        return raw
    try:
        if f.type == "int":
            return int(raw)
        if f.type == "float":
            return float(raw)
        if f.type == "bool":
            if raw.lower() not in ("true", "false"):
                raise ValueError(raw)
            return raw.lower() == "true"
    except ValueError:
        raise InvalidConfigError(f"{kafka_name(f.name)} = {raw!r} is not a valid {f.type}") from None
    return raw
