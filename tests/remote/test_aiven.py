"""Aiven's tiered-storage layout (pylog/remote/aiven.py): object keys, the manifest, chunk
indexes, and segments written and read back through the chunk index.

The plugin's own examples are quoted as data from its repository
(Aiven-Open/tiered-storage-for-apache-kafka), each with the file it comes from.
"""

from __future__ import annotations

import base64
import json
import os
import random
import shutil
import struct
import subprocess

import pytest
import zstandard

from pylog import encode_batch
from pylog.coordinator.schema import uuid_text
from pylog.errors import CorruptFileError, InvalidArgumentError, InvalidRecordError, StorageError
from pylog.remote import aiven
from pylog.remote.aiven import (Chunk, ChunkedSegmentBytes, FixedSizeChunkIndex, KeyPair, SegmentManifest,
                                VariableSizeChunkIndex, object_key, parse_object_key, read_index, read_indexes,
                                read_manifest, upload_segment)
from pylog.remote.store import ObjectStore
from tests.conftest import needs_samples, sample_logs

TOPIC_ID = "AAAAAAAAAAAAAAAAAAAAAQ"  # Kafka's Uuid.METADATA_TOPIC_ID, as the plugin's tests use it
SEGMENT_ID = "AAAAAAAAAAAAAAAAAAAAAA"  # Kafka's Uuid.ZERO_UUID
INDEXES = {"offset": b"\x00\x00\x00\x01\x00\x00\x00\x00" * 3, "timestamp": b"T" * 24,
           "producer_snapshot": b"snapshot bytes", "leader_epoch": b"leader epoch index"}


# --- Object keys ----------------------------------------------------------------------------

# (prefix, topic, topic id, partition, start offset, segment id, suffix) -> the plugin's key
PLUGIN_KEYS = [
    # core/src/test/java/io/aiven/kafka/tieredstorage/ObjectKeyFactoryTest.java
    (("prefix/", "topic", TOPIC_ID, 7, 1234, SEGMENT_ID, "log"),
     "prefix/topic-AAAAAAAAAAAAAAAAAAAAAQ/7/00000000000000001234-AAAAAAAAAAAAAAAAAAAAAA.log"),
    (("prefix/", "topic", TOPIC_ID, 7, 1234, SEGMENT_ID, "indexes"),
     "prefix/topic-AAAAAAAAAAAAAAAAAAAAAQ/7/00000000000000001234-AAAAAAAAAAAAAAAAAAAAAA.indexes"),
    (("prefix/", "topic", TOPIC_ID, 7, 1234, SEGMENT_ID, "rsm-manifest"),
     "prefix/topic-AAAAAAAAAAAAAAAAAAAAAQ/7/00000000000000001234-AAAAAAAAAAAAAAAAAAAAAA.rsm-manifest"),
    # core/src/main/java/io/aiven/kafka/tieredstorage/ObjectKeyFactory.java (its javadoc example)
    (("someprefix/", "topic", "MWJ6FHTfRYy67jzwZdeqSQ", 7, 1234, "tqimKeZwStOEOwRzT3L5oQ", "log"),
     "someprefix/topic-MWJ6FHTfRYy67jzwZdeqSQ/7/00000000000000001234-tqimKeZwStOEOwRzT3L5oQ.log"),
    # core/src/integration-test/java/io/aiven/kafka/tieredstorage/BaseRemoteStorageManagerTest.java
    (("test/", "topic", TOPIC_ID, 7, 23, SEGMENT_ID, "rsm-manifest"),
     "test/topic-AAAAAAAAAAAAAAAAAAAAAQ/7/00000000000000000023-AAAAAAAAAAAAAAAAAAAAAA.rsm-manifest"),
]


@pytest.mark.parametrize("parts, key", PLUGIN_KEYS, ids=[k for _, k in PLUGIN_KEYS])
def test_object_key_is_the_plugins_key_byte_for_byte(parts, key):
    assert object_key(*parts) == key


@pytest.mark.parametrize("parts, key", PLUGIN_KEYS, ids=[k for _, k in PLUGIN_KEYS])
def test_parsing_the_plugins_key_gives_back_its_parts(parts, key):
    parsed = parse_object_key(key)
    assert (parsed.prefix, parsed.topic, parsed.topic_id, parsed.partition, parsed.start_offset,
            parsed.segment_id, parsed.suffix) == parts
    assert str(parsed) == key


def test_ids_given_as_16_bytes_are_written_as_kafkas_uuid_text():
    key = object_key("", "t", bytes(15) + b"\x01", 0, 0, bytes(16), "log")
    assert key == "t-AAAAAAAAAAAAAAAAAAAAAQ/0/00000000000000000000-AAAAAAAAAAAAAAAAAAAAAA.log"


def test_keys_round_trip_with_dashes_in_topic_ids_and_no_prefix():
    rng = random.Random(31)
    for _ in range(200):
        topic = rng.choice(["a", "my-topic", "x.y_z", "--", "t-" + "A" * 22])
        topic_id = uuid_text(rng.randbytes(16))
        segment_id = uuid_text(rng.randbytes(16))
        parts = (rng.choice(["", "p/", "a/b/c/"]), topic, topic_id, rng.randrange(1000),
                 rng.randrange(2**63), segment_id, rng.choice(aiven.SUFFIXES))
        parsed = parse_object_key(object_key(*parts))
        assert (parsed.prefix, parsed.topic, parsed.topic_id, parsed.partition, parsed.start_offset,
                parsed.segment_id, parsed.suffix) == parts


def test_a_prefix_without_a_slash_is_parsed_when_given():
    key = object_key("tiered-", "topic", TOPIC_ID, 1, 5, SEGMENT_ID, "log")
    assert key.startswith("tiered-topic-")
    assert parse_object_key(key, prefix="tiered-").topic == "topic"
    assert parse_object_key(key).topic == "tiered-topic"  # unknowable without it: the plugin adds no separator


def test_with_suffix_names_the_segments_other_objects():
    parsed = parse_object_key(PLUGIN_KEYS[0][1])
    assert parsed.with_suffix("rsm-manifest") == PLUGIN_KEYS[2][1]


