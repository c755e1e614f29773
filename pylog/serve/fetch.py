"""Fetch: whole record batches from the segment files, sent with ``os.sendfile`` as
Kafka's broker sends a ``FileRecords`` slice (zero copy): ``Log.read`` finds each
partition's byte range (index lookups, no byte read) and the response's records fields
are spliced in as those ranges (:func:`spliced_response`).

``isolation_level`` 0 (read_uncommitted) reads up to the high watermark, 1
(read_committed) up to the last stable offset, with the partition's aborted transactions
listed for the client to skip. The logs read are read-only
(:class:`~pylog.serve.replica_manager.ReplicaManager`): each read first catches up with
the appends of every process (one ``stat`` when nothing changed). A fetch that found fewer
than ``min_bytes`` waits for an append (:mod:`pylog.serve.purgatory`), at most
``max_wait_ms``, then reads again. ``max_bytes`` bounds the response and ``partition_max_bytes`` each partition,
but the first partition with data always gets at least one whole batch, as in Kafka.

Fetch sessions (KIP-227) are not kept: every answer says session 0, so clients send full
fetch requests. Cost: O(partitions x index lookup) per read round; the bytes cost one
``sendfile`` each, no copy through Python.
"""

from __future__ import annotations

import asyncio
import os

from kafka.protocol.consumer import FetchResponse
from kafka.protocol.schemas.fields.codecs import Int32, UnsignedVarInt32

from pylog.errors import PylogError
from pylog.serve.error_codes import NONE, UNKNOWN_SERVER_ERROR, error_code
from pylog.serve.purgatory import wait_for
from pylog.serve.request_channel import encode_response

_Topic = FetchResponse.FetchableTopicResponse
_Partition = _Topic.PartitionData
_Aborted = _Partition.AbortedTransaction
#: Kafka's isolation levels as ``Log.read``'s bounds
ISOLATIONS = {0: "high_watermark", 1: "committed"}
#: the placeholder a records field holds until it is spliced: a random marker and the fetch's number
_MARKER_BYTES, _NUMBER_BYTES = 12, 4
#: this process's marker (96 random bits: no other field of a response holds it by chance)
MARKER = os.urandom(_MARKER_BYTES)


async def handle_fetch(apis, request) -> list:
    """Read every partition asked for, waiting for appends while less than ``min_bytes``
    was found and ``max_wait_ms`` has not passed; the response as frame parts (bytes and
    :class:`~pylog.segment.fetch.FetchData` slices)."""
    body = request.body
    isolation = ISOLATIONS.get(body.isolation_level, "high_watermark")
    await apis.open_logs((t.topic, p.partition) for t in body.topics or () for p in t.partitions or ())
    loop = asyncio.get_running_loop()
    deadline = loop.time() + max(body.max_wait_ms, 0) / 1000
    while True:
        waiter = apis.appends.waiter()
        topics, fetches, failed = _read_all(apis, body, isolation)
        found = sum(f.size_bytes for f in fetches)
        if found >= body.min_bytes or failed or loop.time() >= deadline:
            break
        await wait_for(waiter, deadline - loop.time())
    response = FetchResponse(throttle_time_ms=0, error_code=NONE, session_id=0, responses=topics)
    return spliced_response(request, response, fetches, MARKER)


def _read_all(apis, body, isolation: str):
    """One read round: the response's topics (records fields holding placeholders), the
    fetches in the order of their placeholders, and whether any partition failed."""
    topics, fetches, failed = [], [], False
    left = body.max_bytes if body.max_bytes > 0 else 0
    for topic in body.topics or ():  # a null array (a malformed request) is an empty one
        answers = []
        for part in topic.partitions or ():
            answer, fetch = _read_one(apis, topic.topic, part, isolation, left=left, first=not fetches)
            failed |= answer.error_code != NONE
            if fetch is not None and fetch.size_bytes:
                answer.records = _placeholder(MARKER, len(fetches))
                fetches.append(fetch)
                left -= fetch.size_bytes
            answers.append(answer)
        topics.append(_Topic(topic=topic.topic, partitions=answers))
    return topics, fetches, failed


def _read_one(apis, topic: str, part, isolation: str, *, left: int, first: bool):
    """One partition's answer (records empty) and its fetch (None after an error)."""
    index = part.partition
    try:
        log = apis.replicas.log(topic, index)
        max_bytes = max(min(part.partition_max_bytes, left), 0)
        with apis.replicas.deleted_as_unknown(log):
            fetch = log.read(part.fetch_offset, max_bytes, isolation=isolation, min_one_message=first)
    except PylogError as e:
        return _Partition(partition_index=index, error_code=error_code(e), high_watermark=-1, records=b""), None
    except Exception as e:  # a bug: the client hears it, the server lives on
        apis.log_failure(f"read of {topic}-{index}", e)
        return _Partition(partition_index=index, error_code=UNKNOWN_SERVER_ERROR, high_watermark=-1,
                          records=b""), None
    aborted = None
    if isolation == "committed":
        aborted = [_Aborted(producer_id=t.producer_id, first_offset=t.first_offset)
                   for t in fetch.aborted_transactions or ()]
    lso = fetch.last_stable_offset if fetch.last_stable_offset is not None else log.last_stable_offset
    return _Partition(partition_index=index, error_code=NONE, high_watermark=log.high_watermark,
                      last_stable_offset=lso, log_start_offset=log.log_start_offset,
                      aborted_transactions=aborted, records=b""), fetch


def _placeholder(marker: bytes, number: int) -> bytes:
    return marker + number.to_bytes(_NUMBER_BYTES, "big")


def spliced_response(request, body, fetches: list, marker: bytes) -> list:
    """The framed response ``body`` as parts to send in order: the encoded bytes around
    each records field, and in place of each placeholder (``marker`` and its number) its
    fetch, the records field's size prefix rewritten for the fetch's size (an int32, or in
    flexible versions an unsigned varint of size + 1: Kafka's ``records`` type). Cost:
    O(response bytes without the records) plus one search per fetch."""
    frame = encode_response(request, body)
    flexible = FetchResponse.flexible_version_q(request.api_version)
    placeholder_bytes = _MARKER_BYTES + _NUMBER_BYTES
    old_prefix = len(_size_prefix(placeholder_bytes, flexible))
    parts, at = [], 0
    for number, fetch in enumerate(fetches):
        found = frame.find(_placeholder(marker, number), at)
        if found < 0:
            raise AssertionError(f"fetch response: placeholder {number} not found in the encoded response")
        parts.append(frame[at:found - old_prefix] + _size_prefix(fetch.size_bytes, flexible))
        parts.append(fetch)
        at = found + placeholder_bytes
    parts.append(frame[at:])
    size = sum(len(p) if isinstance(p, bytes) else p.size_bytes for p in parts) - 4
    parts[0] = Int32.encode(size) + parts[0][4:]
    return parts


def _size_prefix(size: int, flexible: bool) -> bytes:
    return UnsignedVarInt32.encode(size + 1) if flexible else Int32.encode(size)
