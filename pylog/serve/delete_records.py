"""DeleteRecords: each partition's log start offset moved up by ``Log.delete_records`` (the
owner of the rule: never past the high watermark, ``OFFSET_OUT_OF_RANGE``; whole segments
below it deleted), as Kafka's ``ReplicaManager.deleteRecords`` does; -1 means the high
watermark. The answer is the new low watermark (the log start offset). The partition's
writer is held for it (taken from another process by the hand-off, within the request's
``timeout_ms``). Durable on return (the log-start checkpoint is written). Cost: per partition, one checkpoint write and the
deletion of the segments wholly below the offset, in the disk thread pool.
"""

from __future__ import annotations

from kafka.protocol.admin.topics import DeleteRecordsResponse

from pylog.errors import PylogError
from pylog.serve.api_error import ApiError
from pylog.serve.error_codes import NONE, OFFSET_OUT_OF_RANGE, UNKNOWN_SERVER_ERROR

_Topic = DeleteRecordsResponse.DeleteRecordsTopicResult
_Partition = _Topic.DeleteRecordsPartitionResult
#: Kafka's "delete up to the high watermark"
HIGH_WATERMARK = -1


async def handle_delete_records(apis, request) -> DeleteRecordsResponse:
    """Each partition's new low watermark or error, in the order asked."""
    topics = await apis.run_blocking(_delete_all, apis, request.body)
    return DeleteRecordsResponse(throttle_time_ms=0, topics=topics)


def _delete_all(apis, body) -> list[_Topic]:
    return [_Topic(name=t.name, partitions=[_partition(apis, t.name, p, body.timeout_ms) for p in t.partitions or ()])
            for t in body.topics or ()]


def _partition(apis, topic: str, part, body_timeout_ms: int) -> _Partition:
    index = part.partition_index
    try:
        low_watermark = _delete(apis.replicas, topic, index, part.offset, max(body_timeout_ms, 0))
    except (PylogError, ApiError) as e:
        return _Partition(partition_index=index, low_watermark=-1, error_code=ApiError.of(e).code)
    except Exception as e:  # a bug: the client hears it, the server lives on
        apis.log_failure(f"delete records of {topic}-{index}", e)
        return _Partition(partition_index=index, low_watermark=-1, error_code=UNKNOWN_SERVER_ERROR)
    return _Partition(partition_index=index, low_watermark=low_watermark, error_code=NONE)


def _delete(replicas, topic: str, partition: int, offset: int, timeout_ms: int) -> int:
    """Holding the partition's writer (another process hands it over within ``timeout_ms``)."""
    with replicas.writer(topic, partition, max_block_ms=timeout_ms) as log:
        if offset == HIGH_WATERMARK:
            offset = log.high_watermark
        elif offset < 0:
            raise ApiError(OFFSET_OUT_OF_RANGE, f"{topic}-{partition}: offset {offset} is negative")
        return log.delete_records(offset)
