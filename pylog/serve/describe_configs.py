"""DescribeConfigs: a topic's settings or this broker's, each with its value, where it comes
from and (when asked) its synonyms, as Kafka's ``ConfigHelper.describeConfigs`` answers.

A topic's settings are pylog's :class:`~pylog.config.LogConfig` by Kafka's names
(``LogConfig.to_kafka``, the one owner of names and values): ``TOPIC_CONFIG`` where the
topic has its own value in topic-configs.json, ``STATIC_BROKER_CONFIG`` where the log dir's
default differs from Kafka's, else ``DEFAULT_CONFIG``. The broker's are the server's
settings (``ServeConfig.to_kafka``), read-only: ``STATIC_BROKER_CONFIG`` where set, else
``DEFAULT_CONFIG``. Cost: one read of topic-configs.json (when it changed) per topic.
"""

from __future__ import annotations

from dataclasses import dataclass

from kafka.protocol.admin.configs import DescribeConfigsResponse

from pylog.config import KAFKA_FIELDS, LogConfig, kafka_name
from pylog.errors import UnknownTopicError
from pylog.partition_dir import validate_topic
from pylog.serve.api_error import ApiError, attempt
from pylog.serve.error_codes import INVALID_REQUEST, NONE

_Result = DescribeConfigsResponse.DescribeConfigsResult
_Entry = _Result.DescribeConfigsResourceResult
_Synonym = _Entry.DescribeConfigsSynonym

#: Kafka's ConfigResource types served
TOPIC, BROKER = 2, 4
#: Kafka's config sources (DescribeConfigsResponse.ConfigSource)
TOPIC_CONFIG, STATIC_BROKER_CONFIG, DEFAULT_CONFIG = 1, 4, 5
#: Kafka's config types (ConfigDef.Type as DescribeConfigs numbers them)
_BOOLEAN, _STRING, _INT, _LONG, _DOUBLE, _LIST = 1, 2, 3, 5, 6, 7
#: the topic settings Kafka types INT (the other integers are LONG) or LIST
_KAFKA_INTS = frozenset(("segment.bytes", "segment.index.bytes", "index.interval.bytes", "max.message.bytes"))
_KAFKA_LISTS = frozenset(("cleanup.policy",))


@dataclass(frozen=True)
class ConfigEntry:
    """One setting as DescribeConfigs (and CreateTopics v5+) report it: ``synonyms`` are
    (value, source) pairs, the one in effect first."""

    name: str
    value: str
    source: int
    read_only: bool
    config_type: int
    synonyms: tuple[tuple[str, int], ...]


def topic_entries(manager, topic: str) -> list[ConfigEntry]:
    """Every setting of ``topic`` (which must exist: :class:`UnknownTopicError`), sorted by
    name."""
    if topic not in manager.topics():
        raise UnknownTopicError(f"topic {topic!r} does not exist")
    own = {kafka_name(field) for field in manager.topic_overrides(topic)}
    values = manager.topic_config(topic).to_kafka()
    log_dir_defaults, kafka_defaults = manager.config.to_kafka(), LogConfig().to_kafka()
    out = []
    for name in sorted(values):
        synonyms = [(values[name], TOPIC_CONFIG)] if name in own else []
        if log_dir_defaults[name] != kafka_defaults[name]:
            synonyms.append((log_dir_defaults[name], STATIC_BROKER_CONFIG))
        synonyms.append((kafka_defaults[name], DEFAULT_CONFIG))
        out.append(ConfigEntry(name, values[name], synonyms[0][1], False, _topic_type(name), tuple(synonyms)))
    return out


def broker_entries(config) -> list[ConfigEntry]:
    """The server's settings (``config``: its ServeConfig), sorted by name."""
    out = []
    for name, (value, is_set) in sorted(config.to_kafka().items()):
        source = STATIC_BROKER_CONFIG if is_set else DEFAULT_CONFIG
        kind = _BOOLEAN if value in ("true", "false") else _INT
        out.append(ConfigEntry(name, value, source, True, kind, ((value, source),)))
    return out


def _topic_type(name: str) -> int:
    if name in _KAFKA_LISTS:
        return _LIST
    if name in _KAFKA_INTS:
        return _INT
    return {"int": _LONG, "float": _DOUBLE, "bool": _BOOLEAN, "str": _STRING}[KAFKA_FIELDS[name].type]


def resource_entries(apis, resource_type: int, resource_name: str) -> list[ConfigEntry]:
    """The settings of one resource; a bad one raises :class:`ApiError` (or a
    PylogError naming the topic)."""
    if resource_type == TOPIC:
        validate_topic(resource_name)
        return topic_entries(apis.manager, resource_name)
    if resource_type == BROKER:
        check_broker(apis, resource_name)
        return broker_entries(apis.config)
    raise ApiError(INVALID_REQUEST, f"resource type {resource_type} is not served (topics 2 and brokers 4)")


def check_broker(apis, resource_name: str) -> None:
    """A broker resource names this node, or is empty (the brokers' defaults), as Kafka
    checks it."""
    node = apis.config.node_id
    if resource_name not in ("", str(node)):
        raise ApiError(INVALID_REQUEST, f"unexpected broker id, expected {node} or empty string, "
                                             f"but received {resource_name}")


async def handle_describe_configs(apis, request) -> DescribeConfigsResponse:
    """Each resource's settings (those named in ``configuration_keys``, all when null), or
    its error; read in the disk thread pool."""
    body = request.body
    results = await apis.run_blocking(_describe_all, apis, body)
    return DescribeConfigsResponse(throttle_time_ms=0, results=results)


def _describe_all(apis, body) -> list:
    return [_describe(apis, r, body.include_synonyms) for r in body.resources or ()]


def _describe(apis, resource, include_synonyms: bool):
    entries, error = attempt(apis, f"describe configs of {resource.resource_name!r}", resource_entries, apis,
                             resource.resource_type, resource.resource_name)
    if error is not None:
        return _failed(resource, error.code, str(error))
    keys = resource.configuration_keys
    wanted = [e for e in entries if keys is None or e.name in keys]
    return _Result(error_code=NONE, error_message=None, resource_type=resource.resource_type,
                   resource_name=resource.resource_name,
                   configs=[_entry(e, include_synonyms) for e in wanted])


def _failed(resource, code: int, message: str) -> _Result:
    return _Result(error_code=code, error_message=message, resource_type=resource.resource_type,
                   resource_name=resource.resource_name, configs=[])


def _entry(entry: ConfigEntry, include_synonyms: bool) -> _Entry:
    synonyms = [_Synonym(name=entry.name, value=v, source=s) for v, s in entry.synonyms] if include_synonyms else []
    return _Entry(name=entry.name, value=entry.value, read_only=entry.read_only, config_source=entry.source,
                  is_default=entry.source == DEFAULT_CONFIG, is_sensitive=False, synonyms=synonyms,
                  config_type=entry.config_type, documentation=None)
