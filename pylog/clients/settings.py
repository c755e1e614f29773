"""The settings a ``Producer`` or ``Consumer`` refuses: kafka-python's (and Kafka's) client
settings that have no meaning for clients reading and writing a log dir in place.

pylog's clients have no broker to connect to, no request to retry or time out, no
connection to secure: each of those settings is refused by name with
:class:`InvalidConfigError`, with the reason and the settings the client does take, rather
than Python's ``TypeError`` for an unexpected keyword. Which kafka-python settings are
taken, and what they mean here: docs/consumers.md, "kafka-python's settings".
"""

from __future__ import annotations

import inspect

from pylog.errors import InvalidConfigError

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
