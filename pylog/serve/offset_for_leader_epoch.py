"""OffsetForLeaderEpoch: for each partition, the largest leader epoch at or below the one
asked for that the log knows, and where it ends (the start of the next epoch, or the log end
for the latest), as a consumer checks for truncation after a leader change; the answer is
the log's leader-epoch cache's (``Log.replica_view.end_offset_for_epoch``, the one owner of
the rule). ``current_leader_epoch`` (v2+) fences a client whose metadata is older than this
node's epoch (``FENCED_LEADER_EPOCH``) or newer (``UNKNOWN_LEADER_EPOCH``); -1 skips the
check. Cost: O(epochs) a partition.
"""

from __future__ import annotations

from kafka.protocol.consumer import OffsetForLeaderEpochResponse

from pylog.errors import PylogError
from pylog.serve.error_codes import (
    FENCED_LEADER_EPOCH, NONE, UNKNOWN_LEADER_EPOCH, UNKNOWN_SERVER_ERROR, error_code,
)

_Topic = OffsetForLeaderEpochResponse.OffsetForLeaderTopicResult
_Partition = _Topic.EpochEndOffset


async def handle_offset_for_leader_epoch(apis, request) -> OffsetForLeaderEpochResponse:
    """Every partition's answer, in the order asked (the logs opened in the disk pool first)."""
    body = request.body
    await apis.open_logs((t.topic, p.partition) for t in body.topics or () for p in t.partitions or ())
    topics = [_Topic(topic=t.topic, partitions=[_answer(apis, t.topic, p) for p in t.partitions or ()])
              for t in body.topics or ()]
    return OffsetForLeaderEpochResponse(throttle_time_ms=0, topics=topics)


def _answer(apis, topic: str, part) -> _Partition:
    index = part.partition
    try:
        view = apis.replicas.refreshed(topic, index).replica_view
        current = view.leader_epoch
        asked = part.current_leader_epoch
        if asked != -1 and asked != current:
            code = FENCED_LEADER_EPOCH if asked < current else UNKNOWN_LEADER_EPOCH
            return _Partition(error_code=code, partition=index, leader_epoch=-1, end_offset=-1)
        epoch, end_offset = view.end_offset_for_epoch(part.leader_epoch)
    except PylogError as e:
        return _Partition(error_code=error_code(e), partition=index, leader_epoch=-1, end_offset=-1)
    except Exception as e:  # a bug: the client hears it, the server lives on
        apis.log_failure(f"offset for leader epoch of {topic}-{index}", e)
        return _Partition(error_code=UNKNOWN_SERVER_ERROR, partition=index, leader_epoch=-1, end_offset=-1)
    return _Partition(error_code=NONE, partition=index, leader_epoch=epoch, end_offset=end_offset)
