"""pylog/remote/store.py: ObjectStore against a real S3 endpoint on loopback (moto's server), a
fault-injecting proxy in front of it, and local directories through the same class."""

from __future__ import annotations

import logging
import math
import os
import pickle
import traceback

import pytest

from pylog.errors import (
    CorruptFileError, InvalidArgumentError, MissingDependencyError, RemoteObjectNotFoundError, StorageError,
)
from pylog.remote.store import ObjectStore, is_url, redact
from tests.s3_endpoint import SECRET_KEY, Fault

DATA = os.urandom(100_000)


def _options(base: dict, *, attempts: int, retries: int | None = None, read_timeout: float | None = None) -> dict:
    """``base`` with few retries: ``attempts`` per request in all (botocore), s3fs's ``retries``
    (its default when None, which lets tests with the same options share one client), and
    a read timeout in seconds."""
    config = {"retries": {"mode": "standard", "total_max_attempts": attempts}}
    if read_timeout is not None:
        config["read_timeout"] = read_timeout
    return {**base, "config_kwargs": config, **({} if retries is None else {"retries": retries})}


@pytest.fixture
def store(s3) -> ObjectStore:
    return ObjectStore.from_url(s3.url(s3.bucket(), "logs"), s3.storage_options)


@pytest.fixture
def segment(s3):
    """A bucket holding ``orders-0/00000000000000000000.log`` (DATA); its URL."""
    url = s3.url(s3.bucket(), "logs")
    ObjectStore.from_url(url, s3.storage_options).put("orders-0/00000000000000000000.log", DATA)
    return url


LOG = "orders-0/00000000000000000000.log"


# -- reads ---------------------------------------------------------------------------------------
@pytest.mark.parametrize("start,end", [(0, 1), (0, len(DATA)), (4096, 8192), (99_990, 100_000), (12_345, 12_346)])
def test_a_range_read_returns_exactly_the_bytes_of_the_range(s3, segment, start, end):
    assert ObjectStore.from_url(segment, s3.storage_options).read_range(LOG, start, end) == DATA[start:end]


def test_a_range_read_past_the_end_is_short_and_one_starting_past_it_empty(s3, segment):
    store = ObjectStore.from_url(segment, s3.storage_options)
    assert store.read_range(LOG, 99_000, 200_000) == DATA[99_000:]
    assert store.read_range(LOG, 100_000, 100_010) == b""
    assert store.read_range(LOG, 5, 5) == b""


def test_a_range_read_is_one_ranged_get(s3, segment):
    proxy = s3.faulty()
    store = ObjectStore.from_url(segment, proxy.storage_options)
    assert store.read_range(LOG, 1000, 2000) == DATA[1000:2000]
    assert [(r.method, r.range) for r in proxy.requests] == [("GET", "bytes=1000-1999")]


def test_a_whole_read_is_one_get(s3, segment):
    proxy = s3.faulty()
    assert ObjectStore.from_url(segment, proxy.storage_options).read(LOG) == DATA
    assert [r.method for r in proxy.requests] == ["GET"]


def test_size_and_exists_name_objects_not_prefixes(store):
    store.put("t-0/a.log", b"12345")
    assert store.size("t-0/a.log") == 5
    assert store.exists("t-0/a.log")
    assert not store.exists("t-0")
    assert not store.exists("t-0/b.log")


def test_list_is_recursive_under_a_string_prefix_with_sizes(store):
    for key, data in {"t-0/a.log": b"1", "t-0/sub/b.index": b"22", "t-1/c.log": b"333", "top": b"4444"}.items():
        store.put(key, data)
    assert store.list() == {"t-0/a.log": 1, "t-0/sub/b.index": 2, "t-1/c.log": 3, "top": 4}
    assert store.list("t-0/") == {"t-0/a.log": 1, "t-0/sub/b.index": 2}
    assert store.list("t-") == {"t-0/a.log": 1, "t-0/sub/b.index": 2, "t-1/c.log": 3}
    assert store.list("t-0/sub/b") == {"t-0/sub/b.index": 2}
    assert store.list("nothing/") == {}


