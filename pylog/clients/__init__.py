"""Kafka's clients on a pylog log dir: :class:`Producer`, :class:`Consumer` and consumer
groups across the processes of one host (docs/consumers.md)."""

from pylog.clients.producer import (  # noqa: F401
    BatchMetadata, FutureBatchMetadata, FutureRecordMetadata, Producer, RecordMetadata,
)
from pylog.clients.consumer import (  # noqa: F401
    Consumer, ConsumerRebalanceListener, ConsumerRecord, OffsetAndMetadata, OffsetAndTimestamp, TopicPartition,
)
