"""IncrementalAlterConfigs: a topic's settings changed one by one, as Kafka's
``ConfigAdminManager`` alters them: SET a value, DELETE (back to the default), APPEND to or
SUBTRACT from a list setting (``cleanup.policy``). Names and values are checked by
``LogConfig.kafka_overrides`` and the result whole by ``LogManager.alter_topic_config``
(``INVALID_CONFIG``), which writes topic-configs.json under its lock and gives the open
logs their new settings; other processes holding the topic's logs are rung, as ``pylog
configs --alter`` rings them. ``validate_only`` checks and writes nothing. This broker's
settings are static (``INVALID_REQUEST``). Cost: one locked read and one fsynced write of
topic-configs.json per topic, in the disk thread pool.
"""

from __future__ import annotations

from kafka.protocol.admin.configs import IncrementalAlterConfigsResponse

from pylog.config import KAFKA_FIELDS, LogConfig
from pylog.errors import InvalidConfigError, UnknownTopicError
from pylog.logdir.writers import ring
from pylog.partition_dir import validate_topic
from pylog.serve.api_error import ApiError, attempt, code_and_message, named_twice
from pylog.serve.describe_configs import BROKER, TOPIC, check_broker
from pylog.serve.error_codes import INVALID_REQUEST, NONE

_Response = IncrementalAlterConfigsResponse.AlterConfigsResourceResponse
#: Kafka's AlterConfigOp types
SET, DELETE, APPEND, SUBTRACT = 0, 1, 2, 3
#: the topic settings whose values are lists (Kafka's ConfigDef.Type.LIST)
LIST_SETTINGS = frozenset(("cleanup.policy",))


async def handle_incremental_alter_configs(apis, request) -> IncrementalAlterConfigsResponse:
    """Each resource's result, in the order asked; altered in the disk thread pool."""
    responses = await apis.run_blocking(_alter_all, apis, request.body)
    return IncrementalAlterConfigsResponse(throttle_time_ms=0, responses=responses)


def _alter_all(apis, body) -> list[_Response]:
    responses = [_response(apis, r, body.validate_only) for r in body.resources or ()]
    if not body.validate_only and any(r.error_code == NONE and r.resource_type == TOPIC for r in responses):
        apis.replicas.pool.take_topic_configs()  # the logs this process holds take them before the answer
        ring(apis.manager.root)  # other processes holding the topics' logs take the new settings
    return responses


def _response(apis, resource, validate_only: bool) -> _Response:
    _, error = attempt(apis, f"alter configs of {resource.resource_name!r}", _alter, apis, resource, validate_only)
    code, message = code_and_message(error)
    return _Response(error_code=code, error_message=message, resource_type=resource.resource_type,
                     resource_name=resource.resource_name)


def _alter(apis, resource, validate_only: bool) -> None:
    if resource.resource_type == BROKER:
        check_broker(apis, resource.resource_name)
        raise ApiError(INVALID_REQUEST, "this broker's settings are static: they are pylog serve's options")
    if resource.resource_type != TOPIC:
        raise ApiError(INVALID_REQUEST, f"resource type {resource.resource_type} is not served (topics 2)")
    manager, topic = apis.manager, validate_topic(resource.resource_name)
    if topic not in manager.topics():
        raise UnknownTopicError(f"topic {topic!r} does not exist")
    props, deleted = _changes(manager, topic, resource.configs or ())
    changes = LogConfig.kafka_overrides(props)
    manager.alter_topic_config(topic, changes, remove=[KAFKA_FIELDS[n].name for n in deleted],
                               validate_only=validate_only)


def _changes(manager, topic: str, configs) -> tuple[dict[str, str], list[str]]:
    """The values to set (Kafka names and values, lists resolved against the topic's
    current value) and the names to take back to their defaults."""
    twice = sorted(named_twice(c.name for c in configs), key=str)
    if twice:
        raise ApiError(INVALID_REQUEST, f"duplicate config keys: {', '.join(map(str, twice))}")
    current = manager.topic_config(topic).to_kafka()
    props, deleted = {}, []
    for config in configs:
        name, operation = config.name, config.config_operation
        if name not in KAFKA_FIELDS:
            raise InvalidConfigError(f"unknown topic setting {name!r}")
        if operation == DELETE:
            deleted.append(name)
        elif config.value is None:
            raise ApiError(INVALID_REQUEST, f"null value not supported for {name}")
        elif operation == SET:
            props[name] = config.value
        elif operation in (APPEND, SUBTRACT):
            props[name] = _list_value(name, current[name], config.value, append=operation == APPEND)
        else:
            raise ApiError(INVALID_REQUEST, f"unknown config operation {operation} for {name}")
    return props, deleted


def _list_value(name: str, current: str, value: str, *, append: bool) -> str:
    """``current`` (a comma-separated list) with ``value``'s items added or taken out."""
    if name not in LIST_SETTINGS:
        raise InvalidConfigError(f"config value {'append' if append else 'subtract'} is not allowed for config "
                                 f"key {name}: it is not a list")
    items, given = [i for i in current.split(",") if i], [i.strip() for i in value.split(",") if i.strip()]
    if append:
        return ",".join(items + [i for i in given if i not in items])
    return ",".join(i for i in items if i not in given)
