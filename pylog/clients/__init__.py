"""Kafka's clients on a pylog log dir: :class:`Producer`, :class:`Consumer` and consumer
groups across the processes of one host (docs/consumers.md).

The public classes load on first use, so that importing one of them (or ``pylog.clients``)
loads no more than it needs."""

_LAZY = {
    **{name: "pylog.clients.producer" for name in (
        "BatchMetadata", "FutureBatchMetadata", "FutureRecordMetadata", "Producer", "RecordMetadata")},
    **{name: "pylog.clients.consumer" for name in (
        "Consumer", "ConsumerRebalanceListener", "ConsumerRecord", "OffsetAndMetadata", "OffsetAndTimestamp",
        "TopicPartition")},
}

__all__ = sorted(_LAZY)


def __getattr__(name):
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'pylog.clients' has no attribute {name!r}")
    import importlib
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__():
    return sorted(list(globals()) + list(_LAZY))