@pytest.mark.parametrize("key", [
    "",
    "topic-AAAAAAAAAAAAAAAAAAAAAQ/7/00000000000000001234-AAAAAAAAAAAAAAAAAAAAAA.timeindex",
    "topic-AAAAAAAAAAAAAAAAAAAAAQ/7/1234-AAAAAAAAAAAAAAAAAAAAAA.log",
    "topic-AAAAAAAAAAAAAAAAAAAAAQ/x/00000000000000001234-AAAAAAAAAAAAAAAAAAAAAA.log",
    "topic-AAAAAAAAAAAAAAAAAAAAAQ/07/00000000000000001234-AAAAAAAAAAAAAAAAAAAAAA.log",  # Kafka writes 7
    "topic-AAAAAAAAAAAAAAAAAAAAAB/7/00000000000000001234-AAAAAAAAAAAAAAAAAAAAAA.log",  # 'B' leaves bits set
    "topicAAAAAAAAAAAAAAAAAAAAAQ/7/00000000000000001234-AAAAAAAAAAAAAAAAAAAAAA.log",
    "p/topic-7/00000000000000001234-AAAAAAAAAAAAAAAAAAAAAA.log",
    "topic-7/00000000000000000000.log",
])
def test_a_key_outside_the_layout_is_refused_naming_the_key(key):
    with pytest.raises(InvalidRecordError, match="not a tiered-storage object key") as e:
        parse_object_key(key)
    assert e.value.path == key


def test_a_key_not_under_the_given_prefix_is_refused():
    with pytest.raises(InvalidRecordError, match="prefix 'other/'"):
        parse_object_key(PLUGIN_KEYS[0][1], prefix="other/")


@pytest.mark.parametrize("args", [
    ("p/", "t", "short", 0, 0, SEGMENT_ID, "log"),
    ("p/", "t", TOPIC_ID, -1, 0, SEGMENT_ID, "log"),
    ("p/", "t", TOPIC_ID, 0, -5, SEGMENT_ID, "log"),
    ("p/", "t", TOPIC_ID, 0, 0, SEGMENT_ID, "index"),
])
def test_object_key_refuses_parts_the_layout_cannot_hold(args):
    with pytest.raises(InvalidArgumentError):
        object_key(*args)


# --- Chunk indexes ----------------------------------------------------------------------------

def test_fixed_index_chunks_as_the_plugins_test_lists_them():
    # core/src/test/java/io/aiven/kafka/tieredstorage/manifest/index/ChunkIndexSerializationTest.java
    index = FixedSizeChunkIndex(100, 250, 110, 30)
    assert index.chunks == [Chunk(0, 0, 100, 0, 110), Chunk(1, 100, 100, 110, 110), Chunk(2, 200, 50, 220, 30)]
    assert index.chunk_count == 3 and index.transformed_file_size == 250


def test_variable_index_chunks_as_the_plugins_test_lists_them():
    # core/src/test/java/io/aiven/kafka/tieredstorage/manifest/index/ChunkIndexSerializationTest.java
    index = VariableSizeChunkIndex(100, 250, [10, 20, 30])
    assert index.chunks == [Chunk(0, 0, 100, 0, 10), Chunk(1, 100, 100, 10, 20), Chunk(2, 200, 50, 30, 30)]
    assert index.transformed_file_size == 60


def test_find_chunk_maps_original_positions_and_ends_at_the_file_size():
    index = FixedSizeChunkIndex(100, 250, 110, 30)
    assert [index.find_chunk(p).id for p in (0, 99, 100, 199, 200, 249)] == [0, 0, 1, 1, 2, 2]
    assert index.find_chunk(250) is None and index.find_chunk(10**6) is None
    with pytest.raises(InvalidArgumentError):
        index.find_chunk(-1)


def test_chunks_for_range_are_exactly_the_covering_chunks():
    index = VariableSizeChunkIndex(100, 250, [10, 20, 30])
    ids = lambda pos, size: [c.id for c in index.chunks_for_range(pos, size)]  # noqa: E731
    assert ids(0, 1) == [0]
    assert ids(99, 1) == [0]
    assert ids(99, 2) == [0, 1]
    assert ids(100, 100) == [1]
    assert ids(150, 1000) == [1, 2]  # clipped at the file's end
    assert ids(0, 250) == [0, 1, 2]
    assert ids(250, 10) == [] and ids(10, 0) == []


def test_a_file_of_whole_chunks_has_a_full_last_chunk():
    index = FixedSizeChunkIndex(100, 300, 128, 128)
    assert index.chunks[-1] == Chunk(2, 200, 100, 256, 128)


def test_an_empty_file_has_one_empty_chunk_and_covers_no_range():
    index = FixedSizeChunkIndex(4096, 0, 4096, 0)
    assert index.chunk_count == 0
    assert index.chunks == [Chunk(0, 0, 0, 0, 0)]  # as the plugin's AbstractChunkIndex lists it
    assert index.find_chunk(0) is None and index.chunks_for_range(0, 10) == []


def test_a_variable_index_must_list_one_size_per_chunk():
    with pytest.raises(InvalidArgumentError, match="has 3 chunks, not 2"):
        VariableSizeChunkIndex(100, 250, [10, 20])


# --- The chunk size encoding and the manifest JSON ------------------------------------------

# core/src/test/java/io/aiven/kafka/tieredstorage/manifest/index/ChunkIndexSerializationTest.java
ENCODED_CHUNKS = "KLUv/SAPeQAAAAAAAwAAAAoBAAoAAAAe"  # 10, 20, 30
FIXED_SIZE_CHUNK_INDEX_JSON = ('{"type":"fixed","originalChunkSize":100,"originalFileSize":250,'
                               '"transformedChunkSize":110,"finalTransformedChunkSize":30}')
VARIABLE_CHUNK_INDEX_JSON = ('{"type":"variable","originalChunkSize":100,"originalFileSize":250,'
                             '"transformedChunks":"KLUv/SAPeQAAAAAAAwAAAAoBAAoAAAAe"}')

# core/src/test/java/io/aiven/kafka/tieredstorage/manifest/SegmentManifestV1SerdeTest.java
REMOTE_LOG_SEGMENT_METADATA_JSON = (
    '{"remoteLogSegmentId":{"topicIdPartition":{"topicId":"lZ6vvmajTWKDBUTV6SQAtQ","topicPartition":'
    '{"topic":"topic1","partition":42}},"id":"adh9f8BMS4anaUnD8KWfWg"},"startOffset":0,"endOffset":1000,'
    '"maxTimestampMs":1000000000,"brokerId":2,"eventTimestampMs":2000000000,'
    '"segmentLeaderEpochs":{"0":100,"1":200,"2":300}}')
