"""``KafkaApis``: a request to its handler and the handler's answer to frame parts, as
Kafka's ``KafkaApis.handle`` dispatches on the api key.

:data:`SUPPORTED_VERSIONS` is the one list of what this server implements; ApiVersions
advertises exactly it, and a request outside it is not answered (the connection closes,
as Kafka's broker does for a request it cannot handle), but for ApiVersions itself, which
answers ``UNSUPPORTED_VERSION`` at version 0 with the list, so the client can ask again.
The versions' lower ends are those Kafka's JSON definitions still list (Kafka 4 dropped
the oldest); the upper ends stop before the versions that need what is not served yet
(topic ids in Produce 13, Fetch 13+, OffsetCommit and OffsetFetch 10, transactions V2
in Produce 12).
"""

from __future__ import annotations

import asyncio
import inspect
import logging
from concurrent.futures import ThreadPoolExecutor

from kafka.protocol.admin import (
    DeleteGroupsRequest, DescribeGroupsRequest, DescribeProducersRequest, DescribeTransactionsRequest,
    ListGroupsRequest, ListTransactionsRequest,
)
from kafka.protocol.admin.cluster import DescribeClusterRequest
from kafka.protocol.admin.configs import DescribeConfigsRequest, IncrementalAlterConfigsRequest
from kafka.protocol.admin.topics import (
    CreatePartitionsRequest, CreateTopicsRequest, DeleteRecordsRequest, DeleteTopicsRequest,
)
from kafka.protocol.api_key import ApiKey
from kafka.protocol.consumer import (
    FetchRequest, HeartbeatRequest, JoinGroupRequest, LeaveGroupRequest, ListOffsetsRequest, OffsetCommitRequest,
    OffsetDeleteRequest, OffsetFetchRequest, OffsetForLeaderEpochRequest, SyncGroupRequest,
)
from kafka.protocol.metadata import ApiVersionsRequest, ApiVersionsResponse, FindCoordinatorRequest, MetadataRequest
from kafka.protocol.producer import (
    AddOffsetsToTxnRequest, AddPartitionsToTxnRequest, EndTxnRequest, InitProducerIdRequest, ProduceRequest,
    TxnOffsetCommitRequest,
)

from pylog.coordinator.group_coordinator import GroupCoordinator
from pylog.coordinator.txn_coordinator import TransactionCoordinator
from pylog.closing import close_all
from pylog.serve.consumer_groups import (
    GroupNotifier, handle_heartbeat, handle_join_group, handle_leave_group, handle_sync_group,
)
from pylog.serve.create_partitions import handle_create_partitions
from pylog.serve.create_topics import handle_create_topics
from pylog.serve.delete_groups import handle_delete_groups, handle_offset_delete
from pylog.serve.delete_records import handle_delete_records
from pylog.serve.delete_topics import handle_delete_topics
from pylog.serve.describe_cluster import handle_describe_cluster
from pylog.serve.describe_configs import handle_describe_configs
from pylog.serve.describe_groups import handle_describe_groups, handle_list_groups
from pylog.serve.error_codes import NONE, UNSUPPORTED_VERSION
from pylog.serve.fetch import handle_fetch, new_marker
from pylog.serve.find_coordinator import handle_find_coordinator
from pylog.serve.incremental_alter_configs import handle_incremental_alter_configs
from pylog.serve.list_offsets import handle_list_offsets
from pylog.serve.metadata import handle_metadata
from pylog.serve.offset_commit import handle_offset_commit, handle_offset_fetch
from pylog.serve.offset_for_leader_epoch import handle_offset_for_leader_epoch
from pylog.serve.produce import handle_produce
from pylog.serve.producer_ids import handle_init_producer_id
from pylog.serve.purgatory import AppendNotifier
from pylog.serve.replica_manager import ReplicaManager
from pylog.serve.request_channel import UnsupportedVersion, encode_body, encode_response, parse_request
from pylog.serve.transaction_admin import (
    handle_describe_producers, handle_describe_transactions, handle_list_transactions,
)
from pylog.serve.transactions import (
    ServerWriters, handle_add_offsets_to_txn, handle_add_partitions_to_txn, handle_end_txn, handle_txn_offset_commit,
)

