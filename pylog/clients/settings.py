"""The settings of a ``Producer`` or ``Consumer`` (Kafka's ``ProducerConfig`` and
``ConsumerConfig``): the checks of those it takes, and those it refuses: kafka-python's
(and Kafka's) client settings that have no meaning for clients reading and writing a log
dir in place.

pylog's clients have no broker to connect to, no request to retry or time out, no
connection to secure: each of those settings is refused by name with
:class:`InvalidConfigError`, with the reason and the settings the client does take, rather
than Python's ``TypeError`` for an unexpected keyword. Which kafka-python settings are
taken, and what they mean here: docs/consumers.md, "kafka-python's settings".
"""

from __future__ import annotations

import inspect

from pylog.arguments import check_bool, check_choice, check_function, check_int, check_name
from pylog.coordinator.assignors import ASSIGNORS
from pylog.errors import InvalidArgumentError, InvalidConfigError
from pylog.layout import COMPRESSION_NAMES, INT32_MAX
from pylog.manager import MAX_PARTITIONS

#: kafka-python settings about brokers, connections and requests (of producers and consumers).
NETWORK_SETTINGS = frozenset({
    "bootstrap_servers", "api_version", "api_version_auto_timeout_ms", "connections_max_idle_ms",
    "reconnect_backoff_ms", "reconnect_backoff_max_ms", "request_timeout_ms", "retry_backoff_ms", "retries",
    "delivery_timeout_ms", "max_in_flight_requests_per_connection", "metadata_max_age_ms", "receive_buffer_bytes",
    "send_buffer_bytes", "socket_options", "sock_chunk_bytes", "sock_chunk_buffer_count", "security_protocol",
    "ssl_context", "ssl_check_hostname", "ssl_cafile", "ssl_certfile", "ssl_keyfile", "ssl_crlfile", "ssl_password",
    "ssl_ciphers", "sasl_mechanism", "sasl_plain_username", "sasl_plain_password", "sasl_kerberos_service_name",
    "sasl_kerberos_domain_name", "sasl_oauth_token_provider", "selector", "metrics_enabled", "metric_reporters",
    "metrics_num_samples", "metrics_sample_window_ms", "buffer_memory", "max_request_size", "fetch_min_bytes",
    "fetch_max_wait_ms", "max_partition_fetch_bytes",
})


def refuse_unknown_settings(client_class, settings: dict) -> None:
    """:class:`InvalidConfigError` naming the first of ``settings`` (keywords the
    constructor of ``client_class`` does not take) and why; nothing when there are none."""
    if not settings:
        return
    name = sorted(settings)[0]
    if name in NETWORK_SETTINGS:
        reason = (f"kafka-python's {name} has no meaning here: pylog's clients read and write the log dir "
                  f"given as root, with no broker, connection or request between")
    else:
        reason = f"there is no setting {name}"
    taken = [p for p in inspect.signature(client_class).parameters if p not in ("root", "settings")]
    raise InvalidConfigError(f"{client_class.__name__}: {reason}; it takes {', '.join(taken)} "
                             f"(docs/consumers.md)")


#: kafka-python's isolation levels, as ``Log.read`` names them.
ISOLATION_LEVELS = {"read_uncommitted": "uncommitted", "read_committed": "committed"}
OFFSET_RESETS = ("earliest", "latest", "none")