WITHOUT_ENCRYPTION_JSON = (
    '{"version":"1","chunkIndex":{"type":"fixed","originalChunkSize":100,"originalFileSize":1000,'
    '"transformedChunkSize":110,"finalTransformedChunkSize":110},"segmentIndexes":{'
    '"offset":{"position":0,"size":1},"timestamp":{"position":1,"size":1},'
    '"producerSnapshot":{"position":2,"size":1},"leaderEpoch":{"position":3,"size":1},'
    '"transaction":{"position":4,"size":1}},"compression":false,"remoteLogSegmentMetadata":'
    + REMOTE_LOG_SEGMENT_METADATA_JSON + '}')
WITHOUT_ENCRYPTION_WITHOUT_TXN_INDEX_JSON = (
    '{"version":"1","chunkIndex":{"type":"fixed","originalChunkSize":100,"originalFileSize":1000,'
    '"transformedChunkSize":110,"finalTransformedChunkSize":110},"segmentIndexes":{'
    '"offset":{"position":0,"size":1},"timestamp":{"position":1,"size":1},'
    '"producerSnapshot":{"position":2,"size":1},"leaderEpoch":{"position":3,"size":1},'
    '"transaction":null},"compression":false,"remoteLogSegmentMetadata":'
    + REMOTE_LOG_SEGMENT_METADATA_JSON + '}')
WITH_ENCRYPTION_WITHOUT_SECRET_KEY_JSON = WITHOUT_ENCRYPTION_JSON.replace(
    '"compression":false,', '"compression":false,"encryption":{"aad":"CgsMDQ=="},')


def test_chunk_sizes_encode_as_the_plugins_test_encodes_them():
    assert aiven.encode_chunk_sizes([10, 20, 30]) == ENCODED_CHUNKS
    assert aiven.decode_chunk_sizes(ENCODED_CHUNKS) == [10, 20, 30]


@pytest.mark.parametrize("sizes", [[], [0], [7], [5, 5], [300, 1, 2**31 - 1], [2**24, 0, 9], [2**31 - 1] * 3])
def test_chunk_sizes_round_trip_at_every_width(sizes):
    assert aiven.decode_chunk_sizes(aiven.encode_chunk_sizes(sizes)) == sizes


def test_chunk_sizes_round_trip_seeded():
    rng = random.Random(7)
    for _ in range(50):
        sizes = [rng.randrange(4 << 20, (4 << 20) + rng.choice([1, 300, 70000])) for _ in range(rng.randrange(2, 600))]
        sizes.append(rng.randrange(1, 100))
        assert aiven.decode_chunk_sizes(aiven.encode_chunk_sizes(sizes)) == sizes


def _zstd_base64(raw: bytes) -> str:
    return base64.b64encode(zstandard.ZstdCompressor(write_content_size=True).compress(raw)).decode()


@pytest.mark.parametrize("text", [
    "not base64!",
    "KLUv",  # a zstd frame's magic, then nothing
    base64.b64encode(zstandard.ZstdCompressor(write_content_size=False).compress(b"\0" * 4)).decode(),
    _zstd_base64(struct.pack(">ii", 3, 10) + b"\x01\x00"),  # ends before its values
    _zstd_base64(struct.pack(">iib", 2, 10, 5) + bytes(9)),  # 5 bytes per value
    _zstd_base64(struct.pack(">ii", 1, -1)),  # a negative size
    _zstd_base64(struct.pack(">ii", 1, 7) + b"!"),  # a byte left over
])
def test_a_bad_chunk_size_encoding_is_a_corrupt_manifest(text):
    with pytest.raises(CorruptFileError, match="transformedChunks"):
        aiven.decode_chunk_sizes(text, path="s3://b/x.rsm-manifest")


@pytest.mark.parametrize("text, cls", [(FIXED_SIZE_CHUNK_INDEX_JSON, FixedSizeChunkIndex),
                                       (VARIABLE_CHUNK_INDEX_JSON, VariableSizeChunkIndex)])
def test_chunk_index_json_is_the_plugins_byte_for_byte(text, cls):
    manifest = SegmentManifest.parse(WITHOUT_ENCRYPTION_JSON.replace(
        json.dumps(json.loads(WITHOUT_ENCRYPTION_JSON)["chunkIndex"], separators=(",", ":")), text))
    assert type(manifest.chunk_index) is cls
    assert json.dumps(manifest.chunk_index.to_json(), separators=(",", ":")) == text


@pytest.mark.parametrize("text", [WITHOUT_ENCRYPTION_JSON, WITHOUT_ENCRYPTION_WITHOUT_TXN_INDEX_JSON])
def test_the_plugins_manifest_parses_and_writes_back_byte_for_byte(text):
    manifest = SegmentManifest.parse(text.encode())
    assert manifest.chunk_index == FixedSizeChunkIndex(100, 1000, 110, 110)
    assert manifest.segment_indexes.leader_epoch == aiven.SegmentIndex(3, 1)
    assert manifest.compression is False and manifest.encryption is None
    assert manifest.remote_log_segment_metadata["endOffset"] == 1000
    assert manifest.to_bytes() == text.encode()


def test_a_manifest_without_a_transaction_index_has_none():
    manifest = SegmentManifest.parse(WITHOUT_ENCRYPTION_WITHOUT_TXN_INDEX_JSON.encode())
    assert manifest.segment_indexes.transaction is None


def test_remote_log_segment_metadata_json_is_the_plugins():
    tree = aiven.remote_log_segment_metadata_json(
        "topic1", "lZ6vvmajTWKDBUTV6SQAtQ", 42, "adh9f8BMS4anaUnD8KWfWg", start_offset=0, end_offset=1000,
        max_timestamp_ms=1000000000, broker_id=2, event_timestamp_ms=2000000000,
        segment_leader_epochs={2: 300, 0: 100, 1: 200})
    assert json.dumps(tree, separators=(",", ":")) == REMOTE_LOG_SEGMENT_METADATA_JSON


