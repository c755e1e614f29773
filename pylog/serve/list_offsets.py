"""ListOffsets: the earliest, latest, or first offset at a time of each partition, as
Kafka's ``Partition.fetchOffsetForTimestamp`` answers it, through ``Log.list_offset``
(:mod:`pylog.log.list_offset`, the one owner of those rules): -1 latest (the high
watermark, or the last stable offset for read_committed), -2 earliest, -3 the largest
timestamp's, -4 the local log start, -5 the last tiered offset, else the first record
stamped at or after the timestamp. No such record answers offset -1 and timestamp -1.
Cost: O(1) for earliest/latest; by time O(segments + index interval) and one small read
for the record's timestamp.
"""

from __future__ import annotations

from kafka.protocol.consumer import ListOffsetsResponse

from pylog.errors import PylogError
from pylog.log.local import EARLIEST_LOCAL_TIMESTAMP, EARLIEST_TIMESTAMP, LATEST_TIMESTAMP
from pylog.serve.error_codes import NONE, UNKNOWN_SERVER_ERROR, error_code

_Topic = ListOffsetsResponse.ListOffsetsTopicResponse
_Partition = _Topic.ListOffsetsPartitionResponse
#: Kafka's isolation levels as ``Log.list_offset``'s
ISOLATIONS = {0: "uncommitted", 1: "committed"}
#: the specs whose answer is an offset, not a record: their timestamp is -1
_NO_RECORD = (LATEST_TIMESTAMP, EARLIEST_TIMESTAMP, EARLIEST_LOCAL_TIMESTAMP)


async def handle_list_offsets(apis, request) -> ListOffsetsResponse:
    """Every partition's answer, in the order asked (the logs opened in the disk pool first)."""
    body = request.body
    await apis.open_logs((t.name, p.partition_index) for t in body.topics or () for p in t.partitions or ())
    isolation = ISOLATIONS.get(body.isolation_level, "uncommitted")
    topics = [_Topic(name=t.name, partitions=[_answer(apis, t.name, p, isolation) for p in t.partitions or ()])
              for t in body.topics or ()]
    return ListOffsetsResponse(throttle_time_ms=0, topics=topics)


def _answer(apis, topic: str, part, isolation: str) -> _Partition:
    index = part.partition_index
    try:
        log = apis.replicas.refreshed(topic, index)
        offset = log.list_offset(part.timestamp, isolation=isolation)
        timestamp = -1 if offset is None or part.timestamp in _NO_RECORD else _timestamp_at(log, offset)
    except PylogError as e:
        return _Partition(partition_index=index, error_code=error_code(e), timestamp=-1, offset=-1)
    except Exception as e:  # a bug: the client hears it, the server lives on
        apis.log_failure(f"list offsets of {topic}-{index}", e)
        return _Partition(partition_index=index, error_code=UNKNOWN_SERVER_ERROR, timestamp=-1, offset=-1)
    return _Partition(partition_index=index, error_code=NONE, timestamp=timestamp,
                      offset=-1 if offset is None else offset, leader_epoch=-1)


def _timestamp_at(log, offset: int) -> int:
    """The timestamp of the record at ``offset`` (-1 if none is there any more). One read
    of the batch holding it."""
    for record in log.read(offset, 1).records():
        if record.offset == offset:
            return record.timestamp
    return -1
