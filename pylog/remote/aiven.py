"""Aiven's tiered storage for Apache Kafka: the objects it writes per remote segment, read and
written by pylog (spec: docs/format/tiered-aiven.md).

One remote segment is three objects under ``<prefix><topic>-<topicId>/<partition>/``, named
``<20-digit start offset>-<segment id>`` plus a suffix:

- ``.log``: the segment file, cut into chunks of ``original_chunk_size`` bytes (the last one
  shorter), each chunk transformed on its own (zstd compressed, then AES-GCM encrypted, each
  optional) and the transformed chunks concatenated. Untransformed, it is the segment's bytes.
- ``.indexes``: the offset, time, producer-snapshot, leader-epoch and (when present)
  transaction indexes concatenated in that order, each encrypted on its own when the segment is.
- ``.rsm-manifest``: JSON naming the chunk index (how original byte ranges map to transformed
  ones), where each index lies in ``.indexes``, the compression flag and, for encrypted
  segments, the segment's AES data key wrapped with an RSA public key.

The manifest is uploaded last, so a segment whose copy stopped midway has no manifest and no
reader treats it as live. Everything here is pure over bytes plus the few
:class:`~pylog.remote.store.ObjectStore` calls named in each docstring.
"""

from __future__ import annotations

import base64
import functools
import hashlib
import json
import os
import re
import tempfile
from dataclasses import dataclass, field
from itertools import accumulate

import zstandard

from pylog.coordinator.schema import uuid_text
from pylog.errors import (CorruptFileError, InvalidArgumentError, InvalidRecordError, MissingDependencyError,
                          PylogError)
from pylog.layout import INT32_MAX, LOG_OVERHEAD, LOG_OVERHEAD_BYTES, offset_file_prefix
from pylog.log.loader import parse_segment_file
from pylog.record.batch import decode_batches

LOG, INDEXES, MANIFEST = SUFFIXES = ("log", "indexes", "rsm-manifest")
#: The plugin's recommended ``chunk.size`` (its README).
DEFAULT_CHUNK_SIZE = 4 * 1024 * 1024
#: The largest ``chunk.size`` the plugin accepts (RemoteStorageManagerConfig).
MAX_CHUNK_SIZE = INT32_MAX // 2
#: AES-GCM as the plugin runs it: a 12-byte IV before each encrypted chunk, a 16-byte tag after.
IV_BYTES = 12
GCM_TAG_BYTES = 16
#: AES-256 data keys; the AAD is a second AES-256 key's bytes.
DATA_KEY_BYTES = 32
AAD_BYTES = 32
#: The indexes in ``.indexes`` order: pylog's name, the manifest's JSON name.
INDEX_NAMES = (("offset", "offset"), ("timestamp", "timestamp"), ("producer_snapshot", "producerSnapshot"),
               ("leader_epoch", "leaderEpoch"), ("transaction", "transaction"))
#: The largest encoded chunk-size list the plugin reads (TransformedChunksDeserializer).
MAX_ENCODED_CHUNKS_BYTES = 10 * 1024 * 1024


# Kafka's Uuid text: 22 URL-safe base64 characters; the last holds 2 data bits and 4 zero bits.
_UUID = r"[A-Za-z0-9_-]{21}[AQgw]"
_KEY = re.compile(rf"(?P<topic>[^/]+)-(?P<topic_id>{_UUID})/(?P<partition>0|[1-9]\d*)/"
                  rf"(?P<start_offset>\d{{20}})-(?P<segment_id>{_UUID})\.(?P<suffix>log|indexes|rsm-manifest)")


# --- Object keys (ObjectKeyFactory) -------------------------------------------------------------

@dataclass(frozen=True)
class ObjectKey:
    """The parts of one object's key: ``<prefix><topic>-<topic_id>/<partition>/<start offset,
    20 digits>-<segment_id>.<suffix>``. ``topic_id`` and ``segment_id`` are Kafka's Uuid text."""

    prefix: str
    topic: str
    topic_id: str
    partition: int
    start_offset: int
    segment_id: str
    suffix: str

    def __str__(self) -> str:
        return object_key(self.prefix, self.topic, self.topic_id, self.partition, self.start_offset,
                          self.segment_id, self.suffix)

    def with_suffix(self, suffix: str) -> str:
        """The key of this segment's object with ``suffix`` (``log``, ``indexes``, ``rsm-manifest``)."""
        return object_key(self.prefix, self.topic, self.topic_id, self.partition, self.start_offset,
                          self.segment_id, suffix)


def object_key(prefix: str, topic: str, topic_id, partition: int, start_offset: int, segment_id,
               suffix: str) -> str:
    """The key the plugin gives a segment's object: the prefix as is (no separator added),
    then ``<topic>-<topicId>/<partition>/<20-digit start offset>-<segmentId>.<suffix>``.
    ``topic_id``/``segment_id``: Kafka's Uuid text or its 16 bytes. O(1).

    >>> object_key("prefix/", "topic", bytes(15) + b"\\x01", 7, 1234, bytes(16), "log")
    'prefix/topic-AAAAAAAAAAAAAAAAAAAAAQ/7/00000000000000001234-AAAAAAAAAAAAAAAAAAAAAA.log'
    """
    if suffix not in SUFFIXES:
        raise InvalidArgumentError(f"object suffix must be one of {', '.join(SUFFIXES)}, not {suffix!r}")
    if not isinstance(start_offset, int) or start_offset < 0:
        raise InvalidArgumentError(f"start offset must be a non-negative integer, not {start_offset!r}")
    if not isinstance(partition, int) or partition < 0:
        raise InvalidArgumentError(f"partition must be a non-negative integer, not {partition!r}")
    return (f"{prefix or ''}{topic}-{_uuid(topic_id, 'topic id')}/{partition}/"
            f"{offset_file_prefix(start_offset)}-{_uuid(segment_id, 'segment id')}.{suffix}")