BAD_MANIFESTS = [
    (b"{not json", "not JSON"),
    (b"[" * 100_000, "not JSON"),
    (b'{"version":"1\xff"}', "not JSON"),
    (b"[]", "not a JSON object"),
    (WITHOUT_ENCRYPTION_JSON.replace('"version":"1"', '"version":"2"').encode(), "version '2'"),
    (WITHOUT_ENCRYPTION_JSON.replace('"chunkIndex"', '"chunkIndexes"').encode(), "no 'chunkIndex'"),
    (WITHOUT_ENCRYPTION_JSON.replace('"type":"fixed"', '"type":"other"').encode(), "type 'other'"),
    (WITHOUT_ENCRYPTION_JSON.replace('"originalChunkSize":100', '"originalChunkSize":0').encode(),
     "originalChunkSize is 0"),
    (WITHOUT_ENCRYPTION_JSON.replace('"transformedChunkSize":110,', '').encode(), "no 'transformedChunkSize'"),
    (WITHOUT_ENCRYPTION_JSON.replace('"offset":{"position":0,"size":1},', '').encode(), "no 'offset'"),
    (WITHOUT_ENCRYPTION_JSON.replace('"timestamp":{"position":1,"size":1}', '"timestamp":{"position":1}').encode(),
     "no 'size'"),
    (WITHOUT_ENCRYPTION_JSON.replace('"compression":false', '"compression":"no"').encode(), "not true or false"),
    (WITHOUT_ENCRYPTION_JSON.replace('"compression":false,', '').encode(), "no 'compression'"),
    (WITH_ENCRYPTION_WITHOUT_SECRET_KEY_JSON.encode(), "no 'dataKey'"),
    (WITH_ENCRYPTION_WITHOUT_SECRET_KEY_JSON.replace('{"aad"', '{"dataKey":"nocolon","aad"').encode(), "dataKey"),
    (json.dumps({k: v for k, v in json.loads(WITHOUT_ENCRYPTION_JSON).items() if k != "segmentIndexes"}).encode(),
     "no 'segmentIndexes'"),
    (VARIABLE_CHUNK_INDEX_JSON.encode(), "version None"),
]


@pytest.mark.parametrize("data, reason", BAD_MANIFESTS, ids=[r for _, r in BAD_MANIFESTS])
def test_a_bad_manifest_is_a_corrupt_file_naming_the_object(data, reason):
    url = "s3://bucket/p/topic-AAAAAAAAAAAAAAAAAAAAAQ/7/00000000000000001234-AAAAAAAAAAAAAAAAAAAAAA.rsm-manifest"
    with pytest.raises(CorruptFileError, match=reason) as e:
        SegmentManifest.parse(data, path=url)
    assert e.value.path == url


# --- Writing and reading segments -------------------------------------------------------------

class CountingStore:
    """A real ObjectStore that records the calls made to it, and fails the puts named in
    ``fail_puts`` (with the store's own StorageError) as a store that went down would."""

    def __init__(self, store, fail_puts=()):
        self._store = store
        self.calls = []
        self.fail_puts = set(fail_puts)

    def __getattr__(self, name):
        method = getattr(self._store, name)

        def call(*args):
            self.calls.append((name, *args))
            if name in ("put", "put_file") and args[0].rsplit(".", 1)[1] in self.fail_puts:
                raise StorageError(f"writing {self._store.url(args[0])} failed")
            return method(*args)
        return call if name != "url" else method

    def gets(self):
        return [c for c in self.calls if c[0] in ("read", "read_range")]


@pytest.fixture
def store(tmp_path):
    return CountingStore(ObjectStore.from_url((tmp_path / "bucket").as_uri()))


def _segment(tmp_path, data: bytes, base_offset: int = 42):
    path = tmp_path / f"{base_offset:020d}.log"
    path.write_bytes(data)
    return path


def _upload(store, log_path, **kw):
    return upload_segment(store, "tiered/", "topic", TOPIC_ID, 7, SEGMENT_ID, log_path, INDEXES, **kw)


def _upload_bytes(tmp_path, store, data: bytes, chunk_size: int, compression: bool, key):
    return _upload(store, _segment(tmp_path, data), chunk_size=chunk_size, compression=compression,
                   encryption_key=key)


LOG_KEY = "tiered/topic-AAAAAAAAAAAAAAAAAAAAAQ/7/00000000000000000042-AAAAAAAAAAAAAAAAAAAAAA.log"
INDEXES_KEY = LOG_KEY[:-3] + "indexes"
MANIFEST_KEY = LOG_KEY[:-3] + "rsm-manifest"


@pytest.fixture(scope="module")
def key_pair():
    return KeyPair.generate("key-1")


def _segment_bytes(seed: int, size: int) -> bytes:
    rng = random.Random(seed)  # compressible: runs of repeated words
    words = [rng.randbytes(rng.randrange(1, 40)) for _ in range(50)]
    out = bytearray()
    while len(out) < size:
        out += rng.choice(words)
    return bytes(out[:size])


def test_by_default_the_log_object_is_the_segment_file(tmp_path, store):
    data = _segment_bytes(1, 10_000)
    manifest = _upload(store, _segment(tmp_path, data), chunk_size=4096)
    assert store.read(LOG_KEY) == data
    assert manifest.compression is False and manifest.encryption is None
    assert manifest.chunk_index == FixedSizeChunkIndex(4096, 10_000, 4096, 10_000 - 2 * 4096)
    assert read_manifest(store, MANIFEST_KEY) == manifest
    assert [c[1] for c in store.calls if c[0] in ("put", "put_file")] == [LOG_KEY, INDEXES_KEY, MANIFEST_KEY]


def test_the_indexes_blob_is_the_indexes_concatenated_in_the_plugins_order(tmp_path, store):
    manifest = _upload(store, _segment(tmp_path, b"x" * 100), )
    assert store.read(INDEXES_KEY) == b"".join(INDEXES[n] for n in ("offset", "timestamp", "producer_snapshot",
                                                                    "leader_epoch"))
    ix = manifest.segment_indexes
    assert (ix.offset.position, ix.timestamp.position, ix.producer_snapshot.position) == (0, 24, 48)
    assert ix.transaction is None
    assert read_indexes(store, INDEXES_KEY, manifest) == INDEXES


def test_read_index_reads_one_index_with_one_ranged_get(tmp_path, store):
    manifest = _upload(store, _segment(tmp_path, b"x" * 100))
    store.calls.clear()
    assert read_index(store, INDEXES_KEY, manifest, "producer_snapshot") == INDEXES["producer_snapshot"]
    assert store.gets() == [("read_range", INDEXES_KEY, 48, 48 + len(INDEXES["producer_snapshot"]))]
    assert read_index(store, INDEXES_KEY, manifest, "transaction") == b""  # uploaded without one
    assert len(store.gets()) == 1


