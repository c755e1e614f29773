"""pylog's errors as Kafka's error codes (the numbers come from kafka-python's
``kafka.errors``, which mirrors Kafka's ``Errors`` enum): what a partition's answer says
when its append or read failed."""

from __future__ import annotations

import kafka.errors as kafka_errors

from pylog import errors

NONE = kafka_errors.NoError.errno
UNKNOWN_SERVER_ERROR = kafka_errors.UnknownError.errno
UNKNOWN_TOPIC_OR_PARTITION = kafka_errors.UnknownTopicOrPartitionError.errno
INVALID_TOPIC = kafka_errors.InvalidTopicError.errno
OFFSET_OUT_OF_RANGE = kafka_errors.OffsetOutOfRangeError.errno
UNSUPPORTED_VERSION = kafka_errors.UnsupportedVersionError.errno
INVALID_REQUIRED_ACKS = kafka_errors.InvalidRequiredAcksError.errno
INVALID_REQUEST = kafka_errors.InvalidRequestError.errno
#: the admin APIs' answers (CreateTopics, CreatePartitions, the configs, DeleteTopics)
TOPIC_ALREADY_EXISTS = kafka_errors.TopicAlreadyExistsError.errno
INVALID_PARTITIONS = kafka_errors.InvalidPartitionsError.errno
INVALID_REPLICATION_FACTOR = kafka_errors.InvalidReplicationFactorError.errno
INVALID_REPLICA_ASSIGNMENT = kafka_errors.InvalidReplicationAssignmentError.errno
INVALID_CONFIG = kafka_errors.InvalidConfigurationError.errno
UNKNOWN_TOPIC_ID = kafka_errors.UnknownTopicIdError.errno
#: a deletion not done within the request's ``timeout_ms`` (another process kept a partition's writer)
REQUEST_TIMED_OUT = kafka_errors.RequestTimedOutError.errno
#: OffsetForLeaderEpoch's answers to a client whose leader epoch is older or newer than this node's
FENCED_LEADER_EPOCH = kafka_errors.FencedLeaderEpochError.errno
UNKNOWN_LEADER_EPOCH = kafka_errors.UnknownLeaderEpochError.errno
ILLEGAL_GENERATION = kafka_errors.IllegalGenerationError.errno
INCONSISTENT_GROUP_PROTOCOL = kafka_errors.InconsistentGroupProtocolError.errno
UNKNOWN_MEMBER_ID = kafka_errors.UnknownMemberIdError.errno
REBALANCE_IN_PROGRESS = kafka_errors.RebalanceInProgressError.errno
GROUP_ID_NOT_FOUND = kafka_errors.GroupIdNotFoundError.errno
INVALID_GROUP_ID = kafka_errors.InvalidGroupIdError.errno
OFFSET_METADATA_TOO_LARGE = kafka_errors.OffsetMetadataTooLargeError.errno
INVALID_SESSION_TIMEOUT = kafka_errors.InvalidSessionTimeoutError.errno
# transactions
INVALID_TXN_STATE = kafka_errors.InvalidTxnStateError.errno
INVALID_PRODUCER_ID_MAPPING = kafka_errors.InvalidProducerIdMappingError.errno
INVALID_TRANSACTION_TIMEOUT = kafka_errors.InvalidTransactionTimeoutError.errno
PRODUCER_FENCED = kafka_errors.ProducerFencedError.errno
TRANSACTIONAL_ID_NOT_FOUND = kafka_errors.TransactionalIdNotFoundError.errno
#: Kafka's ``Errors.INVALID_REGULAR_EXPRESSION`` (KIP-848, KIP-1152), which kafka-python 3.0 has no class for
INVALID_REGULAR_EXPRESSION = 128
INVALID_PRODUCER_EPOCH = kafka_errors.InvalidProducerEpochError.errno

#: pylog's error classes, most specific first, and the Kafka error each becomes
_CODES = [
    (errors.IllegalGenerationError, kafka_errors.IllegalGenerationError),
    (errors.UnknownMemberIdError, kafka_errors.UnknownMemberIdError),
    (errors.RebalanceInProgressError, kafka_errors.RebalanceInProgressError),
    (errors.GroupNotEmptyError, kafka_errors.NonEmptyGroupError),
    (errors.GroupSubscribedToTopicError, kafka_errors.GroupSubscribedToTopicError),
    (errors.UnknownTopicError, kafka_errors.UnknownTopicOrPartitionError),
    (errors.InvalidTopicError, kafka_errors.InvalidTopicError),
    (errors.OffsetOutOfRangeError, kafka_errors.OffsetOutOfRangeError),
    (errors.UnsupportedCompressionError, kafka_errors.UnsupportedCompressionTypeError),
    (errors.CorruptRecordError, kafka_errors.CorruptRecordError),
    (errors.RecordTooLargeError, kafka_errors.MessageSizeTooLargeError),
    (errors.InvalidTimestampError, kafka_errors.InvalidTimestampError),
    (errors.DuplicateSequenceError, kafka_errors.DuplicateSequenceNumberError),
    (errors.OutOfOrderSequenceError, kafka_errors.OutOfOrderSequenceNumberError),
    (errors.InvalidProducerIdMappingError, kafka_errors.InvalidProducerIdMappingError),
    (errors.ProducerFencedError, kafka_errors.InvalidProducerEpochError),
    (errors.InvalidTxnStateError, kafka_errors.InvalidTxnStateError),
    (errors.RecordFormatError, kafka_errors.InvalidRecordError),
    (errors.InvalidOffsetError, kafka_errors.InvalidRecordError),
    (errors.InvalidArgumentError, kafka_errors.InvalidRecordError),
    (errors.StorageError, kafka_errors.KafkaStorageError),
    (errors.LogLockedError, kafka_errors.NotLeaderForPartitionError),
    (errors.ReadOnlyError, kafka_errors.NotLeaderForPartitionError),
    (errors.InvalidPartitionsError, kafka_errors.InvalidPartitionsError),
    (errors.InvalidConfigError, kafka_errors.InvalidConfigurationError),
]


def error_code(exc: BaseException) -> int:
    """Kafka's error code for ``exc``: the first of :data:`_CODES` it is an instance of,
    else ``UNKNOWN_SERVER_ERROR``.

    >>> error_code(errors.UnknownTopicError("t")), error_code(errors.CorruptRecordError("crc"))
    (3, 2)
    """
    for pylog_class, kafka_class in _CODES:
        if isinstance(exc, pylog_class):
            return kafka_class.errno
    return UNKNOWN_SERVER_ERROR


def txn_error_code(exc: BaseException, api_version: int, fenced_from_version: int) -> int:
    """:func:`error_code` of a transaction coordinator's answer: a fenced producer is
    ``PRODUCER_FENCED`` from ``fenced_from_version`` of the API on (KIP-588: InitProducerId
    4, AddPartitionsToTxn, AddOffsetsToTxn and EndTxn 2), ``INVALID_PRODUCER_EPOCH``
    before, as Kafka's broker answers each version.

    >>> fenced = errors.ProducerFencedError("epoch 0 < 1")
    >>> txn_error_code(fenced, 1, 2), txn_error_code(fenced, 2, 2)
    (47, 90)
    """
    code = error_code(exc)
    return PRODUCER_FENCED if code == INVALID_PRODUCER_EPOCH and api_version >= fenced_from_version else code