LOG = logging.getLogger("pylog.serve")

#: api key -> (request class, lowest version, highest version) this server answers
SUPPORTED_VERSIONS = {
    ApiKey.Produce: (ProduceRequest, 3, 11),
    ApiKey.Fetch: (FetchRequest, 4, 12),
    ApiKey.ListOffsets: (ListOffsetsRequest, 1, 9),
    ApiKey.Metadata: (MetadataRequest, 0, 12),
    ApiKey.ApiVersions: (ApiVersionsRequest, 0, 4),
    ApiKey.InitProducerId: (InitProducerIdRequest, 0, 4),
    ApiKey.OffsetForLeaderEpoch: (OffsetForLeaderEpochRequest, 2, 4),
    ApiKey.OffsetCommit: (OffsetCommitRequest, 2, 9),
    ApiKey.OffsetFetch: (OffsetFetchRequest, 1, 9),
    ApiKey.FindCoordinator: (FindCoordinatorRequest, 0, 6),
    ApiKey.JoinGroup: (JoinGroupRequest, 2, 9),
    ApiKey.Heartbeat: (HeartbeatRequest, 0, 4),
    ApiKey.LeaveGroup: (LeaveGroupRequest, 0, 5),
    ApiKey.SyncGroup: (SyncGroupRequest, 0, 5),
    ApiKey.DescribeGroups: (DescribeGroupsRequest, 0, 6),
    ApiKey.ListGroups: (ListGroupsRequest, 0, 5),
    ApiKey.DeleteGroups: (DeleteGroupsRequest, 0, 2),
    ApiKey.OffsetDelete: (OffsetDeleteRequest, 0, 0),
    ApiKey.DescribeConfigs: (DescribeConfigsRequest, 1, 4),
    ApiKey.CreateTopics: (CreateTopicsRequest, 2, 7),
    ApiKey.DeleteTopics: (DeleteTopicsRequest, 1, 6),
    ApiKey.CreatePartitions: (CreatePartitionsRequest, 0, 3),
    ApiKey.IncrementalAlterConfigs: (IncrementalAlterConfigsRequest, 0, 1),
    ApiKey.DeleteRecords: (DeleteRecordsRequest, 0, 2),
    ApiKey.DescribeCluster: (DescribeClusterRequest, 0, 2),
    # transactions (classic: the versions before transactions V2)
    ApiKey.AddPartitionsToTxn: (AddPartitionsToTxnRequest, 0, 4),
    ApiKey.AddOffsetsToTxn: (AddOffsetsToTxnRequest, 0, 3),
    ApiKey.EndTxn: (EndTxnRequest, 0, 4),
    ApiKey.TxnOffsetCommit: (TxnOffsetCommitRequest, 0, 4),
    ApiKey.DescribeProducers: (DescribeProducersRequest, 0, 0),
    ApiKey.ListTransactions: (ListTransactionsRequest, 0, 2),
    ApiKey.DescribeTransactions: (DescribeTransactionsRequest, 0, 0),
}
#: api key -> the lowest version ApiVersions advertises, where it is below what is served:
#: Produce from 0, as Kafka 4 does (KAFKA-18659): older librdkafka (kcat 1.7's 2.0 among
#: them) compresses gzip, snappy and lz4 batches only for a broker that lists Produce v0.
#: A request below the served range still closes the connection.
ADVERTISED_LOWEST = {ApiKey.Produce: 0}
REQUEST_CLASSES = {int(k): cls for k, (cls, _, _) in SUPPORTED_VERSIONS.items()}
VERSIONS = {int(k): (low, high) for k, (_, low, high) in SUPPORTED_VERSIONS.items()}