def test_a_truncated_indexes_object_is_a_corrupt_file_naming_the_index(tmp_path, store):
    manifest = _upload(store, _segment(tmp_path, b"x" * 100))
    store.put(INDEXES_KEY, store.read(INDEXES_KEY)[:-3])
    with pytest.raises(CorruptFileError, match="ends inside the leader_epoch index") as e:
        read_indexes(store, INDEXES_KEY, manifest)
    assert e.value.path == store.url(INDEXES_KEY)
    with pytest.raises(CorruptFileError, match="ends inside the leader_epoch index"):
        read_index(store, INDEXES_KEY, manifest, "leader_epoch")
    assert read_index(store, INDEXES_KEY, manifest, "offset") == INDEXES["offset"]


def test_a_transaction_index_goes_last_and_empty_indexes_take_no_bytes(tmp_path, store):
    indexes = {**INDEXES, "producer_snapshot": b"", "transaction": b"txn" * 34}
    manifest = upload_segment(store, "tiered/", "topic", TOPIC_ID, 7, SEGMENT_ID, _segment(tmp_path, b"x"), indexes)
    ix = manifest.segment_indexes
    assert ix.producer_snapshot == aiven.SegmentIndex(48, 0) and ix.leader_epoch.position == 48
    assert ix.transaction == aiven.SegmentIndex(48 + len(INDEXES["leader_epoch"]), 102)
    assert read_indexes(store, INDEXES_KEY, manifest) == indexes


CONFIGS = [pytest.param(False, False, id="plain"), pytest.param(True, False, id="zstd"),
           pytest.param(False, True, id="encrypted"), pytest.param(True, True, id="zstd+encrypted")]


@pytest.mark.parametrize("compression, encryption", CONFIGS)
def test_random_ranges_read_back_equal_through_one_get_of_the_covering_chunks(tmp_path, store, key_pair,
                                                                              compression, encryption):
    data = _segment_bytes(2, 50_000)
    chunk_size = 4000
    key = key_pair if encryption else None
    _upload_bytes(tmp_path, store, data, chunk_size, compression, key)
    manifest = read_manifest(store, MANIFEST_KEY)
    assert manifest.compression is compression and (manifest.encryption is not None) is encryption
    assert isinstance(manifest.chunk_index, VariableSizeChunkIndex if compression else FixedSizeChunkIndex)
    if compression:
        assert store.size(LOG_KEY) < len(data) // 2
    segment = ChunkedSegmentBytes(store, LOG_KEY, manifest, encryption_key=key)
    assert segment.size == len(data)
    rng = random.Random(11)
    for _ in range(60):
        position = rng.randrange(len(data) + 100)
        size = rng.choice([0, 1, 13, chunk_size - 1, chunk_size, chunk_size + 1, 3 * chunk_size, rng.randrange(20000)])
        segment = ChunkedSegmentBytes(store, LOG_KEY, manifest, encryption_key=key)  # nothing cached
        store.calls.clear()
        assert segment.read(position, size) == data[position: position + size]
        covering = manifest.chunk_index.chunks_for_range(position, size)
        if not covering:
            assert store.gets() == []
        else:
            expected = (covering[0].transformed_position, covering[-1].transformed_end)
            if not manifest.transformed:
                expected = (position, min(position + size, len(data)))
            assert store.gets() == [("read_range", LOG_KEY, *expected)]
    assert ChunkedSegmentBytes(store, LOG_KEY, manifest, encryption_key=key).read(0, len(data)) == data


@pytest.mark.parametrize("compression, encryption", CONFIGS[1:])
def test_sequential_reads_within_a_chunk_fetch_it_once(tmp_path, store, key_pair, compression, encryption):
    data = _segment_bytes(3, 20_000)
    key = key_pair if encryption else None
    manifest = _upload_bytes(tmp_path, store, data, 8192, compression, key)
    segment = ChunkedSegmentBytes(store, LOG_KEY, manifest, encryption_key=key)
    store.calls.clear()
    out = b"".join(segment.read(p, 1000) for p in range(0, len(data), 1000))
    assert out == data
    assert len(store.gets()) == 3  # one per chunk


def test_encrypted_indexes_read_back_with_the_key(tmp_path, store, key_pair):
    indexes = {**INDEXES, "transaction": b"t" * 34}
    manifest = upload_segment(store, "tiered/", "topic", TOPIC_ID, 7, SEGMENT_ID, _segment(tmp_path, b"x" * 10),
                              indexes, encryption_key=key_pair)
    assert store.read(INDEXES_KEY).find(INDEXES["leader_epoch"]) == -1
    # each non-empty index is one chunk of its own: IV, ciphertext, tag
    assert manifest.segment_indexes.offset.size == len(INDEXES["offset"]) + aiven.IV_BYTES + aiven.GCM_TAG_BYTES
    assert read_indexes(store, INDEXES_KEY, manifest, encryption_key=key_pair) == indexes
    assert read_index(store, INDEXES_KEY, manifest, "timestamp", encryption_key=[key_pair]) == INDEXES["timestamp"]


def test_an_encrypted_segment_without_a_key_is_refused_saying_how_to_pass_one(tmp_path, store, key_pair):
    manifest = _upload(store, _segment(tmp_path, b"secret" * 100), encryption_key=key_pair)
    assert manifest.encryption.key_id == "key-1"
    with pytest.raises(InvalidArgumentError, match=r"is encrypted \(with RSA key pair 'key-1'\).*encryption_key="):
        ChunkedSegmentBytes(store, LOG_KEY, manifest)
    with pytest.raises(InvalidArgumentError, match="is encrypted"):
        read_index(store, INDEXES_KEY, manifest, "offset")
    with pytest.raises(InvalidArgumentError, match="'key-1'"):
        ChunkedSegmentBytes(store, LOG_KEY, manifest, encryption_key=KeyPair.generate("key-2"))


def test_another_private_key_of_the_same_id_does_not_open_the_segment(tmp_path, store, key_pair):
    manifest = _upload(store, _segment(tmp_path, b"secret" * 100), encryption_key=key_pair)
    impostor = KeyPair.generate("key-1")
    with pytest.raises(InvalidArgumentError, match="does not open this data key"):
        ChunkedSegmentBytes(store, LOG_KEY, manifest, encryption_key=impostor)


def test_reprs_show_no_key_material(tmp_path, store, key_pair):
    assert repr(key_pair) == "KeyPair('key-1')"
    manifest = _upload(store, _segment(tmp_path, b"x"), encryption_key=key_pair)
    assert manifest.encryption.data_key.partition(":")[2] not in repr(manifest)
    assert "SegmentEncryption(key_id='key-1')" in repr(manifest)


