"""CreatePartitions: a topic grown to more partitions by ``LogManager.add_partitions``, the
owner of the rule that a topic only grows (``INVALID_PARTITIONS`` for a count that is not
larger), as Kafka's controller grows one. Assignments, when given, must give one replica
list per new partition, each this node alone (``INVALID_REPLICA_ASSIGNMENT``). The new
partitions get the topic's id, as ``pylog topics --alter`` writes it. ``validate_only``
checks and writes nothing. Cost: one directory per new partition, in the disk thread pool.
"""

from __future__ import annotations

from kafka.protocol.admin.topics import CreatePartitionsResponse

from pylog.partition_dir import topic_id_of, write_topic_id
from pylog.serve.api_error import ApiError, attempt, code_and_message, named_twice
from pylog.serve.create_topics import check_replicas
from pylog.serve.error_codes import INVALID_REPLICA_ASSIGNMENT, INVALID_REQUEST

_Result = CreatePartitionsResponse.CreatePartitionsTopicResult


async def handle_create_partitions(apis, request) -> CreatePartitionsResponse:
    """Each topic's result, in the order asked; grown in the disk thread pool."""
    results = await apis.run_blocking(_grow_all, apis, request.body)
    return CreatePartitionsResponse(throttle_time_ms=0, results=results)


def _grow_all(apis, body) -> list[_Result]:
    twice = named_twice(t.name for t in body.topics or ())
    return [_Result(name=t.name, error_code=INVALID_REQUEST, error_message=f"topic {t.name!r} is named more "
                                                                           f"than once in the request")
            if t.name in twice else _result(apis, t, body.validate_only) for t in body.topics or ()]


def _result(apis, topic, validate_only: bool) -> _Result:
    _, error = attempt(apis, f"create partitions of {topic.name!r}", _grow, apis, topic, validate_only)
    code, message = code_and_message(error)
    return _Result(name=topic.name, error_code=code, error_message=message)


def _grow(apis, topic, validate_only: bool) -> None:
    manager = apis.manager
    current = len(manager.partitions(topic.name))
    manager.add_partitions(topic.name, topic.count, validate_only=True)
    if topic.assignments is not None:
        if len(topic.assignments) != topic.count - current:
            raise ApiError(INVALID_REPLICA_ASSIGNMENT, f"Increasing the number of partitions by "
                                                       f"{topic.count - current} but {len(topic.assignments)} "
                                                       f"assignments provided.")
        for assignment in topic.assignments:
            check_replicas(apis, assignment.broker_ids)
    if validate_only:
        return
    topic_id = topic_id_of(manager, topic.name)
    manager.add_partitions(topic.name, topic.count)
    if topic_id is not None:
        write_topic_id(manager, topic.name, topic_id)
