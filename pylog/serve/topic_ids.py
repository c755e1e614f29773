"""Topic ids on the wire: the id a topic's ``partition.metadata`` holds (URL-safe base64,
as Kafka writes it; pylog/partition_dir.py reads and writes the files) as the protocol's
UUID, and back from a UUID to the topic's name, for Metadata, CreateTopics, DeleteTopics
and CreatePartitions.

Every topic the server creates gets an id (CreateTopics, and Metadata's automatic
creation), as Kafka's controller gives one to every topic; a topic made without the
server (``LogManager.create_topic``) has none until ``pylog topics`` writes one, and is
answered with the zero UUID, Kafka's "no id", which clients treat as unknown.

Cost: one read of a small file per topic looked up; nothing is cached, so a topic deleted
and made again by another process answers its new id at once.
"""

from __future__ import annotations

import base64
import threading
import uuid

from pylog.partition_dir import new_topic_id, topic_id_of, write_topic_id
from pylog.serve.api_error import ApiError
from pylog.serve.error_codes import UNKNOWN_TOPIC_ID

#: Kafka's "no topic id" (``Uuid.ZERO_UUID``)
ZERO_UUID = uuid.UUID(int=0)
#: the existence check and the creation of a name, one at a time across the disk threads
CREATING = threading.Lock()


def topic_uuid(topic_id: str | None) -> uuid.UUID:
    """A topic id as ``partition.metadata`` writes it (URL-safe base64) as the protocol's
    UUID; none is the zero UUID."""
    if topic_id is None:
        return ZERO_UUID
    return uuid.UUID(bytes=base64.urlsafe_b64decode(topic_id + "=" * (-len(topic_id) % 4)))


def id_of(manager, name: str) -> uuid.UUID:
    """The id of topic ``name``, the zero UUID when it has none."""
    return topic_uuid(topic_id_of(manager, name))


def name_of(manager, topic_id: uuid.UUID | None) -> str:
    """The topic whose id is ``topic_id``; ``UNKNOWN_TOPIC_ID`` when none has it (the zero
    UUID names no topic). Cost: one read of a ``partition.metadata`` per topic."""
    if topic_id not in (None, ZERO_UUID):
        for name in manager.topics():
            if id_of(manager, name) == topic_id:
                return name
    raise ApiError(UNKNOWN_TOPIC_ID, f"no topic has the id {topic_id}")


def create_with_id(manager, name: str, partitions: int, overrides: dict | None = None) -> uuid.UUID | None:
    """Create topic ``name`` and give it a new id, unless it exists (then None): under
    :data:`CREATING`, so two requests never make one name twice or give it two ids.
    Durable as ``LogManager.create_topic`` (the directories fsynced)."""
    with CREATING:
        if name in manager.topics():
            return None
        manager.create_topic(name, partitions, overrides)
        topic_id = new_topic_id()
        write_topic_id(manager, name, topic_id)
    return topic_uuid(topic_id)