def test_a_key_pair_reads_from_pem_files(tmp_path, key_pair):
    (tmp_path / "private.pem").write_bytes(key_pair.private_key_pem)
    loaded = KeyPair.from_files("key-1", private_key_file=tmp_path / "private.pem")
    assert loaded.unwrap(key_pair.wrap(b"k" * 32)) == b"k" * 32
    with pytest.raises(InvalidArgumentError, match="cannot read key file"):
        KeyPair.from_files("key-1", private_key_file=tmp_path / "missing.pem")


@pytest.mark.parametrize("compression, encryption", CONFIGS[1:])
def test_an_altered_chunk_is_a_corrupt_file_naming_the_object(tmp_path, store, key_pair, compression, encryption):
    data = _segment_bytes(4, 9000)
    key = key_pair if encryption else None
    manifest = _upload_bytes(tmp_path, store, data, 4096, compression, key)
    chunk = manifest.chunk_index.chunk(1)
    raw = bytearray(store.read(LOG_KEY))
    raw[chunk.transformed_position + 12: chunk.transformed_end - 4] = bytes(chunk.transformed_size - 16)
    store.put(LOG_KEY, bytes(raw))
    segment = ChunkedSegmentBytes(store, LOG_KEY, manifest, encryption_key=key)
    assert segment.read(0, 100) == data[:100]  # chunk 0 is sound
    with pytest.raises(CorruptFileError) as e:
        segment.read(4096, 10)
    assert e.value.path == store.url(LOG_KEY)


def test_a_truncated_log_object_is_a_corrupt_file(tmp_path, store):
    data = _segment_bytes(5, 9000)
    manifest = _upload(store, _segment(tmp_path, data), chunk_size=4096, compression=True)
    store.put(LOG_KEY, store.read(LOG_KEY)[:-5])
    with pytest.raises(CorruptFileError, match="ends inside chunk 2"):
        ChunkedSegmentBytes(store, LOG_KEY, manifest).read(8500, 10)


def test_an_empty_segment_uploads_and_reads_as_empty(tmp_path, store, key_pair):
    for compression, key in ((False, None), (True, None), (True, key_pair)):
        manifest = _upload(store, _segment(tmp_path, b""), compression=compression, encryption_key=key)
        assert manifest.chunk_index.chunks == [Chunk(0, 0, 0, 0, 0)]
        assert manifest.compression is False  # nothing to compress
        segment = ChunkedSegmentBytes(store, LOG_KEY, read_manifest(store, MANIFEST_KEY), encryption_key=key)
        assert segment.size == 0 and segment.read(0, 100) == b""


@pytest.mark.parametrize("failing", ["log", "indexes", "rsm-manifest"])
def test_a_copy_that_fails_midway_leaves_no_manifest(tmp_path, store, failing):
    store.fail_puts = {failing}
    with pytest.raises(StorageError):
        _upload(store, _segment(tmp_path, b"x" * 5000), chunk_size=1024, compression=True)
    assert MANIFEST_KEY not in store.list()


def test_the_compression_heuristic_skips_segments_already_compressed(tmp_path, store):
    records = [b"value %d" % i * 20 for i in range(200)]
    plain = _segment(tmp_path, encode_batch(records, base_offset=42), 42)
    zstd = _segment(tmp_path, encode_batch(records, base_offset=43, compression="zstd"), 43)
    assert _upload(store, plain, compression=True, compression_heuristic=True).compression is True
    assert _upload(store, zstd, compression=True, compression_heuristic=True).compression is False
    assert _upload(store, zstd, compression=True).compression is True  # without the heuristic, always


def test_the_compression_heuristic_uploads_a_segment_with_an_unreadable_first_batch_uncompressed(tmp_path, store):
    batch = bytearray(encode_batch([b"value %d" % i * 20 for i in range(200)], base_offset=42))
    batch[-1] ^= 0xFF  # the CRC no longer holds
    for data in (bytes(batch), batch[:30], b"\0" * 12):
        manifest = _upload(store, _segment(tmp_path, bytes(data)), compression=True, compression_heuristic=True)
        assert manifest.compression is False


@needs_samples
def test_kafka_segments_round_trip_through_compressed_encrypted_chunks(tmp_path, store, key_pair):
    logs = sorted((p for p in sample_logs() if p.stat().st_size), key=lambda p: p.stat().st_size)
    rng = random.Random(13)
    for log_path in logs[-3:]:  # the largest: 1 to 4 MB of real batches
        data = log_path.read_bytes()
        manifest = upload_segment(store, "", "topic", TOPIC_ID, 0, SEGMENT_ID, log_path, INDEXES,
                                  chunk_size=256 * 1024, compression=True, encryption_key=key_pair)
        key = object_key("", "topic", TOPIC_ID, 0, int(log_path.name[:20]), SEGMENT_ID, "log")
        segment = ChunkedSegmentBytes(store, key, manifest, encryption_key=key_pair)
        assert segment.read(0, segment.size) == data
        for _ in range(5):
            position, size = rng.randrange(len(data)), rng.randrange(1, 600_000)
            assert segment.read(position, size) == data[position: position + size]


def test_upload_refuses_what_it_cannot_write_before_writing_anything(tmp_path, store):
    log_path = _segment(tmp_path, b"x" * 10)
    with pytest.raises(InvalidArgumentError, match="required"):
        upload_segment(store, "p/", "topic", TOPIC_ID, 7, SEGMENT_ID, log_path, {"offset": b""})
    with pytest.raises(InvalidArgumentError, match="unknown index names"):
        upload_segment(store, "p/", "topic", TOPIC_ID, 7, SEGMENT_ID, log_path, {**INDEXES, "time": b""})
    with pytest.raises(InvalidArgumentError, match="not named"):
        (tmp_path / "segment.log").write_bytes(b"x")
        upload_segment(store, "p/", "topic", TOPIC_ID, 7, SEGMENT_ID, tmp_path / "segment.log", INDEXES)
    with pytest.raises(InvalidArgumentError, match="chunk_size"):
        _upload(store, log_path, chunk_size=0)
    with pytest.raises(InvalidArgumentError, match="cannot read segment file"):
        _upload(store, tmp_path / "00000000000000000099.log")
    assert store.list() == {}


