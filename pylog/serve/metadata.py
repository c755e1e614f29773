"""Metadata: the one broker (this server, the leader of every partition) and the topics of
the log dir, as Kafka's ``KafkaApis.handleTopicMetadataRequest`` answers from its metadata
cache. A topic asked for that does not exist is created with ``num_partitions``
partitions when the server's ``auto_create_topics_enable`` and the request allow it
(Kafka's default, ``auto.create.topics.enable=true``), else answered
``UNKNOWN_TOPIC_OR_PARTITION``; a created topic gets a topic id, as CreateTopics gives one.
From version 10 each topic carries its id (pylog/serve/topic_ids.py; the zero UUID for a
topic made without one) and a topic may be asked for by id (``UNKNOWN_TOPIC_ID`` when no
topic has it). Cost: one listing of the log dir and one read of a ``partition.metadata``
per topic answered; a creation makes its partition directories (durable: the directories
are fsynced as ``create_topic`` does)."""

from __future__ import annotations

from kafka.protocol.metadata import MetadataResponse

from pylog.errors import PylogError
from pylog.layout import INTERNAL_TOPICS
from pylog.serve.api_error import ApiError
from pylog.serve.error_codes import NONE, UNKNOWN_TOPIC_OR_PARTITION, error_code
from pylog.serve.topic_ids import ZERO_UUID, create_with_id, id_of, name_of

_Broker = MetadataResponse.MetadataResponseBroker
_Topic = MetadataResponse.MetadataResponseTopic
_Partition = _Topic.MetadataResponsePartition

#: Kafka's "no leader epoch known": clients then skip leader-epoch validation
NO_LEADER_EPOCH = -1


async def handle_metadata(apis, request) -> MetadataResponse:
    """The answer to one Metadata request (every version up to the advertised one); the
    topics' ids are read and the topics to create made in the server's disk thread pool,
    not on the event loop."""
    body, config = request.body, apis.config
    if body.topics is None or (request.api_version == 0 and not body.topics):  # v0: [] means all
        asked = None
    else:
        asked = [(t.name, getattr(t, "topic_id", None)) for t in body.topics]
    allow_create = config.auto_create_topics_enable and getattr(body, "allow_auto_topic_creation", True)
    topics = await apis.run_blocking(_topics, apis, asked, allow_create)
    broker = _Broker(node_id=config.node_id, host=apis.advertised_host, port=apis.advertised_port, rack=None)
    return MetadataResponse(throttle_time_ms=0, brokers=[broker], cluster_id=config.cluster_id,
                            controller_id=config.node_id, topics=topics)


def _topics(apis, asked: list | None, allow_create: bool) -> list[_Topic]:
    """The entries of the topics ``asked`` (``(name, topic id)`` pairs, the name None when
    asked by id; None: every topic), in order."""
    existing = set(apis.manager.topics())
    if asked is None:
        return [_topic(apis, name, create=False) for name in sorted(existing)]
    return [_topic(apis, name, create=allow_create and name not in existing) if isinstance(name, str)
            else _topic_by_id(apis, topic_id) for name, topic_id in asked]


def _topic_by_id(apis, topic_id) -> _Topic:
    """The entry of the topic whose id is ``topic_id`` (never created: an id names a topic
    that was), or ``UNKNOWN_TOPIC_ID``."""
    try:
        name = name_of(apis.manager, topic_id)
    except ApiError as e:
        return _Topic(error_code=e.code, name=None, topic_id=topic_id or ZERO_UUID, partitions=[])
    return _topic(apis, name, create=False)


def _topic(apis, name: str, *, create: bool) -> _Topic:
    """One topic's entry: its id and its partitions led by this node, or the error that
    names why not. A topic created here gets a new id, as CreateTopics gives one."""
    manager = apis.manager
    try:
        if create:
            create_with_id(manager, name, apis.config.num_partitions)
        partitions = manager.partitions(name)
    except PylogError as e:
        return _Topic(error_code=_unknown_or(e), name=name, partitions=[])
    node = apis.config.node_id
    return _Topic(error_code=NONE, name=name, topic_id=id_of(manager, name), is_internal=name in INTERNAL_TOPICS,
                  partitions=[_Partition(error_code=NONE, partition_index=p, leader_id=node,
                                         leader_epoch=NO_LEADER_EPOCH, replica_nodes=[node], isr_nodes=[node],
                                         offline_replicas=[]) for p in partitions])


def _unknown_or(exc: PylogError) -> int:
    """A topic that is not there (or was not created) is ``UNKNOWN_TOPIC_OR_PARTITION``;
    a bad name ``INVALID_TOPIC_EXCEPTION``; anything else its own code."""
    code = error_code(exc)
    return UNKNOWN_TOPIC_OR_PARTITION if code < 0 else code