def test_a_listing_is_one_request_per_thousand_objects(s3):
    url = s3.url(s3.bucket(), "logs")
    ObjectStore.from_url(url, s3.storage_options).put("t-0/a.log", b"1")
    proxy = s3.faulty()
    assert ObjectStore.from_url(url, proxy.storage_options).list("t-0/") == {"t-0/a.log": 1}
    assert [(r.method, r.path.split("?")[1].split("&")[:2]) for r in proxy.requests] == [
        ("GET", ["list-type=2", "prefix=logs/t-0/"])]


def test_list_is_not_cached(s3):
    url = s3.url(s3.bucket(), "logs")
    store = ObjectStore.from_url(url, s3.storage_options)
    store.put("t-0/a.log", b"1")
    assert store.list() == {"t-0/a.log": 1}
    ObjectStore.from_url(url, s3.storage_options).put("t-0/b.log", b"22")  # another writer
    s3.client.put_object(Bucket=url.split("/")[2], Key="logs/t-0/c.log", Body=b"333")  # and another client
    assert store.list() == {"t-0/a.log": 1, "t-0/b.log": 2, "t-0/c.log": 3}


# -- writes --------------------------------------------------------------------------------------
def test_put_replaces_an_object_and_delete_removes_it(store):
    store.put("t-0/a.log", b"old")
    store.put("t-0/a.log", b"new bytes")
    assert store.read("t-0/a.log") == b"new bytes"
    store.delete("t-0/a.log")
    assert not store.exists("t-0/a.log") and store.list() == {}
    store.delete("t-0/a.log")  # deleting a missing object is no error, as S3's DELETE


def test_put_file_uploads_a_local_file(store, tmp_path):
    (tmp_path / "seg.log").write_bytes(DATA)
    store.put_file("t-0/seg.log", tmp_path / "seg.log")
    assert store.read("t-0/seg.log") == DATA


def test_upload_dir_copies_a_tree_below_a_url(s3, tmp_path):
    (tmp_path / "orders-0").mkdir()
    (tmp_path / "orders-0" / "00000000000000000000.log").write_bytes(b"abc")
    (tmp_path / "orders-0" / "00000000000000000000.index").write_bytes(b"")
    url = s3.url(s3.bucket(), "backup")
    s3.upload_dir(tmp_path, url)
    assert ObjectStore.from_url(url, s3.storage_options).list() == {
        "orders-0/00000000000000000000.index": 0, "orders-0/00000000000000000000.log": 3}


def test_a_write_to_a_missing_bucket_is_a_storage_error_naming_the_object(s3):
    store = ObjectStore.from_url("s3://pylog-no-such-bucket/logs", s3.storage_options)
    with pytest.raises(StorageError, match="writing s3://pylog-no-such-bucket/logs/t-0/a.log failed") as e:
        store.put("t-0/a.log", b"x")
    assert not isinstance(e.value, RemoteObjectNotFoundError)


# -- faults: the library retries, then pylog names the object --------------------------------------
@pytest.mark.parametrize("reply", ["slowdown", "error"])
def test_throttling_and_5xx_are_retried_by_the_library_then_succeed(s3, segment, reply):
    proxy = s3.faulty(Fault(reply, times=1, method="GET"))
    store = ObjectStore.from_url(segment, _options(proxy.storage_options, attempts=2))
    assert store.read_range(LOG, 10, 20) == DATA[10:20]
    assert proxy.count("GET", answer=reply) == 1 and proxy.count("GET", answer="forwarded") == 1


def test_a_stall_past_the_read_timeout_is_retried_then_succeeds(s3, segment):
    proxy = s3.faulty(Fault("stall", times=1, method="GET"))
    store = ObjectStore.from_url(segment, _options(proxy.storage_options, attempts=2, retries=1, read_timeout=0.5))
    assert store.read_range(LOG, 10, 20) == DATA[10:20]
    assert proxy.count("GET", answer="stall") == 1 and proxy.count("GET", answer="forwarded") == 1


def test_persistent_5xx_gives_a_storage_error_naming_the_object_after_the_retries(s3, segment):
    proxy = s3.faulty(Fault("error", times=math.inf, method="GET"))
    store = ObjectStore.from_url(segment, _options(proxy.storage_options, attempts=2))
    with pytest.raises(StorageError, match=f"reading bytes \\[10, 20\\) of {segment}/{LOG} failed") as e:
        store.read_range(LOG, 10, 20)
    assert "InternalError" in str(e.value) or "internal error" in str(e.value)
    assert proxy.count("GET") == 2  # botocore's attempts, then the error


