"""DeleteTopics: topics removed from the log dir by ``LogManager.delete_topic`` (their
partition directories, checkpoint lines and settings), as Kafka's controller deletes them.
A topic is named (v1-5), or named or given by its topic id (v6, the id in its partitions'
``partition.metadata``). A topic that is not there is ``UNKNOWN_TOPIC_OR_PARTITION`` (an
unknown id ``UNKNOWN_TOPIC_ID``); Kafka's internal topics (``__consumer_offsets``,
``__transaction_state``) are not deleted (``INVALID_REQUEST``), as ``pylog topics
--delete`` refuses them. A partition a pylog client of another process writes is handed
over first (:meth:`ReplicaManager.delete_topic
<pylog.serve.replica_manager.ReplicaManager.delete_topic>`); one not handed over within
the request's ``timeout_ms`` (a ``LogManager`` of another process holds it) answers
``REQUEST_TIMED_OUT``, as Kafka's controller does when a deletion does not finish in time,
and nothing of that topic is deleted. Cost: per topic, O(its files), in the disk thread
pool. Not reversible.
"""

from __future__ import annotations

from kafka.protocol.admin.topics import DeleteTopicsResponse

from pylog.errors import LogLockedError, UnknownTopicError
from pylog.layout import INTERNAL_TOPICS
from pylog.serve.api_error import ApiError, attempt, code_and_message
from pylog.serve.error_codes import INVALID_REQUEST, REQUEST_TIMED_OUT
from pylog.serve.topic_ids import ZERO_UUID, id_of, name_of

_Result = DeleteTopicsResponse.DeletableTopicResult
#: the first version that may give a topic by its id
_TOPIC_IDS_VERSION = 6


async def handle_delete_topics(apis, request) -> DeleteTopicsResponse:
    """Each topic's result, in the order asked; deleted in the disk thread pool."""
    body = request.body
    if request.api_version >= _TOPIC_IDS_VERSION:
        asked = [(t.name, t.topic_id) for t in body.topics or ()]
    else:
        asked = [(name, None) for name in body.topic_names or ()]
    responses = await apis.run_blocking(_delete_all, apis, asked, max(body.timeout_ms, 0))
    return DeleteTopicsResponse(throttle_time_ms=0, responses=responses)


def _delete_all(apis, asked, timeout_ms: int) -> list[_Result]:
    return [_result(apis, name, topic_id, timeout_ms) for name, topic_id in asked]


def _result(apis, name, topic_id, timeout_ms: int) -> _Result:
    named, error = attempt(apis, f"find topic {topic_id}", _named, apis, name, topic_id)
    if error is None:
        name, topic_id = named
        _, error = attempt(apis, f"delete topic {name!r}", _delete, apis, name, timeout_ms)
    code, message = code_and_message(error)
    return _Result(name=name, topic_id=topic_id or ZERO_UUID, error_code=code, error_message=message)


def _named(apis, name, topic_id) -> tuple:
    """(name, topic id) of the topic asked for by either."""
    name = name if name is not None else name_of(apis.manager, topic_id)
    return name, id_of(apis.manager, name) if name in apis.manager.topics() else topic_id


def _delete(apis, name, timeout_ms: int) -> None:
    if name in INTERNAL_TOPICS:
        raise ApiError(INVALID_REQUEST, f"Topic {name} is a kafka internal topic and is not allowed to be deleted")
    if name not in apis.manager.topics():
        raise UnknownTopicError(f"topic {name!r} does not exist")
    try:
        apis.replicas.delete_topic(apis.manager, name, timeout_ms=timeout_ms)
    except LogLockedError as e:  # not handed over in time
        raise ApiError(REQUEST_TIMED_OUT, str(e)) from None
