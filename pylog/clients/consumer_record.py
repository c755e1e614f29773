"""``ConsumerRecord``: a record as a consumer returns it (Kafka's and kafka-python's
``ConsumerRecord``): a :class:`~pylog.record.Record` with its partition, leader epoch,
timestamp type and serialized sizes. Memory only.
"""

from __future__ import annotations

from pylog.record.record import Record, _short, freed_as_record


class ConsumerRecord(Record):
    """A record as ``poll`` returns it: a :class:`~pylog.record.Record` read from its
    partition, with kafka-python's ``ConsumerRecord`` fields: ``topic``, ``partition``,
    ``leader_epoch`` (of its batch), ``offset``, ``timestamp``, ``timestamp_type``
    (Kafka's name: ``"CreateTime"`` or ``"LogAppendTime"``), ``key``, ``value``,
    ``headers``, ``serialized_key_size`` and ``serialized_value_size`` (bytes; -1 for
    None). The records of one leader epoch share a subclass that carries it
    (:func:`_epoch_class`), so the records of a batch are decoded as one straight away,
    in C when the speedups are built."""

    __slots__ = ()
    leader_epoch = -1

    @property
    def serialized_key_size(self) -> int:
        return -1 if self.key is None else len(self.key)

    @property
    def serialized_value_size(self) -> int:
        return -1 if self.value is None else len(self.value)

    def __repr__(self) -> str:
        return (f"ConsumerRecord(topic={self.topic!r}, partition={self.partition!r}, "
                f"leader_epoch={self.leader_epoch!r}, offset={self.offset!r}, timestamp={self.timestamp!r}, "
                f"timestamp_type={self.timestamp_type!r}, key={_short(self.key)}, value={_short(self.value)}, "
                f"headers={self.headers!r})")

    def __reduce__(self):
        sizes = (self.serialized_key_size, self.serialized_value_size) if isinstance(self, DeserializedRecord) \
            else None
        return _consumer_record, (self.leader_epoch, self.value, self.key, self.timestamp, self.headers, self.offset,
                                  self.topic, self.partition, self.timestamp_type, sizes)


class DeserializedRecord(ConsumerRecord):
    """A record whose key or value went through a deserializer: the sizes are those of its bytes."""
    __slots__ = ("leader_epoch", "serialized_key_size", "serialized_value_size")


def _consumer_record(leader_epoch, value, key, timestamp, headers, offset, topic, partition, timestamp_type,
                     sizes) -> ConsumerRecord:
    """A pickled :class:`ConsumerRecord` back."""
    record = (_epoch_class(leader_epoch) if sizes is None else DeserializedRecord)(value, key, timestamp,
                                                                                     headers, offset)
    record.topic, record.partition, record.timestamp_type = topic, partition, timestamp_type
    if sizes is not None:
        record.leader_epoch, (record.serialized_key_size, record.serialized_value_size) = leader_epoch, sizes
    return record


_EPOCH_CLASSES: dict[int, type] = {}


def _epoch_class(leader_epoch: int) -> type:
    """The :class:`ConsumerRecord` subclass of the records of ``leader_epoch`` (one per
    epoch seen by the process: a few)."""
    cls = _EPOCH_CLASSES.get(leader_epoch)
    if cls is None:
        cls = _EPOCH_CLASSES[leader_epoch] = freed_as_record(
            type("ConsumerRecord", (ConsumerRecord,), {"__slots__": (), "leader_epoch": leader_epoch,
                                                       "__module__": __name__}))
    return cls


def consumer_record_class(batch) -> type:
    """The class a consumer decodes ``batch``'s records as: the :class:`ConsumerRecord` of
    its leader epoch (``FetchData.records``' ``record_type``)."""
    return _epoch_class(batch.partition_leader_epoch)