def parse_object_key(key: str, prefix: str | None = None) -> ObjectKey:
    """The parts of a key :func:`object_key` makes. Without ``prefix``, the prefix is all
    before the topic's directory (the plugin joins prefix and topic with no separator, so a
    prefix not ending in ``/`` must be given). Raises :class:`InvalidRecordError` naming the
    key for any other key. O(len(key)).

    >>> key = parse_object_key("p/t-AAAAAAAAAAAAAAAAAAAAAQ/7/00000000000000001234-AAAAAAAAAAAAAAAAAAAAAA.log")
    >>> key.prefix, key.topic, key.partition, key.start_offset, key.suffix
    ('p/', 't', 7, 1234, 'log')
    """
    if not isinstance(key, str):
        raise InvalidArgumentError(f"an object key is a string, not {type(key).__name__}")
    if prefix is None:
        parts = key.rsplit("/", 3)
        if len(parts) < 3:
            raise _not_a_key(key, "it has fewer than three '/'-separated parts")
        prefix = key[: len(key) - len("/".join(parts[-3:]))]
    elif not key.startswith(prefix):
        raise _not_a_key(key, f"it does not start with the prefix {prefix!r}")
    m = _KEY.fullmatch(key, len(prefix))
    if m is None:
        raise _not_a_key(key, "it is not <topic>-<topicId>/<partition>/<20-digit offset>-<segmentId>."
                              "{log,indexes,rsm-manifest}")
    return ObjectKey(prefix, m["topic"], m["topic_id"], int(m["partition"]), int(m["start_offset"]),
                     m["segment_id"], m["suffix"])


def _not_a_key(key: str, why: str) -> InvalidRecordError:
    return InvalidRecordError(f"not a tiered-storage object key: {why}", path=key)


def _uuid(value, what: str) -> str:
    if isinstance(value, (bytes, bytearray, memoryview)) and len(value) == 16:
        return uuid_text(value)
    if isinstance(value, str) and re.fullmatch(_UUID, value):
        return value
    raise InvalidArgumentError(f"{what} must be Kafka's 22-character Uuid text or 16 bytes, not {value!r}")


# --- Chunk indexes (manifest/index/) ------------------------------------------------------------

@dataclass(frozen=True)
class Chunk:
    """One chunk: where its bytes are in the original file and in the transformed object."""

    id: int
    original_position: int
    original_size: int
    transformed_position: int
    transformed_size: int

    @property
    def transformed_end(self) -> int:
        return self.transformed_position + self.transformed_size