def test_persistent_throttling_costs_at_most_the_documented_requests(s3, segment):
    proxy = s3.faulty(Fault("slowdown", times=math.inf, method="GET"))
    store = ObjectStore.from_url(segment, _options(proxy.storage_options, attempts=2))  # s3fs's retries: 2
    with pytest.raises(StorageError, match=f"{segment}/{LOG}"):
        store.read(LOG)
    assert 2 < proxy.count("GET") <= 2 ** 2 * 2  # s3fs retries SlowDown too: retries² × attempts at most


def test_a_stall_on_every_attempt_gives_a_storage_error_naming_the_object(s3, segment):
    proxy = s3.faulty(Fault("stall", times=math.inf, method="GET"))
    store = ObjectStore.from_url(segment, _options(proxy.storage_options, attempts=2, retries=1, read_timeout=0.3))
    with pytest.raises(StorageError, match=f"reading bytes \\[0, 10\\) of {segment}/{LOG} failed: .*[Tt]imeout"):
        store.read_range(LOG, 0, 10)
    assert proxy.count("GET") == 2


def test_an_unreachable_endpoint_is_a_storage_error_naming_the_object(s3):
    options = {**_options(s3.storage_options, attempts=1),
               "client_kwargs": {"endpoint_url": "http://127.0.0.1:9", "region_name": "us-east-1"}}
    with pytest.raises(StorageError, match="reading s3://pylog-test-x/logs/a.log failed"):
        ObjectStore.from_url("s3://pylog-test-x/logs", options).read("a.log")


@pytest.mark.parametrize("call", ["read", "read_range", "size"])
def test_a_missing_object_is_remote_object_not_found_naming_the_key(s3, segment, call):
    store = ObjectStore.from_url(segment, s3.storage_options)
    args = {"read": (), "read_range": (0, 10), "size": ()}[call]
    with pytest.raises(RemoteObjectNotFoundError) as e:
        getattr(store, call)("orders-0/00000000000000000099.log", *args)
    assert isinstance(e.value, CorruptFileError)
    assert e.value.key == "orders-0/00000000000000000099.log"
    assert e.value.path == f"{segment}/orders-0/00000000000000000099.log" and e.value.path in str(e.value)


def test_the_library_defaults_apply_only_where_the_caller_is_silent(s3):
    default = ObjectStore.from_url(s3.url("pylog-test-x"), s3.storage_options).fs
    assert default.retries == 2
    assert default.config_kwargs == {"retries": {"mode": "standard", "total_max_attempts": 5},
                                     "connect_timeout": 5, "read_timeout": 15}
    own = ObjectStore.from_url(s3.url("pylog-test-x"), {**s3.storage_options, "retries": 7,
                                                          "config_kwargs": {"read_timeout": 60}}).fs
    assert own.retries == 7 and default.retries == 2
    assert own.config_kwargs == {"retries": {"mode": "standard", "total_max_attempts": 5},
                                 "connect_timeout": 5, "read_timeout": 60}


# -- credentials ---------------------------------------------------------------------------------
def _shown(e: BaseException) -> str:
    return str(e) + repr(e) + "".join(traceback.format_exception(e))


def test_credentials_never_show_in_errors_repr_or_logs(s3, segment, caplog):
    caplog.set_level(logging.DEBUG)
    bucket_path = segment.removeprefix("s3://")
    in_url = ObjectStore.from_url(f"s3://pylog-test-key:{SECRET_KEY}@{bucket_path}",
                                  {"client_kwargs": s3.storage_options["client_kwargs"]})
    in_options = ObjectStore.from_url(segment, s3.storage_options)
    assert in_url.read_range(LOG, 0, 4) == DATA[:4]  # the URL's credentials were used
    proxy = s3.faulty(Fault("error", times=math.inf))
    failing = ObjectStore.from_url(segment, _options(proxy.storage_options, attempts=1))
    errors = []
    for call in (lambda: in_url.read("missing.log"), lambda: in_options.size("missing.log"),
                 lambda: failing.read(LOG), lambda: failing.put("x.log", b"1")):
        with pytest.raises((StorageError, RemoteObjectNotFoundError)) as e:
            call()
        errors.append(e.value)
    with pytest.raises(InvalidArgumentError) as e:
        ObjectStore.from_url(f"gs://user:{SECRET_KEY}@bucket/x")
    errors.append(e.value)
    for shown in [*map(_shown, errors), repr(in_url), repr(in_options), in_url.url(LOG), caplog.text]:
        assert SECRET_KEY not in shown
    assert repr(in_url) == f"ObjectStore('{segment}')"


