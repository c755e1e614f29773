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
import importlib
import inspect
import logging
import re
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, NamedTuple

from kafka.protocol.api_key import ApiKey
from kafka.protocol.metadata import ApiVersionsResponse

from pylog.closing import close_all
from pylog.serve.error_codes import NONE, UNSUPPORTED_VERSION
from pylog.serve.purgatory import AppendNotifier, GroupNotifier
from pylog.serve.replica_manager import ReplicaManager
from pylog.serve.request_channel import UnsupportedVersion, encode_body, encode_response, parse_request

if TYPE_CHECKING:
    from pylog.coordinator.group_coordinator import GroupCoordinator
    from pylog.coordinator.txn_coordinator import TransactionCoordinator
    from pylog.serve.transactions import ServerWriters

LOG = logging.getLogger("pylog.serve")


class Api(NamedTuple):
    """One API this server answers: its lowest and highest version, and its request class
    and handler as ``"module:name"``, each imported by the API's first request
    (:data:`REQUEST_CLASSES`, :data:`HANDLERS`): a server answers its first request before
    it has loaded the message classes and handlers of the APIs no client asked for yet."""

    low: int
    high: int
    request: str
    handler: str


def _api(api_key: ApiKey, low: int, high: int, family: str, module: str) -> Api:
    """The :class:`Api` of ``api_key`` served at versions ``low`` to ``high``: its request
    class is ``<Name>Request`` of ``kafka.protocol.<family>``, its handler
    ``handle_<name>`` of ``pylog.serve.<module>`` (``InitProducerId``:
    ``InitProducerIdRequest``, ``handle_init_producer_id``)."""
    snake = re.sub(r"(?<!^)(?=[A-Z])", "_", api_key.name).lower()
    return Api(low, high, f"kafka.protocol.{family}:{api_key.name}Request", f"pylog.serve.{module}:handle_{snake}")


#: api key -> the :class:`Api` this server answers, from (lowest version, highest version,
#: the family of its message classes, the module of its handler)
SUPPORTED_VERSIONS = {api_key: _api(api_key, *served) for api_key, served in {
    ApiKey.Produce: (3, 11, "producer", "produce"),
    ApiKey.Fetch: (4, 12, "consumer", "fetch"),
    ApiKey.ListOffsets: (1, 9, "consumer", "list_offsets"),
    ApiKey.Metadata: (0, 12, "metadata", "metadata"),
    ApiKey.ApiVersions: (0, 4, "metadata", "kafka_apis"),
    ApiKey.InitProducerId: (0, 4, "producer", "producer_ids"),
    ApiKey.OffsetForLeaderEpoch: (2, 4, "consumer", "offset_for_leader_epoch"),
    ApiKey.OffsetCommit: (2, 9, "consumer", "offset_commit"),
    ApiKey.OffsetFetch: (1, 9, "consumer", "offset_commit"),
    ApiKey.FindCoordinator: (0, 6, "metadata", "find_coordinator"),
    ApiKey.JoinGroup: (2, 9, "consumer", "consumer_groups"),
    ApiKey.Heartbeat: (0, 4, "consumer", "consumer_groups"),
    ApiKey.LeaveGroup: (0, 5, "consumer", "consumer_groups"),
    ApiKey.SyncGroup: (0, 5, "consumer", "consumer_groups"),
    ApiKey.DescribeGroups: (0, 6, "admin", "describe_groups"),
    ApiKey.ListGroups: (0, 5, "admin", "describe_groups"),
    ApiKey.DeleteGroups: (0, 2, "admin", "delete_groups"),
    ApiKey.OffsetDelete: (0, 0, "consumer", "delete_groups"),
    ApiKey.DescribeConfigs: (1, 4, "admin", "describe_configs"),
    ApiKey.CreateTopics: (2, 7, "admin", "create_topics"),
    ApiKey.DeleteTopics: (1, 6, "admin", "delete_topics"),
    ApiKey.CreatePartitions: (0, 3, "admin", "create_partitions"),
    ApiKey.IncrementalAlterConfigs: (0, 1, "admin", "incremental_alter_configs"),
    ApiKey.DeleteRecords: (0, 2, "admin", "delete_records"),
    ApiKey.DescribeCluster: (0, 2, "admin", "describe_cluster"),
    # transactions (classic: the versions before transactions V2)
    ApiKey.AddPartitionsToTxn: (0, 4, "producer", "transactions"),
    ApiKey.AddOffsetsToTxn: (0, 3, "producer", "transactions"),
    ApiKey.EndTxn: (0, 4, "producer", "transactions"),
    ApiKey.TxnOffsetCommit: (0, 4, "producer", "transactions"),
    ApiKey.DescribeProducers: (0, 0, "admin", "transaction_admin"),
    ApiKey.ListTransactions: (0, 2, "admin", "transaction_admin"),
    ApiKey.DescribeTransactions: (0, 0, "admin", "transaction_admin"),
}.items()}
#: api key -> the lowest version ApiVersions advertises, where it is below what is served:
#: Produce from 0, as Kafka 4 does (KAFKA-18659): older librdkafka (kcat 1.7's 2.0 among
#: them) compresses gzip, snappy and lz4 batches only for a broker that lists Produce v0.
#: A request below the served range still closes the connection.
ADVERTISED_LOWEST = {ApiKey.Produce: 0}
VERSIONS = {int(k): (api.low, api.high) for k, api in SUPPORTED_VERSIONS.items()}


def load(name: str):
    """The object ``"module:name"`` names, its module imported if it was not yet."""
    module, _, attribute = name.partition(":")
    return getattr(importlib.import_module(module), attribute)


class _Loaded(dict):
    """Api key -> one field of its :class:`Api`, loaded (:func:`load`) on first use."""

    def __init__(self, field: str):
        super().__init__()
        self._field = field

    def __missing__(self, api_key: int):
        value = self[api_key] = load(getattr(SUPPORTED_VERSIONS[api_key], self._field))
        return value


#: api key -> its request class, and -> its handler, each imported by the first request of it
REQUEST_CLASSES, HANDLERS = _Loaded("request"), _Loaded("handler")


def handle_api_versions(apis, request) -> ApiVersionsResponse:
    """Every api key of :data:`SUPPORTED_VERSIONS` with its version range (the lower end
    as :data:`ADVERTISED_LOWEST` lowers it)."""
    return api_versions_response(NONE)


def api_versions_response(error: int) -> ApiVersionsResponse:
    keys = [ApiVersionsResponse.ApiVersion(api_key=int(k), min_version=ADVERTISED_LOWEST.get(k, api.low),
                                           max_version=api.high)
            for k, api in sorted(SUPPORTED_VERSIONS.items())]
    return ApiVersionsResponse(error_code=error, api_keys=keys, throttle_time_ms=0)


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
            from pylog.coordinator.group_coordinator import GroupCoordinator
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
            from pylog.coordinator.txn_coordinator import TransactionCoordinator
            from pylog.serve.transactions import ServerWriters
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
        steps = []
        if self._txn_coordinator is not None:
            steps.append(self._txn_coordinator.close)
        if self._group_coordinator is not None:
            steps.append(self._group_coordinator.release)
        close_all(steps + [self.replicas.close])