def check_consumer_settings(*, group_id, auto_offset_reset, enable_auto_commit, auto_commit_interval_ms,
                            isolation_level, session_timeout_ms, heartbeat_interval_ms, max_poll_interval_ms,
                            max_poll_records, fetch_max_bytes, partition_assignment_strategy, client_id,
                            consumer_timeout_ms, exclude_internal_topics, key_deserializer, value_deserializer) -> None:
    """The ``Consumer``'s settings, checked when it is made, before it reads or writes a
    file: :class:`InvalidArgumentError` naming the first out of range (Kafka's rules:
    the heartbeat interval below the session timeout). O(1)."""
    if group_id is not None:
        check_name(group_id, "group_id")
    check_choice(auto_offset_reset, "auto_offset_reset", OFFSET_RESETS)
    check_choice(isolation_level, "isolation_level", tuple(ISOLATION_LEVELS))
    check_bool(enable_auto_commit, "enable_auto_commit")
    check_bool(exclude_internal_topics, "exclude_internal_topics")
    check_int(auto_commit_interval_ms, "auto_commit_interval_ms", (0, INT32_MAX))
    check_int(session_timeout_ms, "session_timeout_ms", (1, INT32_MAX))
    check_int(heartbeat_interval_ms, "heartbeat_interval_ms", (1, session_timeout_ms - 1))
    check_int(max_poll_interval_ms, "max_poll_interval_ms", (1, INT32_MAX))
    check_int(max_poll_records, "max_poll_records", (1, INT32_MAX))
    check_int(fetch_max_bytes, "fetch_max_bytes", (0, INT32_MAX))
    check_name(client_id, "client_id")
    if isinstance(consumer_timeout_ms, bool) or not isinstance(consumer_timeout_ms, (int, float)) \
            or not consumer_timeout_ms >= 0:
        raise InvalidArgumentError(f"consumer_timeout_ms must be a number >= 0 (inf: never), not "
                                   f"{consumer_timeout_ms!r}")
    check_function(key_deserializer, "key_deserializer")
    check_function(value_deserializer, "value_deserializer")
    names = partition_assignment_strategy
    if not isinstance(names, (list, tuple)) or not names or any(not isinstance(a, str) or a not in ASSIGNORS
                                                                 for a in names):
        raise InvalidArgumentError(f"partition_assignment_strategy must name assignors among {sorted(ASSIGNORS)}, "
                                   f"not {names!r}")


#: Kafka's broker default ``transaction.max.timeout.ms``: the longest transaction timeout it takes.
TRANSACTION_MAX_TIMEOUT_MS = 900_000
#: The most ``__transaction_state`` partitions a producer may ask for.
MAX_TRANSACTION_STATE_PARTITIONS = 1000


def check_producer_settings(*, transactional_id, enable_idempotence, linger_ms, batch_size, compression_type,
                            max_block_ms, transaction_timeout_ms, client_id, transaction_state_partitions,
                            key_serializer, value_serializer, auto_create_topics_enable, num_partitions) -> None:
    """The ``Producer``'s settings, checked before it touches the log dir:
    :class:`InvalidArgumentError` naming the first that is out of range. O(1)."""
    check_bool(auto_create_topics_enable, "auto_create_topics_enable")
    check_int(num_partitions, "num_partitions", (1, MAX_PARTITIONS))
    check_int(linger_ms, "linger_ms", (0, INT32_MAX))
    check_int(batch_size, "batch_size", (0, INT32_MAX))
    check_int(max_block_ms, "max_block_ms", (0, INT32_MAX))
    check_int(transaction_timeout_ms, "transaction_timeout_ms", (1, TRANSACTION_MAX_TIMEOUT_MS))
    check_bool(enable_idempotence, "enable_idempotence")
    check_name(client_id, "client_id")
    if compression_type is not None:
        check_choice(compression_type, "compression_type", COMPRESSION_NAMES)
    check_function(key_serializer, "key_serializer")
    check_function(value_serializer, "value_serializer")
    if transaction_state_partitions is not None:
        check_int(transaction_state_partitions, "transaction_state_partitions", (1, MAX_TRANSACTION_STATE_PARTITIONS))
    if transactional_id is not None:
        check_name(transactional_id, "transactional_id")
        if not enable_idempotence:
            raise InvalidArgumentError("a transactional producer must be idempotent (enable_idempotence=True)")


def check_poll_arguments(timeout_ms, max_records) -> None:
    """``Consumer.poll``'s ``timeout_ms`` (a number >= 0) and ``max_records`` (1 to
    INT32_MAX); :class:`InvalidArgumentError` naming the one that is not."""
    if isinstance(timeout_ms, bool) or not isinstance(timeout_ms, (int, float)) or not timeout_ms >= 0:
        raise InvalidArgumentError(f"timeout_ms must be a number >= 0, not {timeout_ms!r}")
    check_int(max_records, "max_records", (1, INT32_MAX))
