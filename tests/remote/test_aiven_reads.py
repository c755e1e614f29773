"""Segments in Aiven's tiered layout (uncompressed, zstd-chunked, AES-encrypted, uploaded
twice by a retry) read through ``LogManager(url, read_only=True)`` exactly as the local
segments they were copied from."""

from __future__ import annotations

import uuid
import warnings

import pytest

import pylog
from pylog.errors import InvalidArgumentError
from pylog.remote.aiven import KeyPair, upload_segment
from pylog.remote.layouts import RemoteLayoutWarning
from pylog.remote.store import ObjectStore

TOPIC_ID = "qzlyGCIgTyKgUcZK-A7vdQ"
BASE_TS = 1_700_000_000_000


def _fields(records) -> list[tuple]:
    return [(r.offset, r.key, r.value, r.timestamp, tuple(r.headers)) for r in records]


def _segment_ids():
    n = 0
    while True:
        n += 1
        yield uuid.UUID(int=n).bytes


@pytest.fixture(scope="module")
def key_pair():
    return KeyPair.generate("key-1")


@pytest.fixture(scope="module")
def uploaded(s3, tmp_path_factory, key_pair):
    """``events-0`` written locally (5 segments), its 4 closed ones uploaded in Aiven's
    layout: plain, zstd-chunked, encrypted, chunked and encrypted; the first one twice."""
    root = tmp_path_factory.mktemp("aiven") / "data"
    with pylog.Log.open(root / "events-0", segment_bytes=8192, index_interval_bytes=512) as log:
        for i in range(400):
            log.append([pylog.Record(b"value-%04d|" % i * 6, key=b"k%d" % (i % 5), timestamp=BASE_TS + i,
                                     headers=[("n", b"%d" % i)])])
        closed = log.segments[:4]
        expected = _fields(log.records(0, closed[-1].next_offset))
    url = s3.url(s3.bucket(), "tiered")
    store = ObjectStore.from_url(url, s3.storage_options)
    ids = _segment_ids()
    options = [{}, {"compression": True, "chunk_size": 1024}, {"encryption_key": key_pair},
               {"compression": True, "chunk_size": 2048, "encryption_key": key_pair}]
    for seg, kw in zip(closed, options):
        indexes = {"offset": open(seg.offset_index.path, "rb").read()[: len(seg.offset_index) * 8],
                   "timestamp": open(seg.time_index.path, "rb").read()[: len(seg.time_index) * 12],
                   "producer_snapshot": b"", "leader_epoch": b"0\n0\n"}
        copies = 2 if seg is closed[0] else 1
        for _ in range(copies):
            upload_segment(store, "", "events", TOPIC_ID, 0, next(ids), seg.log_path, indexes,
                           start_offset=seg.base_offset, **kw)
    return url, expected


def test_every_transform_reads_back_the_records_with_the_key(s3, uploaded, key_pair):
    url, expected = uploaded
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with pylog.LogManager(url, read_only=True, storage_options=s3.storage_options,
                              encryption_key=key_pair) as remote:
            assert remote.layout == "aiven" and remote.topics() == ["events"]
            log = remote.log("events", 0)
            assert _fields(log.records()) == expected
            assert (log.log_start_offset, log.log_end_offset) == (0, expected[-1][0] + 1)
            middle = expected[len(expected) // 2][0]
            assert log.offset_for_timestamp(BASE_TS + middle) == middle
    assert any(issubclass(w.category, RemoteLayoutWarning) and "double-counted" in str(w.message)
               and "1 copies left out" in str(w.message) for w in caught)


def test_an_encrypted_segment_without_its_key_is_a_clear_error(s3, uploaded):
    url, expected = uploaded
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RemoteLayoutWarning)
        with pylog.LogManager(url, read_only=True, storage_options=s3.storage_options) as remote:
            log = remote.log("events", 0)
            with pytest.raises(InvalidArgumentError, match="is encrypted .*key-1.*encryption_key="):
                list(log.records())