def test_redact_strips_userinfo_and_signed_query_values():
    assert redact("s3a://AKIA:se%2Fcret@bucket/logs") == "s3a://bucket/logs"
    assert redact("see az://c@acct/x and https://h/p?sv=1&sig=abc%3D&X-Amz-Signature=ff") == \
        "see az://c@acct/x and https://h/p?sv=1&sig=***&X-Amz-Signature=***"


# -- names and local stores ----------------------------------------------------------------------
def test_is_url_knows_object_storage_schemes_and_not_paths(tmp_path):
    assert all(is_url(u) for u in ["s3://b/k", "S3A://b", "gs://b", "gcs://b", "az://c/x", "abfs://c@a/x",
                                   "abfss://c@a/x", "file:///tmp/x", "memory://x"])
    assert not any(is_url(u) for u in ["/data/logs", "logs", tmp_path, "http://host/x", "C:\\logs"])


def test_s3a_urls_are_s3_urls(s3):
    assert ObjectStore.from_url("s3a://bucket/logs/", s3.storage_options).url("t-0/a.log") == \
        "s3://bucket/logs/t-0/a.log"


def test_an_unknown_scheme_is_an_invalid_argument():
    with pytest.raises(InvalidArgumentError, match="unknown object storage scheme ftp://"):
        ObjectStore.from_url("ftp://host/logs")


@pytest.mark.parametrize("url,options,message", [
    ("s3://", {}, "names no bucket"),
    ("s3://pylog-test-x/logs", {"no_such_option": 1}, "not accepted: .*no_such_option"),
])
def test_a_url_without_a_bucket_or_an_unknown_option_fails_the_open(s3, url, options, message):
    with pytest.raises(InvalidArgumentError, match=message):
        ObjectStore.from_url(url, {**s3.storage_options, **options})


def test_a_key_must_be_relative(store):
    with pytest.raises(InvalidArgumentError, match="must be relative"):
        store.read("/etc/passwd")


def test_a_backend_not_installed_names_its_extra():
    try:
        import gcsfs  # noqa: F401
        pytest.skip("gcsfs is installed here")
    except ImportError:
        pass
    with pytest.raises(MissingDependencyError, match=r"pylog-kafka\[gcs\]"):
        ObjectStore.from_url("gs://bucket/logs")


@pytest.mark.parametrize("as_url", [False, True], ids=["path", "file-url"])
def test_local_paths_and_file_urls_work_through_the_same_class(tmp_path, as_url):
    root = f"file://{tmp_path}/store" if as_url else str(tmp_path / "store")
    store = ObjectStore.from_url(root)
    store.put("t-0/a.log", DATA)
    store.put_file("t-0/sub/b.index", _local_file(tmp_path, b"xy"))
    assert store.read_range("t-0/a.log", 7, 70) == DATA[7:70]
    assert store.read("t-0/a.log") == DATA and store.size("t-0/a.log") == len(DATA)
    assert store.list("t-0/") == {"t-0/a.log": len(DATA), "t-0/sub/b.index": 2}
    assert store.exists("t-0/a.log") and not store.exists("t-0")
    assert store.url("t-0/a.log") == f"{root}/t-0/a.log"
    with pytest.raises(RemoteObjectNotFoundError, match="t-0/missing.log"):
        store.read_range("t-0/missing.log", 0, 1)
    store.delete("t-0/a.log")
    store.delete("t-0/a.log")
    assert store.list() == {"t-0/sub/b.index": 2}


def _local_file(tmp_path, data: bytes):
    path = tmp_path / "upload.bin"
    path.write_bytes(data)
    return path


def test_a_pickled_store_opens_its_own_client_with_the_same_options(s3, segment):
    store = ObjectStore.from_url(segment, {**s3.storage_options, "retries": 3})
    copy = pickle.loads(pickle.dumps(store))
    assert copy.url() == store.url() and copy.fs.retries == 3
    assert copy.read_range(LOG, 5, 9) == DATA[5:9]
