"""``ServeConfig``: the server's settings, named after the Kafka broker settings they
mirror (``node.id``, ``auto.create.topics.enable``, ``num.partitions``,
``socket.request.max.bytes``, ``max.connections``, ``num.io.threads``,
``group.min.session.timeout.ms``, ``transaction.abort.timed.out.transaction.cleanup.interval.ms``),
with Kafka's defaults where Kafka has one that fits a single node."""

from __future__ import annotations

from dataclasses import dataclass, fields

from pylog.arguments import check_int
from pylog.errors import InvalidConfigError
from pylog.layout import INT32_MAX

#: Kafka's ``socket.request.max.bytes`` default: 100 MiB
SOCKET_REQUEST_MAX_BYTES = 100 * 1024 * 1024


@dataclass(frozen=True)
class ServeConfig:
    """``node_id``: this broker's id in Metadata answers. ``cluster_id``: the cluster id
    it reports. ``auto_create_topics_enable``: create a topic a Metadata request names
    (Kafka's default: yes) with ``num_partitions`` partitions. ``socket_request_max_bytes``:
    a request frame larger than this closes its connection before any byte of it is
    buffered. ``max_connections``: connections past it are closed as they are accepted.
    ``num_io_threads``: threads that append and allocate producer ids off the event loop.
    ``num_network_threads``: threads that send fetched file ranges with ``sendfile`` (one
    per response in flight). ``group_min_session_timeout_ms`` and
    ``group_max_session_timeout_ms``: the session timeouts a JoinGroup may ask for (others
    get ``INVALID_SESSION_TIMEOUT``).
    ``transaction_abort_timed_out_transaction_cleanup_interval_ms``: how often the
    transactions left open past their timeout are aborted (pylog/serve/txn_expiry.py)."""

    node_id: int = 0
    cluster_id: str = "pylog"
    auto_create_topics_enable: bool = True
    num_partitions: int = 1
    socket_request_max_bytes: int = SOCKET_REQUEST_MAX_BYTES
    max_connections: int = 1000
    num_io_threads: int = 8
    num_network_threads: int = 8
    group_min_session_timeout_ms: int = 6_000
    group_max_session_timeout_ms: int = 1_800_000
    transaction_abort_timed_out_transaction_cleanup_interval_ms: int = 10_000

    def __post_init__(self):
        check_int(self.node_id, "node_id", (0, INT32_MAX), error=InvalidConfigError)
        for name in ("num_partitions", "socket_request_max_bytes", "max_connections", "num_io_threads",
                     "num_network_threads", "group_min_session_timeout_ms",
                     "transaction_abort_timed_out_transaction_cleanup_interval_ms"):
            check_int(getattr(self, name), name, (1, INT32_MAX), error=InvalidConfigError)
        check_int(self.group_max_session_timeout_ms, "group_max_session_timeout_ms",
                  (self.group_min_session_timeout_ms, INT32_MAX), error=InvalidConfigError)
        if not isinstance(self.auto_create_topics_enable, bool):
            raise InvalidConfigError(f"auto_create_topics_enable must be a bool, got "
                                     f"{self.auto_create_topics_enable!r}")

    def to_kafka(self) -> dict[str, tuple[str, bool]]:
        """The settings by Kafka's broker names, each as (value as Kafka writes it, whether
        it was set rather than left at its default); ``cluster_id`` is not a Kafka setting.

        >>> ServeConfig(num_partitions=3).to_kafka()["num.partitions"]
        ('3', True)
        """
        out = {}
        for f in fields(self):
            if f.name != "cluster_id":
                value = getattr(self, f.name)
                text = str(value).lower() if isinstance(value, bool) else str(value)
                out[f.name.replace("_", ".")] = (text, value != f.default)
        return out
