"""Metadata: the one broker (this server, the leader of every partition) and the topics of
the log dir, as Kafka's ``KafkaApis.handleTopicMetadataRequest`` answers from its metadata
cache. A topic asked for that does not exist is created with ``num_partitions``
partitions when the server's ``auto_create_topics_enable`` and the request allow it
(Kafka's default, ``auto.create.topics.enable=true``), else answered
``UNKNOWN_TOPIC_OR_PARTITION``. Cost: one listing of the log dir; a creation makes its
partition directories (durable: the directories are fsynced as ``create_topic`` does)."""

from __future__ import annotations

from kafka.protocol.metadata import MetadataResponse

from pylog.errors import PylogError
from pylog.layout import INTERNAL_TOPICS
from pylog.serve.error_codes import NONE, UNKNOWN_TOPIC_OR_PARTITION, error_code

_Broker = MetadataResponse.MetadataResponseBroker
_Topic = MetadataResponse.MetadataResponseTopic
_Partition = _Topic.MetadataResponsePartition

#: Kafka's "no leader epoch known": clients then skip leader-epoch validation
NO_LEADER_EPOCH = -1


async def handle_metadata(apis, request) -> MetadataResponse:
    """The answer to one Metadata request (every version up to the advertised one); topics
    to create are created in the server's disk thread pool, not on the event loop."""
    body, config = request.body, apis.config
    existing = set(apis.manager.topics())
    if body.topics is None or (request.api_version == 0 and not body.topics):  # v0: [] means all
        names = sorted(existing)
    else:
        names = [t.name for t in body.topics]
    allow_create = config.auto_create_topics_enable and getattr(body, "allow_auto_topic_creation", True)
    topics = [await _topic(apis, name, create=allow_create and name not in existing) for name in names]
    broker = _Broker(node_id=config.node_id, host=apis.advertised_host, port=apis.advertised_port, rack=None)
    return MetadataResponse(throttle_time_ms=0, brokers=[broker], cluster_id=config.cluster_id,
                            controller_id=config.node_id, topics=topics)


async def _topic(apis, name: str, *, create: bool) -> _Topic:
    """One topic's entry: its partitions led by this node, or the error that names why not."""
    manager = apis.manager
    if not isinstance(name, str):  # a null name asks by topic id, which this server does not know
        return _Topic(error_code=UNKNOWN_TOPIC_OR_PARTITION, name=name, partitions=[])
    try:
        if create:
            await apis.run_blocking(manager.create_topic, name, apis.config.num_partitions)
        partitions = manager.partitions(name)
    except PylogError as e:
        return _Topic(error_code=_unknown_or(e), name=name, partitions=[])
    node = apis.config.node_id
    return _Topic(error_code=NONE, name=name, is_internal=name in INTERNAL_TOPICS,
                  partitions=[_Partition(error_code=NONE, partition_index=p, leader_id=node,
                                         leader_epoch=NO_LEADER_EPOCH, replica_nodes=[node], isr_nodes=[node],
                                         offline_replicas=[]) for p in partitions])


def _unknown_or(exc: PylogError) -> int:
    """A topic that is not there (or was not created) is ``UNKNOWN_TOPIC_OR_PARTITION``;
    a bad name ``INVALID_TOPIC_EXCEPTION``; anything else its own code."""
    code = error_code(exc)
    return UNKNOWN_TOPIC_OR_PARTITION if code < 0 else code