def test_the_start_offset_comes_from_the_file_name_unless_given(tmp_path, store):
    log_path = _segment(tmp_path, b"x" * 10, base_offset=1234)
    upload_segment(store, "", "t", TOPIC_ID, 0, SEGMENT_ID, log_path, INDEXES)
    upload_segment(store, "", "t", TOPIC_ID, 0, SEGMENT_ID, log_path, INDEXES, start_offset=99)
    assert sorted(parse_object_key(k).start_offset for k in store.list() if k.endswith(".log")) == [99, 1234]


def test_reads_through_s3_cost_one_ranged_get_each(tmp_path, s3, key_pair):
    data = _segment_bytes(6, 40_000)
    proxy = s3.faulty()
    store = ObjectStore.from_url(s3.url(s3.bucket(), "tiered"), proxy.storage_options)
    manifest = upload_segment(store, "p/", "topic", TOPIC_ID, 7, SEGMENT_ID, _segment(tmp_path, data), INDEXES,
                              chunk_size=4096, compression=True, encryption_key=key_pair)
    key = "p/topic-AAAAAAAAAAAAAAAAAAAAAQ/7/00000000000000000042-AAAAAAAAAAAAAAAAAAAAAA.log"
    segment = ChunkedSegmentBytes(store, key, manifest, encryption_key=key_pair)
    proxy.clear()
    assert segment.read(5000, 9000) == data[5000:14000]
    gets = [r for r in proxy.requests if r.method == "GET"]
    first, last = manifest.chunk_index.chunk(1), manifest.chunk_index.chunk(3)
    assert len(proxy.requests) == len(gets) == 1
    assert gets[0].path.endswith(f"/tiered/{key}")
    assert gets[0].range == f"bytes={first.transformed_position}-{last.transformed_end - 1}"


# --- The JDK's ciphers and zstd-jni, the plugin's primitives, as judges -----------------------

# What the plugin does with each chunk and key, written with the same Java primitives: zstd-jni
# (ZstdCompressCtx with the content size; Zstd.decompress), AES/GCM/NoPadding with the IV before
# the ciphertext, RSA-OAEP with SHA3-512 for the label and MGF1 (the JDK's SunJCE given the
# parameters BouncyCastle takes from "OAEPWithSHA3-512AndMGF1Padding"), Jackson for the manifest.
# "read" de-transforms a segment pylog wrote; "write" writes one for pylog to read.
JAVA_JUDGE = r'''
import com.fasterxml.jackson.databind.*;
import com.fasterxml.jackson.databind.node.*;
import com.github.luben.zstd.*;
import java.nio.*;
import java.nio.file.*;
import java.security.*;
import java.security.spec.*;
import java.util.*;
import javax.crypto.*;
import javax.crypto.spec.*;

public class AivenJudge {
    static final OAEPParameterSpec OAEP = new OAEPParameterSpec(
        "SHA3-512", "MGF1", new MGF1ParameterSpec("SHA3-512"), PSource.PSpecified.DEFAULT);

    static byte[] pem(Path p) throws Exception {
        return Base64.getMimeDecoder().decode(Files.readString(p).replaceAll("-----[A-Z ]+-----", ""));
    }

    static byte[] gcm(int mode, byte[] key, byte[] aad, byte[] data) throws Exception {
        Cipher c = Cipher.getInstance("AES/GCM/NoPadding");
        if (mode == Cipher.DECRYPT_MODE) {
            c.init(mode, new SecretKeySpec(key, "AES"), new GCMParameterSpec(128, data, 0, 12));
            c.updateAAD(aad);
            return c.doFinal(data, 12, data.length - 12);
        }
        c.init(mode, new SecretKeySpec(key, "AES"), SecureRandom.getInstanceStrong());
        c.updateAAD(aad);
        byte[] iv = c.getIV();
        byte[] out = new byte[iv.length + c.getOutputSize(data.length)];
        System.arraycopy(iv, 0, out, 0, iv.length);
        c.doFinal(data, 0, data.length, out, iv.length);
        return out;
    }

    static List<Integer> sizes(String text) {
        byte[] frame = Base64.getDecoder().decode(text);
        ByteBuffer b = ByteBuffer.wrap(Zstd.decompress(frame, (int) Zstd.decompressedSize(frame)));
        int count = b.getInt();
        List<Integer> out = new ArrayList<>();
        if (count == 1) out.add(b.getInt());
        if (count > 1) {
            int base = b.getInt(), width = b.get();
            for (int i = 0; i < count - 1; i++) {
                byte[] v = new byte[4];
                b.get(v, 4 - width, width);
                out.add(ByteBuffer.wrap(v).getInt() + base);
            }
            out.add(b.getInt());
        }
        return out;
    }

    static String encodeSizes(List<Integer> sizes) {
        int base = Collections.min(sizes.subList(0, sizes.size() - 1));
        ByteBuffer b = ByteBuffer.allocate(13 + 4 * sizes.size());
        b.putInt(sizes.size()).putInt(base).put((byte) 4);
        for (int v : sizes.subList(0, sizes.size() - 1)) b.putInt(v - base);
        b.putInt(sizes.get(sizes.size() - 1));
        ZstdCompressCtx z = new ZstdCompressCtx();
        z.setContentSize(true);
        return Base64.getEncoder().encodeToString(z.compress(Arrays.copyOf(b.array(), b.position())));
    }

    public static void main(String[] a) throws Exception {
        Path dir = Path.of(a[1]);
        ObjectMapper json = new ObjectMapper();
        if (a[0].equals("read")) {
            JsonNode m = json.readTree(dir.resolve("manifest.json").toFile());
            String[] wrapped = m.get("encryption").get("dataKey").asText().split(":");
            Cipher rsa = Cipher.getInstance("RSA/ECB/OAEPPadding");
            rsa.init(Cipher.DECRYPT_MODE, KeyFactory.getInstance("RSA").generatePrivate(
                new PKCS8EncodedKeySpec(pem(dir.resolve("private.pem")))), OAEP);
            byte[] key = rsa.doFinal(Base64.getDecoder().decode(wrapped[1]));
            byte[] aad = m.get("encryption").get("aad").binaryValue();
            byte[] log = Files.readAllBytes(dir.resolve("segment.log"));
            var out = new java.io.ByteArrayOutputStream();
            int at = 0;
            for (int size : sizes(m.get("chunkIndex").get("transformedChunks").asText())) {
                byte[] z = gcm(Cipher.DECRYPT_MODE, key, aad, Arrays.copyOfRange(log, at, at + size));
                out.write(Zstd.decompress(z, (int) Zstd.decompressedSize(z)));
                at += size;
            }
            Files.write(dir.resolve("java-read.log"), out.toByteArray());
            byte[] indexes = Files.readAllBytes(dir.resolve("segment.indexes"));
            JsonNode offset = m.get("segmentIndexes").get("offset");
            int p = offset.get("position").asInt(), n = offset.get("size").asInt();
            Files.write(dir.resolve("java-read.index"), gcm(Cipher.DECRYPT_MODE, key, aad,
                Arrays.copyOfRange(indexes, p, p + n)));
        } else {
            int chunkSize = Integer.parseInt(a[2]);
            KeyGenerator aes = KeyGenerator.getInstance("AES");
            aes.init(256, SecureRandom.getInstanceStrong());
            byte[] key = aes.generateKey().getEncoded(), aad = aes.generateKey().getEncoded();
            byte[] original = Files.readAllBytes(dir.resolve("original.log"));
            var log = new java.io.ByteArrayOutputStream();
            List<Integer> sizes = new ArrayList<>();
            for (int at = 0; at < original.length; at += chunkSize) {
                byte[] chunk = Arrays.copyOfRange(original, at, Math.min(original.length, at + chunkSize));
                ZstdCompressCtx z = new ZstdCompressCtx();
                z.setPledgedSrcSize(chunk.length);
                z.setContentSize(true);
                byte[] t = gcm(Cipher.ENCRYPT_MODE, key, aad, z.compress(chunk));
                log.write(t);
                sizes.add(t.length);
            }
            Files.write(dir.resolve("segment.log"), log.toByteArray());
            byte[] index = gcm(Cipher.ENCRYPT_MODE, key, aad, Files.readAllBytes(dir.resolve("original.index")));
            Files.write(dir.resolve("segment.indexes"), index);
            Cipher rsa = Cipher.getInstance("RSA/ECB/OAEPPadding");
            rsa.init(Cipher.ENCRYPT_MODE, KeyFactory.getInstance("RSA").generatePublic(
                new X509EncodedKeySpec(pem(dir.resolve("public.pem")))), OAEP);
            ObjectNode m = json.createObjectNode().put("version", "1");
            m.putObject("chunkIndex").put("type", "variable").put("originalChunkSize", chunkSize)
                .put("originalFileSize", original.length).put("transformedChunks", encodeSizes(sizes));
            ObjectNode ix = m.putObject("segmentIndexes");
            ix.putObject("offset").put("position", 0).put("size", index.length);
            for (String name : List.of("timestamp", "producerSnapshot", "leaderEpoch")) {
                ix.putObject(name).put("position", index.length).put("size", 0);
            }
            ix.putNull("transaction");
            m.put("compression", true);
            m.putObject("encryption").put("dataKey", "judge:" + Base64.getEncoder().encodeToString(rsa.doFinal(key)))
                .put("aad", aad);
            m.putNull("remoteLogSegmentMetadata");
            Files.writeString(dir.resolve("manifest.json"), json.writeValueAsString(m));
        }
    }
}
'''


