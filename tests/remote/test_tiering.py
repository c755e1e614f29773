"""Tiering: a LogManager with ``remote_storage=`` copies the closed segments of topics with
``remote_storage_enable`` to object storage in the Aiven layout, records them in
``__remote_log_metadata``, deletes local segments only once copied and past local retention,
and applies total retention to what was copied."""

from __future__ import annotations

import pytest

from pylog.config import LogConfig
from pylog.errors import InvalidConfigError


# -- the settings ----------------------------------------------------------------------------------

def test_the_tiering_settings_have_kafkas_names_and_defaults():
    kafka = LogConfig().to_kafka()
    assert {k: kafka[k] for k in ("remote.storage.enable", "local.retention.ms", "local.retention.bytes",
                                  "remote.log.manager.task.interval.ms")} == {
        "remote.storage.enable": "false", "local.retention.ms": "-2", "local.retention.bytes": "-2",
        "remote.log.manager.task.interval.ms": "30000"}
    assert LogConfig.from_kafka({"remote.storage.enable": "true", "local.retention.ms": "1000"}) == LogConfig(
        remote_storage_enable=True, local_retention_ms=1000)


def test_local_retention_minus_two_means_total_retention():
    cfg = LogConfig(retention_ms=5000, retention_bytes=1 << 20)
    assert (cfg.resolved_local_retention_ms, cfg.resolved_local_retention_bytes) == (5000, 1 << 20)
    cfg = cfg.replace(local_retention_ms=100, local_retention_bytes=4096)
    assert (cfg.resolved_local_retention_ms, cfg.resolved_local_retention_bytes) == (100, 4096)


@pytest.mark.parametrize("settings, message", [
    ({"local_retention_ms": -3}, "local_retention_ms must be at least -2"),
    ({"local_retention_bytes": -3}, "local_retention_bytes must be at least -2"),
    ({"remote_log_manager_task_interval_ms": 0}, "remote_log_manager_task_interval_ms must be at least 1"),
    ({"remote_storage_enable": True, "retention_ms": 1000, "local_retention_ms": 2000},
     "local_retention_ms must not be more than retention_ms"),
    ({"remote_storage_enable": True, "retention_ms": 1000, "local_retention_ms": -1},
     "local_retention_ms must not be -1 as retention_ms is 1000"),
    ({"remote_storage_enable": True, "retention_bytes": 1000, "local_retention_bytes": 2000},
     "local_retention_bytes must not be more than retention_bytes"),
    ({"remote_storage_enable": True, "retention_bytes": 1000, "local_retention_bytes": -1},
     "local_retention_bytes must not be -1 as retention_bytes is 1000"),
    ({"remote_storage_enable": True, "cleanup_policy": "compact"}, "compacted topics cannot be tiered"),
])
def test_tiering_settings_kafka_refuses_are_refused(settings, message):
    with pytest.raises(InvalidConfigError, match=message):
        LogConfig(**settings)


def test_local_retention_above_total_retention_is_allowed_while_tiering_is_off():
    assert LogConfig(retention_ms=1000, local_retention_ms=2000).local_retention_ms == 2000