def handle_api_versions(apis, request) -> ApiVersionsResponse:
    """Every api key of :data:`SUPPORTED_VERSIONS` with its version range (the lower end
    as :data:`ADVERTISED_LOWEST` lowers it)."""
    return api_versions_response(NONE)


def api_versions_response(error: int) -> ApiVersionsResponse:
    keys = [ApiVersionsResponse.ApiVersion(api_key=int(k), min_version=ADVERTISED_LOWEST.get(k, low),
                                           max_version=high)
            for k, (_, low, high) in sorted(SUPPORTED_VERSIONS.items())]
    return ApiVersionsResponse(error_code=error, api_keys=keys, throttle_time_ms=0)


HANDLERS = {
    ApiKey.Produce: handle_produce,
    ApiKey.Fetch: handle_fetch,
    ApiKey.ListOffsets: handle_list_offsets,
    ApiKey.Metadata: handle_metadata,
    ApiKey.ApiVersions: handle_api_versions,
    ApiKey.InitProducerId: handle_init_producer_id,
    ApiKey.OffsetForLeaderEpoch: handle_offset_for_leader_epoch,
    ApiKey.OffsetCommit: handle_offset_commit,
    ApiKey.OffsetFetch: handle_offset_fetch,
    ApiKey.FindCoordinator: handle_find_coordinator,
    ApiKey.JoinGroup: handle_join_group,
    ApiKey.Heartbeat: handle_heartbeat,
    ApiKey.LeaveGroup: handle_leave_group,
    ApiKey.SyncGroup: handle_sync_group,
    ApiKey.DescribeGroups: handle_describe_groups,
    ApiKey.ListGroups: handle_list_groups,
    ApiKey.DeleteGroups: handle_delete_groups,
    ApiKey.OffsetDelete: handle_offset_delete,
    ApiKey.DescribeConfigs: handle_describe_configs,
    ApiKey.CreateTopics: handle_create_topics,
    ApiKey.DeleteTopics: handle_delete_topics,
    ApiKey.CreatePartitions: handle_create_partitions,
    ApiKey.IncrementalAlterConfigs: handle_incremental_alter_configs,
    ApiKey.DeleteRecords: handle_delete_records,
    ApiKey.DescribeCluster: handle_describe_cluster,
    ApiKey.AddPartitionsToTxn: handle_add_partitions_to_txn,
    ApiKey.AddOffsetsToTxn: handle_add_offsets_to_txn,
    ApiKey.EndTxn: handle_end_txn,
    ApiKey.TxnOffsetCommit: handle_txn_offset_commit,
    ApiKey.DescribeProducers: handle_describe_producers,
    ApiKey.ListTransactions: handle_list_transactions,
    ApiKey.DescribeTransactions: handle_describe_transactions,
}


