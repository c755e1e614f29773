"""CreateTopics: new topics in the log dir, as Kafka's controller creates them
(``ReplicationControlManager.createTopics``), checked by pylog's own owners of each rule:
the name by ``validate_topic``, the partition count by ``LogManager.create_topic``
(``INVALID_PARTITIONS``), the settings by ``LogConfig.kafka_overrides`` under Kafka's names
(``INVALID_CONFIG``). This node is the only replica, so a replication factor must be 1 or
-1 (the default) and a replica assignment may only name this node. ``validate_only`` checks
everything and writes nothing. A topic that exists is ``TOPIC_ALREADY_EXISTS``; a name
given twice in one request is ``INVALID_REQUEST`` for each. A created topic gets a topic id
in its partitions' ``partition.metadata``, as ``pylog topics --create`` writes it.

Cost: per topic, one listing of the log dir and, when created, its partition directories
(fsynced) and one locked write of topic-configs.json when it has settings; in the disk
thread pool.
"""

from __future__ import annotations

import uuid

from kafka.protocol.admin.topics import CreateTopicsResponse

from pylog.config import LogConfig
from pylog.errors import InvalidConfigError
from pylog.partition_dir import validate_topic
from pylog.serve.api_error import ApiError, attempt, named_twice
from pylog.serve.describe_configs import topic_entries
from pylog.serve.error_codes import (
    INVALID_REPLICA_ASSIGNMENT, INVALID_REPLICATION_FACTOR, INVALID_REQUEST, NONE, TOPIC_ALREADY_EXISTS,
)
from pylog.serve.topic_ids import ZERO_UUID, create_with_id

_Result = CreateTopicsResponse.CreatableTopicResult
_Config = _Result.CreatableTopicConfigs


async def handle_create_topics(apis, request) -> CreateTopicsResponse:
    """Each topic's result, in the order asked; created in the disk thread pool."""
    results = await apis.run_blocking(_create_all, apis, request.body)
    return CreateTopicsResponse(throttle_time_ms=0, topics=results)


def _create_all(apis, body) -> list[_Result]:
    twice = named_twice(t.name for t in body.topics or ())
    return [_failed(t.name, INVALID_REQUEST, f"topic {t.name!r} is named more than once in the request")
            if t.name in twice else _result(apis, t, body.validate_only) for t in body.topics or ()]


def _result(apis, topic, validate_only: bool) -> _Result:
    created, error = attempt(apis, f"create topic {topic.name!r}", _create, apis, topic, validate_only)
    if error is not None:
        return _failed(topic.name, error.code, str(error))
    topic_id, partitions = created
    configs = None if validate_only else [
        _Config(name=e.name, value=e.value, read_only=e.read_only, config_source=e.source, is_sensitive=False)
        for e in topic_entries(apis.manager, topic.name)]
    return _Result(name=topic.name, topic_id=topic_id, error_code=NONE, error_message=None,
                   topic_config_error_code=NONE, num_partitions=partitions, replication_factor=1, configs=configs)


def _create(apis, topic, validate_only: bool) -> tuple[uuid.UUID, int]:
    """Check ``topic`` whole, then create it unless ``validate_only``: (its id, its
    partition count). Raises what answers the topic's error."""
    manager, name = apis.manager, validate_topic(topic.name)
    partitions = _partition_count(apis, topic)
    check_replication_factor(topic.replication_factor)
    overrides = _overrides(topic.configs or ())
    exists = ApiError(TOPIC_ALREADY_EXISTS, f"Topic '{name}' already exists.")
    if validate_only:
        if name in manager.topics():
            raise exists
        manager.create_topic(name, partitions, overrides, validate_only=True)
        return ZERO_UUID, partitions
    topic_id = create_with_id(manager, name, partitions, overrides)
    if topic_id is None:
        raise exists
    return topic_id, partitions


def _partition_count(apis, topic) -> int:
    """The count asked for: ``num_partitions``, the server's ``num_partitions`` for -1, or
    the assignment's length (then both counts must be -1, as Kafka requires)."""
    if not topic.assignments:
        return apis.config.num_partitions if topic.num_partitions == -1 else topic.num_partitions
    if topic.num_partitions != -1 or topic.replication_factor != -1:
        raise ApiError(INVALID_REQUEST, "both numPartitions or replicationFactor and replicasAssignments "
                                             "were set; use either one or the other")
    indexes = sorted(a.partition_index for a in topic.assignments)
    if indexes != list(range(len(indexes))):
        raise ApiError(INVALID_REPLICA_ASSIGNMENT, f"partitions should be a consecutive 0-based integer "
                                                        f"sequence, got {indexes}")
    for assignment in topic.assignments:
        check_replicas(apis, assignment.broker_ids)
    return len(indexes)


def check_replicas(apis, broker_ids) -> None:
    """A partition's replicas are this node alone (``INVALID_REPLICA_ASSIGNMENT`` else)."""
    node = apis.config.node_id
    if list(broker_ids or ()) != [node]:
        raise ApiError(INVALID_REPLICA_ASSIGNMENT, f"replicas {list(broker_ids or ())} are not [{node}]: "
                                                        f"this server is one node, the only replica")


def check_replication_factor(replication_factor: int) -> None:
    """1, or -1 for the default (1): this server is one node."""
    if replication_factor in (1, -1):
        return
    if replication_factor < 1:
        raise ApiError(INVALID_REPLICATION_FACTOR, "Replication factor must be larger than 0, or -1 to use "
                                                        "the default value.")
    raise ApiError(INVALID_REPLICATION_FACTOR,
                        f"Unable to replicate the partition {replication_factor} time(s): The target replication "
                        f"factor of {replication_factor} cannot be reached because only 1 broker(s) are registered.")


def _overrides(configs) -> dict:
    """The topic's settings by Kafka's names, parsed and checked (``INVALID_CONFIG``)."""
    props = {}
    for config in configs:
        if config.value is None:
            raise InvalidConfigError(f"Null value not supported for topic configs: {config.name}")
        props[config.name] = config.value
    return LogConfig.kafka_overrides(props)


def _failed(name: str, code: int, message: str) -> _Result:
    return _Result(name=name, topic_id=ZERO_UUID, error_code=code, error_message=message,
                   topic_config_error_code=NONE, num_partitions=-1, replication_factor=-1, configs=None)
