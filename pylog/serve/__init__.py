"""``pylog serve``: Kafka's wire protocol over a log dir, so Kafka's clients read and write
pylog's topics (docs/serve.md).

One module per part of Kafka's broker it mirrors: :mod:`~pylog.serve.socket_server` (the
acceptor and the connections, Kafka's ``SocketServer``), :mod:`~pylog.serve.request_channel`
(a frame to a request and a response to bytes, with kafka-python's message classes
generated from Kafka's JSON definitions), :mod:`~pylog.serve.kafka_apis` (the dispatcher,
Kafka's ``KafkaApis``), :mod:`~pylog.serve.replica_manager` (the partitions, appended
through the log dir's writer pool and read read-only, Kafka's ``ReplicaManager``) and one
module per API family (:mod:`~pylog.serve.produce`,
:mod:`~pylog.serve.fetch`, :mod:`~pylog.serve.metadata`, :mod:`~pylog.serve.list_offsets`,
:mod:`~pylog.serve.offset_for_leader_epoch`, :mod:`~pylog.serve.producer_ids`; the groups':
:mod:`~pylog.serve.find_coordinator`, :mod:`~pylog.serve.consumer_groups`,
:mod:`~pylog.serve.offset_commit`, :mod:`~pylog.serve.describe_groups`,
:mod:`~pylog.serve.delete_groups`; the transactions': :mod:`~pylog.serve.transactions`,
:mod:`~pylog.serve.transaction_admin`, :mod:`~pylog.serve.txn_expiry`; the admin APIs': :mod:`~pylog.serve.create_topics`,
:mod:`~pylog.serve.delete_topics`, :mod:`~pylog.serve.create_partitions`,
:mod:`~pylog.serve.describe_configs`, :mod:`~pylog.serve.incremental_alter_configs`,
:mod:`~pylog.serve.delete_records`, :mod:`~pylog.serve.describe_cluster`, with
:mod:`~pylog.serve.api_error` and :mod:`~pylog.serve.topic_ids`); :mod:`~pylog.serve.server` starts and stops it all.
Needs kafka-python 3 (``pip install 'pylog-kafka[serve]'``).
"""

from pylog.errors import MissingDependencyError

try:
    import kafka.protocol.api_key  # noqa: F401 - kafka-python 3's message classes
except ImportError as e:
    raise MissingDependencyError(f"pylog serve needs kafka-python 3, of the extra 'serve': "
                                 f"pip install 'pylog-kafka[serve]' ({e})") from None

from pylog.serve.server import Server  # noqa: E402 - after the check of its dependency

__all__ = ["Server"]