class ChunkIndex:
    """Maps chunks of the original file to chunks of the transformed object. Original chunks
    are ``original_chunk_size`` bytes, the last one holding the rest of ``original_file_size``;
    a subclass says each transformed chunk's size. As the plugin's AbstractChunkIndex, an
    index of an empty file lists one empty chunk."""

    original_chunk_size: int
    original_file_size: int

    def __init__(self, original_chunk_size: int, original_file_size: int, transformed_sizes: list[int]):
        self.original_chunk_size = original_chunk_size
        self.original_file_size = original_file_size
        self._transformed_sizes = transformed_sizes
        self._transformed_starts = [0, *accumulate(transformed_sizes)]

    @staticmethod
    def chunk_count_for(original_chunk_size: int, original_file_size: int) -> int:
        """Chunks covering a file of ``original_file_size`` bytes (a ceiling division)."""
        return -(-original_file_size // original_chunk_size)

    @property
    def chunk_count(self) -> int:
        return len(self._transformed_sizes)

    @property
    def transformed_file_size(self) -> int:
        """Size of the transformed object: the sum of the transformed chunks."""
        return self._transformed_starts[-1]

    def chunk(self, i: int) -> Chunk:
        """Chunk ``i`` (0-based). O(1)."""
        if not 0 <= i < self.chunk_count:
            raise InvalidArgumentError(f"chunk {i} is not in an index of {self.chunk_count} chunks")
        position = i * self.original_chunk_size
        size = min(self.original_chunk_size, self.original_file_size - position)
        return Chunk(i, position, size, self._transformed_starts[i], self._transformed_sizes[i])

    @property
    def chunks(self) -> list[Chunk]:
        """Every chunk in order; ``[Chunk(0, 0, 0, 0, 0)]`` for an empty file. O(chunks)."""
        if not self.chunk_count:
            return [Chunk(0, 0, 0, 0, 0)]
        return [self.chunk(i) for i in range(self.chunk_count)]

    def find_chunk(self, position: int) -> Chunk | None:
        """The chunk holding original byte ``position``, None past the end. O(1)."""
        if position < 0:
            raise InvalidArgumentError(f"a position in a file is non-negative, not {position}")
        if position >= self.original_file_size:
            return None
        return self.chunk(position // self.original_chunk_size)

    def chunks_for_range(self, position: int, size: int) -> list[Chunk]:
        """The chunks covering original bytes ``[position, position + size)`` up to the file's
        end; empty when that range is empty or starts past the end. O(chunks returned)."""
        end = min(position + size, self.original_file_size)
        first = self.find_chunk(position)
        if first is None or size <= 0:
            return []
        last = (end - 1) // self.original_chunk_size
        return [self.chunk(i) for i in range(first.id, last + 1)]

    def __eq__(self, other) -> bool:
        return (type(self) is type(other) and self.original_chunk_size == other.original_chunk_size
                and self.original_file_size == other.original_file_size
                and self._transformed_sizes == other._transformed_sizes)

    def __repr__(self) -> str:
        return (f"{type(self).__name__}(original_chunk_size={self.original_chunk_size}, "
                f"original_file_size={self.original_file_size}, chunks={self.chunk_count})")


class FixedSizeChunkIndex(ChunkIndex):
    """Transformed chunks of one size but the last (encryption only, or no transform):
    JSON ``{"type":"fixed","originalChunkSize","originalFileSize","transformedChunkSize",
    "finalTransformedChunkSize"}``.

    >>> FixedSizeChunkIndex(100, 250, 110, 30).chunks[2]
    Chunk(id=2, original_position=200, original_size=50, transformed_position=220, transformed_size=30)
    """

    def __init__(self, original_chunk_size: int, original_file_size: int, transformed_chunk_size: int,
                 final_transformed_chunk_size: int):
        _check_sizes(original_chunk_size, original_file_size, [transformed_chunk_size, final_transformed_chunk_size])
        count = self.chunk_count_for(original_chunk_size, original_file_size)
        sizes = [transformed_chunk_size] * (count - 1) + [final_transformed_chunk_size] if count else []
        super().__init__(original_chunk_size, original_file_size, sizes)
        self.transformed_chunk_size = transformed_chunk_size
        self.final_transformed_chunk_size = final_transformed_chunk_size

    def to_json(self) -> dict:
        return {"type": "fixed", "originalChunkSize": self.original_chunk_size,
                "originalFileSize": self.original_file_size, "transformedChunkSize": self.transformed_chunk_size,
                "finalTransformedChunkSize": self.final_transformed_chunk_size}

    def __eq__(self, other) -> bool:
        return super().__eq__(other) and self.to_json() == other.to_json()

    __hash__ = None


class VariableSizeChunkIndex(ChunkIndex):
    """Each transformed chunk's size listed (compression): JSON ``{"type":"variable",
    "originalChunkSize","originalFileSize","transformedChunks"}``, the list encoded by
    :func:`encode_chunk_sizes`.

    >>> VariableSizeChunkIndex(100, 250, [10, 20, 30]).chunks[1]
    Chunk(id=1, original_position=100, original_size=100, transformed_position=10, transformed_size=20)
    """

    def __init__(self, original_chunk_size: int, original_file_size: int, transformed_chunks: list[int]):
        transformed_chunks = list(transformed_chunks)
        _check_sizes(original_chunk_size, original_file_size, transformed_chunks)
        expected = self.chunk_count_for(original_chunk_size, original_file_size)
        if len(transformed_chunks) != expected:
            raise InvalidArgumentError(f"a file of {original_file_size} bytes in chunks of {original_chunk_size} "
                                       f"has {expected} chunks, not {len(transformed_chunks)}")
        super().__init__(original_chunk_size, original_file_size, transformed_chunks)

    @property
    def transformed_chunks(self) -> list[int]:
        return list(self._transformed_sizes)

    def to_json(self) -> dict:
        return {"type": "variable", "originalChunkSize": self.original_chunk_size,
                "originalFileSize": self.original_file_size,
                "transformedChunks": encode_chunk_sizes(self._transformed_sizes)}

    __hash__ = None


def _check_sizes(original_chunk_size, original_file_size, transformed) -> None:
    for name, value, low in (("original chunk size", original_chunk_size, 1),
                             ("original file size", original_file_size, 0),
                             *(("transformed chunk size", v, 0) for v in transformed)):
        if not isinstance(value, int) or isinstance(value, bool) or not low <= value <= INT32_MAX:
            raise InvalidArgumentError(f"{name} must be an integer in [{low}, {INT32_MAX}], not {value!r}")


def encode_chunk_sizes(sizes: list[int]) -> str:
    """The plugin's ``transformedChunks`` text: base64 of a zstd frame (with its content size)
    of ChunkSizesBinaryCodec's bytes: int32 count; for two values or more int32 base (the
    least of all but the last), int8 bytes per value, each but the last minus the base in that
    many big-endian bytes; then the last value as int32. O(len(sizes)).

    >>> encode_chunk_sizes([10, 20, 30])
    'KLUv/SAPeQAAAAAAAwAAAAoBAAoAAAAe'
    """
    out = bytearray(len(sizes).to_bytes(4, "big"))
    if len(sizes) >= 2:
        base = min(sizes[:-1])
        width = max(max(1, (v - base).bit_length() + 7 >> 3) for v in sizes[:-1])
        out += base.to_bytes(4, "big") + bytes([width])
        for v in sizes[:-1]:
            out += (v - base).to_bytes(width, "big")
    if sizes:
        out += sizes[-1].to_bytes(4, "big")
    frame = zstandard.ZstdCompressor(level=3, write_content_size=True).compress(bytes(out))
    return base64.b64encode(frame).decode("ascii")


def decode_chunk_sizes(text, *, path: str | None = None) -> list[int]:
    """The sizes :func:`encode_chunk_sizes` encoded; :class:`CorruptFileError` naming ``path``
    for text that is not such an encoding. O(len(text))."""
    try:
        frame = base64.b64decode(text, validate=True)
        content_size = zstandard.frame_content_size(frame)
        if not 0 <= content_size <= MAX_ENCODED_CHUNKS_BYTES:
            raise ValueError(f"its zstd frame declares {content_size} bytes")
        raw = zstandard.ZstdDecompressor().decompress(frame)
        return _decode_chunk_size_bytes(raw)
    except (ValueError, TypeError, zstandard.ZstdError, IndexError) as e:
        raise CorruptFileError(f"manifest's transformedChunks is not an encoded chunk size list: {e}",
                               path=path) from None


def _decode_chunk_size_bytes(raw: bytes) -> list[int]:
    count = int.from_bytes(raw[:4], "big", signed=True)
    if len(raw) < 4 or count < 0:
        raise ValueError("bad count")
    if count <= 1:
        expected = 4 + 4 * count
        values = [int.from_bytes(raw[4:8], "big", signed=True)] if count else []
    else:
        base, width = int.from_bytes(raw[4:8], "big", signed=True), raw[8]
        if not 1 <= width <= 4:
            raise ValueError(f"{width} bytes per value")
        expected = 9 + (count - 1) * width + 4
        values = [base + int.from_bytes(raw[9 + i * width: 9 + (i + 1) * width], "big") for i in range(count - 1)]
        values.append(int.from_bytes(raw[expected - 4: expected], "big", signed=True))
    if len(raw) != expected:
        raise ValueError(f"{len(raw)} bytes where {count} values take {expected}")
    if any(v < 0 or v > INT32_MAX for v in values):
        raise ValueError("a size out of range")
    return values


# --- The manifest (manifest/SegmentManifestV1 and its parts) ------------------------------------

@dataclass(frozen=True)
class SegmentIndex:
    """Where one index lies in ``.indexes`` (transformed bytes)."""

    position: int
    size: int


@dataclass(frozen=True)
class SegmentIndexes:
    """The five indexes' places in ``.indexes``; ``transaction`` is None for a segment
    uploaded without a transaction index."""

    offset: SegmentIndex
    timestamp: SegmentIndex
    producer_snapshot: SegmentIndex
    leader_epoch: SegmentIndex
    transaction: SegmentIndex | None = None

    def get(self, name: str) -> SegmentIndex | None:
        """The place of index ``name`` (``offset``, ``timestamp``, ``producer_snapshot``,
        ``leader_epoch``, ``transaction``)."""
        if name not in _INDEX_JSON:
            raise InvalidArgumentError(f"index name must be one of {', '.join(_INDEX_JSON)}, not {name!r}")
        return getattr(self, name)


_INDEX_JSON = dict(INDEX_NAMES)


@dataclass(frozen=True, repr=False)
class SegmentEncryption:
    """An encrypted segment's data key, wrapped (``<key pair id>:<base64 of the RSA-OAEP
    encrypted AES key>``), and its AES-GCM additional authenticated data."""

    data_key: str
    aad: bytes

    @property
    def key_id(self) -> str:
        return self.data_key.partition(":")[0]

    def __repr__(self) -> str:
        return f"SegmentEncryption(key_id={self.key_id!r})"


@dataclass(frozen=True)
class SegmentManifest:
    """A ``.rsm-manifest`` (SegmentManifestV1). ``remote_log_segment_metadata`` is the JSON
    tree the plugin writes for information (the plugin never reads it back), None when absent.

    Parse with :meth:`parse`, write with :meth:`to_bytes`: compact JSON with the plugin's
    field names and order."""

    chunk_index: ChunkIndex
    segment_indexes: SegmentIndexes
    compression: bool
    encryption: SegmentEncryption | None = None
    remote_log_segment_metadata: dict | None = field(default=None, compare=False)

    @property
    def transformed(self) -> bool:
        """Whether the ``.log`` object differs from the segment's bytes."""
        return self.compression or self.encryption is not None

    @classmethod
    def parse(cls, data: bytes, *, path: str | None = None) -> SegmentManifest:
        """The manifest in ``data``; :class:`CorruptFileError` naming ``path`` (the object)
        for bytes that are not a version-1 manifest. O(len(data))."""
        try:
            tree = json.loads(data)
        except (ValueError, RecursionError) as e:  # UnicodeDecodeError is a ValueError
            raise CorruptFileError(f"segment manifest is not JSON: {e}", path=path) from None
        reader = _JsonReader(path)
        obj = reader.obj(tree, "manifest")
        if obj.get("version") not in ("1", 1):
            raise CorruptFileError(f"segment manifest version {obj.get('version')!r} is not 1", path=path)
        encryption = obj.get("encryption")
        return cls(chunk_index=reader.chunk_index(reader.obj(reader.required(obj, "chunkIndex", "manifest"),
                                                             "chunkIndex")),
                   segment_indexes=reader.segment_indexes(obj),
                   compression=reader.boolean(obj, "compression", "manifest"),
                   encryption=None if encryption is None else reader.encryption(encryption),
                   remote_log_segment_metadata=obj.get("remoteLogSegmentMetadata"))

    def to_json(self) -> dict:
        """The manifest's JSON tree, fields in the plugin's order."""
        ix = self.segment_indexes
        tree = {"version": "1", "chunkIndex": self.chunk_index.to_json(),
                "segmentIndexes": {json_name: _index_json(getattr(ix, name)) for name, json_name in INDEX_NAMES},
                "compression": self.compression}
        if self.encryption is not None:
            tree["encryption"] = {"dataKey": self.encryption.data_key,
                                  "aad": base64.b64encode(self.encryption.aad).decode("ascii")}
        tree["remoteLogSegmentMetadata"] = self.remote_log_segment_metadata
        return tree

    def to_bytes(self) -> bytes:
        """The manifest as the plugin writes it: compact JSON, UTF-8."""
        return json.dumps(self.to_json(), separators=(",", ":"), ensure_ascii=False).encode("utf-8")


def _index_json(index: SegmentIndex | None):
    return None if index is None else {"position": index.position, "size": index.size}


class _JsonReader:
    """Field access on a parsed manifest that turns every missing or mistyped field into a
    :class:`CorruptFileError` naming the object and the field."""

    def __init__(self, path):
        self.path = path

    def fail(self, what: str) -> CorruptFileError:
        return CorruptFileError(f"segment manifest: {what}", path=self.path)

    def obj(self, value, where: str) -> dict:
        if not isinstance(value, dict):
            raise self.fail(f"{where} is not a JSON object")
        return value

    def required(self, obj: dict, name: str, where: str):
        if obj.get(name) is None:
            raise self.fail(f"{where} has no {name!r}")
        return obj[name]

    def integer(self, obj: dict, name: str, where: str, low: int = 0) -> int:
        value = self.required(obj, name, where)
        if not isinstance(value, int) or isinstance(value, bool) or not low <= value <= INT32_MAX:
            raise self.fail(f"{where}.{name} is {value!r}, not an integer in [{low}, {INT32_MAX}]")
        return value

    def boolean(self, obj: dict, name: str, where: str) -> bool:
        value = self.required(obj, name, where)
        if not isinstance(value, bool):
            raise self.fail(f"{where}.{name} is {value!r}, not true or false")
        return value

    def chunk_index(self, obj: dict) -> ChunkIndex:
        kind = obj.get("type")
        chunk_size = self.integer(obj, "originalChunkSize", "chunkIndex", low=1)
        file_size = self.integer(obj, "originalFileSize", "chunkIndex")
        try:
            if kind == "fixed":
                return FixedSizeChunkIndex(chunk_size, file_size,
                                           self.integer(obj, "transformedChunkSize", "chunkIndex"),
                                           self.integer(obj, "finalTransformedChunkSize", "chunkIndex"))
            if kind == "variable":
                text = self.required(obj, "transformedChunks", "chunkIndex")
                if not isinstance(text, str):
                    raise self.fail(f"chunkIndex.transformedChunks is {text!r}, not a string")
                return VariableSizeChunkIndex(chunk_size, file_size, decode_chunk_sizes(text, path=self.path))
        except InvalidArgumentError as e:
            raise self.fail(f"chunkIndex: {e}") from None
        raise self.fail(f"chunkIndex type {kind!r} is neither 'fixed' nor 'variable'")

    def segment_indexes(self, manifest: dict) -> SegmentIndexes:
        obj = self.obj(self.required(manifest, "segmentIndexes", "manifest"), "segmentIndexes")
        places = {}
        for name, json_name in INDEX_NAMES:
            value = obj.get(json_name)
            if value is None and name != "transaction":
                raise self.fail(f"segmentIndexes has no {json_name!r}")
            if value is not None:
                where = f"segmentIndexes.{json_name}"
                value = self.obj(value, where)
                places[name] = SegmentIndex(self.integer(value, "position", where), self.integer(value, "size", where))
        return SegmentIndexes(**places)

    def encryption(self, value) -> SegmentEncryption:
        obj = self.obj(value, "encryption")
        data_key = self.required(obj, "dataKey", "encryption")
        aad = self.required(obj, "aad", "encryption")
        if not isinstance(data_key, str) or data_key.count(":") != 1 or not data_key.partition(":")[0].strip():
            raise self.fail("encryption.dataKey is not '<key pair id>:<base64>'")
        try:
            if not base64.b64decode(data_key.partition(":")[2], validate=True):
                raise ValueError("empty")
            aad = base64.b64decode(aad, validate=True)
        except (ValueError, TypeError):
            raise self.fail("encryption.dataKey or encryption.aad is not base64") from None
        return SegmentEncryption(data_key, aad)


def remote_log_segment_metadata_json(topic: str, topic_id, partition: int, segment_id, *, start_offset: int,
                                     end_offset: int, max_timestamp_ms: int, broker_id: int,
                                     event_timestamp_ms: int, segment_leader_epochs: dict[int, int]) -> dict:
    """The manifest's ``remoteLogSegmentMetadata`` tree, as the plugin's KafkaTypeSerdeModule
    writes Kafka's RemoteLogSegmentMetadata (leader epochs ascending). O(epochs)."""
    return {"remoteLogSegmentId": {"topicIdPartition": {"topicId": _uuid(topic_id, "topic id"),
                                                        "topicPartition": {"topic": topic, "partition": partition}},
                                   "id": _uuid(segment_id, "segment id")},
            "startOffset": start_offset, "endOffset": end_offset, "maxTimestampMs": max_timestamp_ms,
            "brokerId": broker_id, "eventTimestampMs": event_timestamp_ms,
            "segmentLeaderEpochs": {str(k): segment_leader_epochs[k] for k in sorted(segment_leader_epochs)}}


def read_manifest(store, key: str) -> SegmentManifest:
    """The manifest at ``key``: one GET. A missing object raises the store's
    ``RemoteObjectNotFoundError``; bad bytes :class:`CorruptFileError` naming the object."""
    return SegmentManifest.parse(store.read(key), path=store.url(key))


# --- Encryption keys (security/) ----------------------------------------------------------------

@dataclass(frozen=True, repr=False)
class KeyPair:
    """One RSA key pair of the plugin's key ring (``encryption.key.pairs``): its id, and its
    public (to upload) and private (to read) keys as PEM bytes. ``repr`` shows only the id."""

    key_id: str
    public_key_pem: bytes | None = None
    private_key_pem: bytes | None = None

    def __post_init__(self):
        if not isinstance(self.key_id, str) or not self.key_id.strip() or ":" in self.key_id:
            raise InvalidArgumentError(f"a key pair id is a non-blank string without ':', not {self.key_id!r}")

    def __repr__(self) -> str:
        return f"KeyPair({self.key_id!r})"

    @classmethod
    def from_files(cls, key_id: str, *, public_key_file=None, private_key_file=None) -> KeyPair:
        """A key pair from PEM files (the plugin's ``public.key.file``/``private.key.file``)."""
        def read(path):
            if path is None:
                return None
            try:
                with open(path, "rb") as f:
                    return f.read()
            except OSError as e:
                raise InvalidArgumentError(f"cannot read key file {path}: {e.strerror}") from None
        return cls(key_id, read(public_key_file), read(private_key_file))

    @classmethod
    def generate(cls, key_id: str, *, bits: int = 2048) -> KeyPair:
        """A new RSA key pair (``bits`` >= 2048: the OAEP-SHA3-512 padding of a 32-byte key
        takes 162 bytes). Costs one RSA key generation (tens of milliseconds)."""
        rsa, serialization = _rsa_modules()
        key = rsa.generate_private_key(public_exponent=65537, key_size=bits)
        return cls(key_id,
                   key.public_key().public_bytes(serialization.Encoding.PEM,
                                                 serialization.PublicFormat.SubjectPublicKeyInfo),
                   key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                     serialization.NoEncryption()))

    def wrap(self, data_key: bytes) -> str:
        """``<key_id>:<base64>`` of ``data_key`` encrypted with the public key (RSA-OAEP)."""
        _, serialization = _rsa_modules()
        if self.public_key_pem is not None:
            public = serialization.load_pem_public_key(self.public_key_pem)
        elif self.private_key_pem is not None:
            public = self._private().public_key()
        else:
            raise InvalidArgumentError(f"key pair {self.key_id!r} has no public key to encrypt with")
        n, e = public.public_numbers().n, public.public_numbers().e
        k = (n.bit_length() + 7) // 8
        m = int.from_bytes(_oaep_encode(data_key, k), "big")
        return f"{self.key_id}:{base64.b64encode(pow(m, e, n).to_bytes(k, 'big')).decode('ascii')}"

    def unwrap(self, data_key: str) -> bytes:
        """The AES key inside a wrapped ``data_key``; :class:`InvalidArgumentError` when
        this key pair cannot open it. Costs one RSA private-key operation (CRT)."""
        key_id, _, b64 = data_key.partition(":")
        if key_id != self.key_id:
            raise InvalidArgumentError(f"data key was wrapped with key pair {key_id!r}, not {self.key_id!r}")
        if self.private_key_pem is None:
            raise InvalidArgumentError(f"key pair {self.key_id!r} has no private key to decrypt with")
        n, p, q, dp, dq, q_inv = _private_numbers(self.key_id, self.private_key_pem)
        k = (n.bit_length() + 7) // 8
        c = int.from_bytes(base64.b64decode(b64), "big")
        if c >= n:
            raise InvalidArgumentError(f"key pair {key_id!r} does not open this data key (not its modulus)")
        m1, m2 = pow(c, dp, p), pow(c, dq, q)
        m = m2 + q * (q_inv * (m1 - m2) % p)
        try:
            return _oaep_decode(m.to_bytes(k, "big"))
        except ValueError:
            raise InvalidArgumentError(f"key pair {key_id!r} does not open this data key") from None

    def _private(self):
        _, serialization = _rsa_modules()
        if self.private_key_pem is None:
            raise InvalidArgumentError(f"key pair {self.key_id!r} has no private key to decrypt with")
        try:
            return serialization.load_pem_private_key(self.private_key_pem, password=None)
        except (ValueError, TypeError) as e:
            raise InvalidArgumentError(f"key pair {self.key_id!r}: its private key is not an RSA PEM key ({e})") \
                from None


@functools.lru_cache(maxsize=16)
def _private_numbers(key_id: str, private_key_pem: bytes) -> tuple[int, ...]:
    """n, p, q, dp, dq, qInv of a private key: loading (and checking) a PEM key costs far more
    than using it, and a reader opens many segments wrapped with the same key."""
    numbers = KeyPair(key_id, private_key_pem=private_key_pem)._private().private_numbers()
    return numbers.public_numbers.n, numbers.p, numbers.q, numbers.dmp1, numbers.dmq1, numbers.iqmp


def _rsa_modules():
    try:
        from cryptography.hazmat.primitives import serialization
        from cryptography.hazmat.primitives.asymmetric import rsa
    except ImportError:
        raise MissingDependencyError("encrypted tiered segments need the 'cryptography' package "
                                     "(pip install cryptography)") from None
    return rsa, serialization


def _aesgcm(key: bytes):
    try:
        from cryptography.hazmat.primitives.ciphers.aead import AESGCM
    except ImportError:
        raise MissingDependencyError("encrypted tiered segments need the 'cryptography' package "
                                     "(pip install cryptography)") from None
    return AESGCM(key)


# RSA-OAEP (RFC 8017 section 7.1) with SHA3-512 as both the label hash and MGF1's hash: the
# plugin's "RSA/NONE/OAEPWithSHA3-512AndMGF1Padding" under BouncyCastle, which uses the named
# digest for MGF1 too. Written out here because the `cryptography` package refuses SHA3 in OAEP.
_OAEP_HASH_BYTES = 64


def _mgf1(seed: bytes, length: int) -> bytes:
    out = b"".join(hashlib.sha3_512(seed + i.to_bytes(4, "big")).digest()
                   for i in range(-(-length // _OAEP_HASH_BYTES)))
    return out[:length]


def _xor(a: bytes, b: bytes) -> bytes:
    return (int.from_bytes(a, "big") ^ int.from_bytes(b, "big")).to_bytes(len(a), "big")


def _oaep_encode(message: bytes, k: int) -> bytes:
    h = _OAEP_HASH_BYTES
    if len(message) > k - 2 * h - 2:
        raise InvalidArgumentError(f"an RSA key of {k * 8} bits is too small to wrap {len(message)} bytes")
    db = hashlib.sha3_512(b"").digest() + bytes(k - len(message) - 2 * h - 2) + b"\x01" + message
    seed = os.urandom(h)
    masked_db = _xor(db, _mgf1(seed, k - h - 1))
    return b"\x00" + _xor(seed, _mgf1(masked_db, h)) + masked_db


def _oaep_decode(encoded: bytes) -> bytes:
    h = _OAEP_HASH_BYTES
    masked_seed, masked_db = encoded[1: 1 + h], encoded[1 + h:]
    db = _xor(masked_db, _mgf1(_xor(masked_seed, _mgf1(masked_db, h)), len(masked_db)))
    rest = db[h:].lstrip(b"\x00")
    if encoded[0] != 0 or db[:h] != hashlib.sha3_512(b"").digest() or not rest.startswith(b"\x01"):
        raise ValueError("OAEP decoding failed")
    return rest[1:]


def _key_ring(encryption_key) -> dict[str, KeyPair]:
    if encryption_key is None:
        return {}
    pairs = [encryption_key] if isinstance(encryption_key, KeyPair) else list(encryption_key)
    if not all(isinstance(p, KeyPair) for p in pairs):
        raise InvalidArgumentError("encryption_key must be a KeyPair or a list of KeyPairs")
    return {p.key_id: p for p in pairs}


def _data_key(manifest: SegmentManifest, encryption_key, url: str) -> bytes:
    """The segment's AES key, unwrapped with the caller's key pair of the id the manifest names."""
    wanted = manifest.encryption.key_id
    pair = _key_ring(encryption_key).get(wanted)
    if pair is None:
        raise InvalidArgumentError(
            f"segment {url} is encrypted (with RSA key pair {wanted!r}): pass its private key as "
            f"encryption_key=KeyPair.from_files({wanted!r}, private_key_file=...)")
    key = pair.unwrap(manifest.encryption.data_key)
    if len(key) not in (16, 24, 32):
        raise CorruptFileError(f"segment's data key is {len(key)} bytes, not an AES key", path=url)
    return key


# --- Reading --------------------------------------------------------------------------------

class ChunkedSegmentBytes:
    """A segment's original bytes read from its ``.log`` object through the manifest's chunk
    index (a ``SegmentBytes``). ``read`` costs one ranged GET of the transformed chunks covering
    the range (none when the range lies in the last chunk read, which is kept), and decompresses
    and decrypts only those chunks. An encrypted segment needs ``encryption_key``: the
    :class:`KeyPair` (or a list, the key ring) holding the private key the manifest names."""

    def __init__(self, store, key: str, manifest: SegmentManifest, *, encryption_key=None):
        self._store = store
        self._key = key
        self._manifest = manifest
        self._index = manifest.chunk_index
        self._url = store.url(key)
        self._data_key = None if manifest.encryption is None else _data_key(manifest, encryption_key, self._url)
        self._last: tuple[int, bytes] | None = None  # (chunk id, original bytes) of the last chunk read

    @property
    def size(self) -> int:
        """The original segment's size in bytes."""
        return self._index.original_file_size

    @property
    def url(self) -> str:
        """The ``.log`` object's URL (no credentials)."""
        return self._url

    def read(self, position: int, size: int) -> bytes:
        """Original bytes ``[position, position + size)``, shorter at the end of the segment
        (empty past it). One ranged GET at most; O(bytes of the covering chunks)."""
        if position < 0 or size < 0:
            raise InvalidArgumentError(f"a read needs a non-negative position and size, not {position}, {size}")
        end = min(position + size, self.size)
        if position >= end:
            return b""
        if not self._manifest.transformed:
            return self._store.read_range(self._key, position, end)
        chunks = self._index.chunks_for_range(position, end - position)
        pieces = []
        if self._last is not None and self._last[0] == chunks[0].id:
            pieces.append(self._last[1])
            chunks_to_fetch = chunks[1:]
        else:
            chunks_to_fetch = chunks
        if chunks_to_fetch:
            base = chunks_to_fetch[0].transformed_position
            data = memoryview(self._store.read_range(self._key, base, chunks_to_fetch[-1].transformed_end))
            for c in chunks_to_fetch:
                pieces.append(self._detransform(c, data[c.transformed_position - base: c.transformed_end - base]))
            self._last = (chunks_to_fetch[-1].id, pieces[-1])
        start = position - chunks[0].original_position
        joined = pieces[0] if len(pieces) == 1 else b"".join(pieces)
        return joined[start: start + end - position]

    def _detransform(self, chunk: Chunk, data: bytes) -> bytes:
        if len(data) != chunk.transformed_size:
            raise CorruptFileError(f"object ends inside chunk {chunk.id}: {len(data)} of its {chunk.transformed_size} "
                                   f"bytes", path=self._url, position=chunk.transformed_position)
        if self._data_key is not None:
            data = _decrypt(self._data_key, self._manifest.encryption.aad, data, url=self._url,
                            position=chunk.transformed_position, what=f"chunk {chunk.id}")
        if self._manifest.compression:
            try:
                declared = zstandard.frame_content_size(data)
                if declared > chunk.original_size:  # -1 when the frame does not say
                    raise zstandard.ZstdError(f"its frame declares {declared} bytes")
                data = zstandard.ZstdDecompressor().decompress(data, max_output_size=chunk.original_size)
            except zstandard.ZstdError as e:
                raise CorruptFileError(f"chunk {chunk.id} is not a zstd frame: {e}", path=self._url,
                                       position=chunk.transformed_position) from None
        if len(data) != chunk.original_size:
            raise CorruptFileError(f"chunk {chunk.id} holds {len(data)} bytes, the index says {chunk.original_size}",
                                   path=self._url, position=chunk.transformed_position)
        return data

    def __repr__(self) -> str:
        return f"ChunkedSegmentBytes({self._url!r}, size={self.size})"


def _decrypt(key: bytes, aad: bytes, data: bytes, *, url: str, position: int, what: str) -> bytes:
    """AES-GCM decryption of one transformed chunk: IV, then ciphertext and tag."""
    from cryptography.exceptions import InvalidTag

    if len(data) < IV_BYTES + GCM_TAG_BYTES:
        raise CorruptFileError(f"encrypted {what} is shorter than an IV and a tag", path=url, position=position)
    try:
        return _aesgcm(key).decrypt(data[:IV_BYTES], data[IV_BYTES:], aad)
    except InvalidTag:
        raise CorruptFileError(f"{what} fails its AES-GCM authentication (altered, or another segment's)",
                               path=url, position=position) from None


def read_index(store, key: str, manifest: SegmentManifest, name: str, *, encryption_key=None) -> bytes:
    """Index ``name`` (``offset``, ``timestamp``, ``producer_snapshot``, ``leader_epoch``,
    ``transaction``) of the segment whose ``.indexes`` object is ``key``: one ranged GET (none
    for an empty index). A transaction index the segment was uploaded without reads as empty."""
    place = manifest.segment_indexes.get(name)
    if place is None or place.size == 0:
        return b""
    data_key = _index_data_key(store, key, manifest, encryption_key)
    data = store.read_range(key, place.position, place.position + place.size)
    return _index_bytes(store.url(key), manifest, name, data, data_key)


def read_indexes(store, key: str, manifest: SegmentManifest, *, encryption_key=None) -> dict[str, bytes]:
    """Every index of the segment whose ``.indexes`` object is ``key``, by name (the
    transaction index only when uploaded): one GET of the whole object."""
    places = {name: manifest.segment_indexes.get(name) for name, _ in INDEX_NAMES}
    places = {name: place for name, place in places.items() if place is not None}
    if not any(place.size for place in places.values()):
        return {name: b"" for name in places}
    data_key = _index_data_key(store, key, manifest, encryption_key)
    data = store.read(key)
    return {name: _index_bytes(store.url(key), manifest, name, data[p.position: p.position + p.size], data_key)
            if p.size else b"" for name, p in places.items()}


def _index_data_key(store, key: str, manifest: SegmentManifest, encryption_key) -> bytes | None:
    return None if manifest.encryption is None else _data_key(manifest, encryption_key, store.url(key))


def _index_bytes(url: str, manifest: SegmentManifest, name: str, data: bytes, data_key: bytes | None) -> bytes:
    place = manifest.segment_indexes.get(name)
    if len(data) != place.size:
        raise CorruptFileError(f"object ends inside the {name} index ({len(data)} of {place.size} bytes)",
                               path=url, position=place.position)
    if data_key is None:
        return data
    return _decrypt(data_key, manifest.encryption.aad, data, url=url, position=place.position, what=f"{name} index")


# --- Writing (KafkaRemoteStorageManager.copyLogSegmentData) -------------------------------------

def upload_segment(store, prefix: str, topic: str, topic_id, partition: int, segment_id, log_path,
                   indexes: dict[str, bytes], *, start_offset: int | None = None, chunk_size: int = DEFAULT_CHUNK_SIZE,
                   compression: bool = False, compression_heuristic: bool = False, encryption_key=None,
                   remote_log_segment_metadata: dict | None = None) -> SegmentManifest:
    """Copy one closed segment to ``store`` as the plugin does: the ``.log`` (chunked and
    transformed as asked), the ``.indexes`` blob, then the manifest, last. Returns the manifest.

    ``indexes`` maps ``offset``, ``timestamp``, ``producer_snapshot``, ``leader_epoch`` (all
    required, possibly empty) and ``transaction`` (optional) to their bytes. ``start_offset``
    defaults to the base offset in ``log_path``'s name. ``compression_heuristic`` (the
    plugin's ``compression.heuristic.enabled``) compresses only a segment whose first batch is
    valid and not compressed. ``encryption_key``: the active :class:`KeyPair`, whose public key wraps a
    new AES-256 data key. Defaults write the ``.log`` object byte for byte as the segment file.

    Cost: one read of the segment file, three PUTs; memory O(chunk_size) (transformed chunks go
    through a temporary file). Durability: an object is visible once its PUT returns; a copy
    stopped before the manifest's PUT leaves objects no reader treats as a live segment.
    """
    log_path = os.fspath(log_path)
    if start_offset is None:
        parsed = parse_segment_file(os.path.basename(log_path))
        if parsed is None or parsed[1] != ".log" or parsed[2]:
            raise InvalidArgumentError(f"start_offset not given and {log_path} is not named <20-digit offset>.log")
        start_offset = parsed[0]
    if not isinstance(chunk_size, int) or not 0 < chunk_size <= MAX_CHUNK_SIZE:
        raise InvalidArgumentError(f"chunk_size must be in [1, {MAX_CHUNK_SIZE}], not {chunk_size!r}")
    key = ObjectKey(prefix or "", topic, _uuid(topic_id, "topic id"), partition, start_offset,
                    _uuid(segment_id, "segment id"), LOG)
    str(key)  # validates the parts before anything is written
    blobs = _index_blobs(indexes)
    pair = encryption_key
    if pair is not None and not isinstance(pair, KeyPair):
        raise InvalidArgumentError(f"encryption_key must be a KeyPair, not {type(pair).__name__}")
    data_key = aad = None
    if pair is not None:
        data_key, aad = os.urandom(DATA_KEY_BYTES), os.urandom(AAD_BYTES)
    try:
        file_size = os.path.getsize(log_path)
        if file_size > INT32_MAX:
            raise InvalidArgumentError(f"{log_path} is {file_size} bytes, more than a segment can hold")
        if compression and compression_heuristic:
            compression = _heuristic_wants_compression(log_path)
        compression = compression and file_size > 0
        chunk_index = _upload_log(store, key.with_suffix(LOG), log_path, file_size, chunk_size, compression,
                                  data_key, aad)
    except PylogError:
        raise  # the store's StorageError is an OSError too
    except OSError as e:
        raise InvalidArgumentError(f"cannot read segment file {log_path}: {e.strerror or e}") from None
    places, blob = {}, bytearray()
    for name, data in blobs:
        if data_key is not None and data:
            data = _encrypt(data_key, aad, data)
        places[name] = SegmentIndex(len(blob), len(data))
        blob += data
    store.put(key.with_suffix(INDEXES), bytes(blob))
    manifest = SegmentManifest(chunk_index, SegmentIndexes(**places), compression,
                               None if pair is None else SegmentEncryption(pair.wrap(data_key), aad),
                               remote_log_segment_metadata)
    store.put(key.with_suffix(MANIFEST), manifest.to_bytes())
    return manifest


def _index_blobs(indexes: dict[str, bytes]) -> list[tuple[str, bytes]]:
    names = [name for name, _ in INDEX_NAMES]
    unknown = set(indexes) - set(names)
    if unknown:
        raise InvalidArgumentError(f"unknown index names {sorted(unknown)}: expected {', '.join(names)}")
    missing = [n for n in names[:4] if n not in indexes]
    if missing:
        raise InvalidArgumentError(f"indexes {', '.join(missing)} are required (they may be empty)")
    return [(n, bytes(indexes[n])) for n in names if n in indexes]


def _heuristic_wants_compression(log_path: str) -> bool:
    """The plugin's compression heuristic: compress only when the first batch is valid and
    not compressed. A segment whose first batch cannot be read (empty, torn, a bad CRC) is
    uploaded uncompressed, as the plugin does."""
    with open(log_path, "rb") as f:
        head = f.read(LOG_OVERHEAD_BYTES)
        if len(head) < LOG_OVERHEAD_BYTES or LOG_OVERHEAD.unpack(head)[1] <= 0:
            return False
        data = head + f.read(LOG_OVERHEAD.unpack(head)[1])
    try:
        batch = next(iter(decode_batches(data)), None)
        return batch is not None and batch.is_valid() and batch.compression_id == 0
    except PylogError:
        return False


def _upload_log(store, key: str, log_path: str, file_size: int, chunk_size: int, compression: bool,
                data_key: bytes | None, aad: bytes | None) -> ChunkIndex:
    if not compression and data_key is None:
        store.put_file(key, log_path)
        last = file_size - (ChunkIndex.chunk_count_for(chunk_size, file_size) - 1) * chunk_size if file_size else 0
        return FixedSizeChunkIndex(chunk_size, file_size, chunk_size, last)
    sizes = []
    compressor = zstandard.ZstdCompressor(level=3, write_content_size=True) if compression else None
    with open(log_path, "rb") as src, tempfile.NamedTemporaryFile(prefix="pylog-tiered-", suffix=".log") as out:
        for _ in range(ChunkIndex.chunk_count_for(chunk_size, file_size)):
            chunk = src.read(chunk_size)
            if compressor is not None:
                chunk = compressor.compress(chunk)
            if data_key is not None:
                chunk = _encrypt(data_key, aad, chunk)
            out.write(chunk)
            sizes.append(len(chunk))
        out.flush()
        store.put_file(key, out.name)
    if compression:
        return VariableSizeChunkIndex(chunk_size, file_size, sizes)
    overhead = IV_BYTES + GCM_TAG_BYTES
    last = sizes[-1] if sizes else 0
    return FixedSizeChunkIndex(chunk_size, file_size, chunk_size + overhead, last)


def _encrypt(key: bytes, aad: bytes, data: bytes) -> bytes:
    iv = os.urandom(IV_BYTES)
    return iv + _aesgcm(key).encrypt(iv, data, aad)