@pytest.fixture(scope="module")
def java_judge(tmp_path_factory):
    """The compiled judge and its classpath (Kafka's jars: zstd-jni and Jackson)."""
    from tests.kafka import broker as kafka

    unavailable = pytest.fail if os.environ.get("CI") else pytest.skip
    missing = [tool for tool in ("javac", "java", "mvn") if shutil.which(tool) is None]
    if missing:
        unavailable(f"{' and '.join(missing)} not on PATH: the judge needs Java 17+ and Kafka's jars (Maven)")
    try:
        kafka.prepare()
    except (RuntimeError, OSError) as e:
        unavailable(f"cannot prepare Kafka's jars: {e}")
    classes = tmp_path_factory.mktemp("aiven-judge")
    (classes / "AivenJudge.java").write_text(JAVA_JUDGE)
    classpath = f"{classes}{os.pathsep}{kafka.LIB}{os.sep}*"
    subprocess.run(["javac", "-cp", classpath, "-d", str(classes), str(classes / "AivenJudge.java")],
                   check=True, capture_output=True, timeout=300)

    def run(*args):
        done = subprocess.run(["java", "-cp", classpath, "AivenJudge", *map(str, args)], capture_output=True,
                              text=True, timeout=300)
        assert done.returncode == 0, done.stderr[-4000:]
    return run


@pytest.mark.kafka
def test_the_jdk_and_zstd_jni_read_a_segment_pylog_compressed_and_encrypted(tmp_path, store, java_judge):
    key_pair = KeyPair.generate("judge")
    data = _segment_bytes(8, 30_000)
    manifest = _upload_bytes(tmp_path, store, data, 4096, True, key_pair)
    (tmp_path / "manifest.json").write_bytes(store.read(MANIFEST_KEY))
    (tmp_path / "segment.log").write_bytes(store.read(LOG_KEY))
    (tmp_path / "segment.indexes").write_bytes(store.read(INDEXES_KEY))
    (tmp_path / "private.pem").write_bytes(key_pair.private_key_pem)
    java_judge("read", tmp_path)
    assert manifest.chunk_index.chunk_count == 8
    assert (tmp_path / "java-read.log").read_bytes() == data
    assert (tmp_path / "java-read.index").read_bytes() == INDEXES["offset"]


@pytest.mark.kafka
def test_pylog_reads_a_segment_the_jdk_and_zstd_jni_compressed_and_encrypted(tmp_path, store, java_judge):
    key_pair = KeyPair.generate("judge")
    data = _segment_bytes(9, 30_000)
    (tmp_path / "original.log").write_bytes(data)
    (tmp_path / "original.index").write_bytes(INDEXES["offset"])
    (tmp_path / "public.pem").write_bytes(key_pair.public_key_pem)
    java_judge("write", tmp_path, 4096)
    for key, name in ((LOG_KEY, "segment.log"), (INDEXES_KEY, "segment.indexes"), (MANIFEST_KEY, "manifest.json")):
        store.put_file(key, tmp_path / name)
    manifest = read_manifest(store, MANIFEST_KEY)
    assert manifest.compression and manifest.encryption.key_id == "judge"
    segment = ChunkedSegmentBytes(store, LOG_KEY, manifest, encryption_key=key_pair)
    assert segment.read(0, segment.size) == data
    assert segment.read(5000, 9000) == data[5000:14000]
    assert read_indexes(store, INDEXES_KEY, manifest, encryption_key=key_pair) == {
        "offset": INDEXES["offset"], "timestamp": b"", "producer_snapshot": b"", "leader_epoch": b""}