class KafkaApis:
    """The handlers' shared state: the log dir's ``manager`` (topics and their settings),
    its partitions as the server appends to and reads them (``replicas``, a
    :class:`~pylog.serve.replica_manager.ReplicaManager`), the server's ``config``
    (:class:`~pylog.serve.serve_config.ServeConfig`), the address clients are told to use,
    the notifiers fetches and joins wait on, the log dir's group coordinator (taken at the
    first group request), and the thread pools for disk writes (``io_pool``) and
    ``sendfile`` (``network_pool``). Created and used on the event loop's thread."""

    def __init__(self, manager, config, *, advertised_host: str, advertised_port: int):
        self.manager, self.config = manager, config
        self.advertised_host, self.advertised_port = advertised_host, advertised_port
        self.replicas = ReplicaManager(manager.root)
        self.appends = AppendNotifier()
        self._loop = asyncio.get_running_loop()
        if self.replicas.fileno() >= 0:  # an append by any process to a partition read wakes the fetches waiting
            self._loop.add_reader(self.replicas.fileno(), self._files_appended)
        self.marker = new_marker()
        self.groups = GroupNotifier()
        self._group_coordinator: GroupCoordinator | None = None
        self._txn_coordinator: TransactionCoordinator | None = None
        self.txn_writers: ServerWriters | None = None  # what the transaction coordinator appends through
        self.io_pool = ThreadPoolExecutor(config.num_io_threads, thread_name_prefix="pylog-serve-io")
        self.network_pool = ThreadPoolExecutor(config.num_network_threads, thread_name_prefix="pylog-serve-send")

    async def handle(self, frame: bytes) -> list | None:
        """The answer to one request frame as parts to send (bytes, and fetched file ranges),
        or None when none is due (``acks=0``). Raises
        :class:`~pylog.serve.request_channel.BadRequest` when the connection should close."""
        try:
            request = parse_request(frame, REQUEST_CLASSES, VERSIONS)
        except UnsupportedVersion as e:
            if e.header.request_api_key != ApiKey.ApiVersions:
                raise
            return [encode_body(api_versions_response(UNSUPPORTED_VERSION), 0, e.header.correlation_id)]
        result = HANDLERS[request.api_key](self, request)
        if inspect.isawaitable(result):
            result = await result
        if result is None or isinstance(result, list):
            return result
        return [encode_response(request, result)]

    async def run_blocking(self, function, *args):
        """``function(*args)`` in the disk thread pool, awaited."""
        return await asyncio.get_running_loop().run_in_executor(self.io_pool, function, *args)

    def _files_appended(self) -> None:
        self.replicas.drain()
        self.appends.notify()

    async def open_logs(self, pairs) -> None:
        """Open the read-only logs of ``pairs`` (topic, partition) in the disk pool, so that
        a first use, which may index a log not closed cleanly, never runs on the event
        loop. A partition that does not exist is left for the handler to answer. Cost: one
        hop to the pool; nothing for logs already open."""
        await self.run_blocking(self.replicas.open_each, list(pairs))

    async def group_coordinator(self) -> GroupCoordinator:
        """The log dir's group coordinator; the first call creates ``__consumer_offsets``
        if missing (in the disk pool)."""
        if self._group_coordinator is None:
            coordinator = await self.run_blocking(GroupCoordinator.for_root, self.manager.root)
            if self._group_coordinator is None:
                self._group_coordinator = coordinator
            else:
                coordinator.release()
        return self._group_coordinator

    async def group_membership(self, group_id: str):
        """The coordinator's :class:`~pylog.coordinator.group_membership.GroupMembership`
        of ``group_id``."""
        return (await self.group_coordinator()).membership(group_id)

    async def txn_coordinator(self, *, create: bool = True) -> TransactionCoordinator | None:
        """The log dir's transaction coordinator, appending through the server's logs
        (:class:`~pylog.serve.transactions.ServerWriters`); the first call creates
        ``__transaction_state`` if missing (in the disk pool), but with ``create=False``,
        which answers None then (no transactional id can be known: nothing is written)."""
        if self._txn_coordinator is None:
            if not create and not TransactionCoordinator.has_state(self.manager.root):
                return None
            writers = ServerWriters(self.replicas)
            coordinator = await self.run_blocking(lambda: TransactionCoordinator(self.manager.root, writers))
            if self._txn_coordinator is None:
                self._txn_coordinator, self.txn_writers = coordinator, writers
            else:
                coordinator.close()
        return self._txn_coordinator

    @staticmethod
    def log_failure(what: str, exc: BaseException) -> None:
        """A failure that is a bug, not the client's: logged with its traceback."""
        LOG.error("%s failed", what, exc_info=exc)

    def close(self) -> None:
        """Wait for the appends and sends in flight, stop the pools, then give back the
        group coordinator (its members' lease ends) and the partitions (the log dir's
        writer pool closes them when no other user of this process has it)."""
        if self.replicas.fileno() >= 0:
            self._loop.remove_reader(self.replicas.fileno())
        self.io_pool.shutdown(wait=True)
        self.network_pool.shutdown(wait=True)
        close_all([c for c in (self._txn_coordinator and self._txn_coordinator.close,
                               self._group_coordinator and self._group_coordinator.release) if c]
                  + [self.replicas.close])
