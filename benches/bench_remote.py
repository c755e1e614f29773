"""Object storage: a full scan of a remote segment vs a raw ranged GET of the same bytes,
random-offset reads (requests and latency), and what tiering costs an appending process.

The S3 endpoint is moto's server (tests/s3_endpoint.py's ``S3Endpoint``) started by this
module in a process of its own on loopback, so the server's Python does not share the
benchmark's interpreter lock, as a real store's work does not; the request counts come from
that module's proxy (no faults planned) in this process. pylog and its peer use the same
client (``ObjectStore``: s3fs over aiobotocore) and the same server in the same run.

``PYLOG_BENCH_REMOTE_MB`` sets the scanned segment's size (default 64 MiB of 1 KiB records).
``PYLOG_BENCH_S3_ENDPOINT=http://127.0.0.1:PORT`` uses another S3 server instead, started
with the tests' access key and secret (tests/s3_endpoint.py): S3Proxy from Maven Central
(``java -jar s3proxy-<v>-jar-with-dependencies.jar --properties F``, filesystem backend)
serves a ranged GET in time proportional to the range, where moto reads the whole object.
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

import pytest

from benches.conftest import best_of, record_figure, record_ratio
from pylog import Log, LogManager

pytest.importorskip("s3fs")
pytest.importorskip("moto.server")

from tests.s3_endpoint import S3Endpoint, _Proxy, _storage_options  # noqa: E402

SEGMENT_MB = int(os.environ.get("PYLOG_BENCH_REMOTE_MB", "64"))
RECORD_BYTES = 1024
RECORDS_PER_BATCH = 100

_SERVER = """
import sys
from tests.s3_endpoint import S3Endpoint
s3 = S3Endpoint()
print(s3.port, flush=True)
sys.stdin.read()  # until the benchmark closes the pipe
s3.stop()
"""


class ServerProcess(S3Endpoint):
    """``S3Endpoint`` whose moto server runs in a child process (its bucket, url,
    upload_dir and faulty work as the tests' do)."""

    def __init__(self):
        import boto3

        root = Path(__file__).resolve().parent.parent
        external = os.environ.get("PYLOG_BENCH_S3_ENDPOINT")  # another S3 server (S3Proxy) with the tests' keys
        self._child = None if external else subprocess.Popen(
            [sys.executable, "-c", _SERVER], cwd=root, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
            env={**os.environ, "PYTHONPATH": str(root)})
        self.port = int(external.rsplit(":", 1)[1]) if external else int(self._child.stdout.readline())
        self.endpoint_url = f"http://127.0.0.1:{self.port}"
        self.storage_options = _storage_options(self.endpoint_url)
        options = self.storage_options
        self.client = boto3.client("s3", endpoint_url=self.endpoint_url,
                                   region_name=options["client_kwargs"]["region_name"],
                                   aws_access_key_id=options["key"], aws_secret_access_key=options["secret"])
        self._names = iter(range(1 << 30))
        self._proxy: _Proxy | None = None

    def stop(self) -> None:
        if self._proxy is not None:
            self._proxy.stop()
        if self._child is not None:
            self._child.stdin.close()
            self._child.wait(timeout=60)


@pytest.fixture(scope="module")
def s3():
    server = ServerProcess()
    yield server
    server.stop()


def _fill(path: Path, mib: int, segment_bytes: int) -> None:
    values = [os.urandom(RECORD_BYTES) for _ in range(RECORDS_PER_BATCH)]
    with Log.open(path, config={"segment_bytes": segment_bytes}) as log:
        for _ in range(mib * 1024 // RECORDS_PER_BATCH):
            log.append(values)


@pytest.fixture(scope="module")
def segment_url(s3, tmp_path_factory):
    """One partition holding one segment of ``SEGMENT_MB`` MiB of 1 KiB records, in a bucket."""
    root = tmp_path_factory.mktemp("bench-remote")
    _fill(root / "scan-0", SEGMENT_MB, (SEGMENT_MB + 1) << 20)
    url = s3.url(s3.bucket(), "data")
    s3.upload_dir(root, url)
    return url + "/scan-0"


def test_full_scan_vs_raw_ranged_get(benchmark, s3, segment_url):
    with Log.open(segment_url, read_only=True, storage_options=s3.storage_options) as log:
        seg = log.segments[0]
        store, key, size = seg.file.source.store, seg.file.source.key, seg.size_bytes
        records = log.log_end_offset - log.log_start_offset

    def raw():
        assert len(store.read_range(key, 0, size)) == size

    def scan(read):
        # a log opened for each scan: its offset index and last batch are fetched in the scan
        with Log.open(segment_url, read_only=True, storage_options=s3.storage_options) as log:
            t = time.perf_counter()
            assert read(log) == records
            return time.perf_counter() - t

    def by_records(log):
        return sum(1 for _ in log.records())

    def by_arrow(log):
        return log.read_arrow().num_rows

    ranges = _scan_ranges(s3, segment_url, by_records)

    def same_ranges():  # the requests of a records() scan, one after the other, nothing decoded
        for path, start, end in ranges:
            store.fs.cat_file(path, start=start, end=end)

    benchmark.pedantic(raw, rounds=1)
    t_raw = t_ranges = t_records = t_arrow = float("inf")
    for _ in range(3):  # interleaved, so load on the machine falls on each alike
        t_raw = min(t_raw, best_of(raw, repeat=1))
        t_ranges = min(t_ranges, best_of(same_ranges, repeat=1))
        t_records = min(t_records, scan(by_records))
        t_arrow = min(t_arrow, scan(by_arrow))
    mib = size / 2**20
    detail = f"{mib:.0f} MiB segment of 1 KiB records"
    record_ratio("remote scan: records() vs raw ranged GET", t_raw / t_records, 0.8, detail)
    record_ratio("remote scan: read_arrow vs raw ranged GET", t_raw / t_arrow, 0.8, detail)
    record_ratio("remote scan: records() vs its own requests, undecoded", t_ranges / t_records, None,
                 f"{len(ranges)} GETs")
    store.put("small", b"x" * 65536)  # what one request costs the server, by the size of the object ranged
    t_small = best_of(lambda: store.read_range("small", 0, 65536), repeat=3)
    t_large = best_of(lambda: store.read_range(key, 0, 65536), repeat=3)
    record_figure("remote GET of 64 KiB", from_a_64_kib_object_ms=round(t_small * 1e3, 1),
                  **{f"from_the_{mib:.0f}_mib_segment_ms": round(t_large * 1e3, 1)})
    record_figure("remote scan", segment_mib=round(mib), raw_get_mib_per_s=round(mib / t_raw, 1),
                  its_requests_mib_per_s=round(mib / t_ranges, 1), records_mib_per_s=round(mib / t_records, 1),
                  read_arrow_mib_per_s=round(mib / t_arrow, 1), requests=len(ranges))


def _scan_ranges(s3, segment_url: str, read) -> list[tuple[str, int, int]]:
    """(path, start, end) of each GET a scan by ``read`` sends, seen at the proxy."""
    proxy = s3.faulty()
    with Log.open(segment_url, read_only=True, storage_options=proxy.storage_options) as log:
        proxy.clear()
        read(log)
    out = []
    for r in proxy.requests:
        if r.method == "GET" and r.range:
            first, last = r.range.removeprefix("bytes=").split("-")
            out.append((r.path.split("?")[0].lstrip("/"), int(first), int(last) + 1 if last else None))
    return out


def test_random_offset_reads_requests_and_latency(benchmark, s3, segment_url):
    import random

    rng = random.Random(31)
    proxy = s3.faulty()
    with Log.open(segment_url, read_only=True, storage_options=proxy.storage_options) as log:
        offsets = [rng.randrange(log.log_start_offset, log.log_end_offset) for _ in range(50)]
        log.read(offsets[0], 1 << 20)  # the first: the offset index
        counts = []
        for offset in offsets[1:]:
            proxy.clear()
            assert log.read(offset, 1 << 20).records()[0].offset <= offset
            counts.append(proxy.count())
    with Log.open(segment_url, read_only=True, storage_options=s3.storage_options) as log:
        log.read(offsets[0], 1 << 20)
        latencies = []
        for offset in offsets[1:]:
            t = time.perf_counter()
            log.read(offset, 1 << 20)
            latencies.append(time.perf_counter() - t)
        benchmark.pedantic(lambda: log.read(offsets[1], 1 << 20), rounds=1)
    record_ratio("remote random read: requests per read, worst", max(counts), 3, "after the first read",
                 higher_is_better=False)
    record_figure("remote random read (1 MiB fetch)", requests_mean=round(statistics.mean(counts), 2),
                  requests_max=max(counts), latency_ms_median=round(statistics.median(latencies) * 1e3, 1),
                  latency_ms_p90=round(sorted(latencies)[int(0.9 * len(latencies))] * 1e3, 1))


TIER_MB = int(os.environ.get("PYLOG_BENCH_TIER_MB", "64"))


def _append_rate(root: Path, remote_storage: str | None, storage_options: dict | None) -> tuple[float, int, int]:
    """Records/s of appending ``TIER_MB`` MiB of 1 KiB records in 100-record batches to a
    topic of 4 MiB segments, the segments closed, and how many of them were copied by the
    time the appends ended (the background task's rounds run every 100 ms)."""
    tiering = remote_storage is not None
    settings = {"remote_log_manager_task_interval_ms": 100, "remote_log_metadata_topic_num_partitions": 1}
    values = [os.urandom(RECORD_BYTES) for _ in range(RECORDS_PER_BATCH)]
    batches = TIER_MB * 1024 // RECORDS_PER_BATCH
    with LogManager(root, remote_storage=remote_storage, storage_options=storage_options, **settings) as m:
        m.create_topic("events", config={"segment_bytes": 4 << 20, "remote_storage_enable": tiering})
        log = m.log("events", 0)
        t = time.perf_counter()
        for _ in range(batches):
            log.append(values)
        elapsed = time.perf_counter() - t
        closed = len(log.segments) - 1
        copied = len(m._remote_log_manager.metadata.live_segments("events", 0)) if tiering else 0
    return batches * RECORDS_PER_BATCH / elapsed, closed, copied


def test_tiering_cost_to_an_appending_process(benchmark, s3, tmp_path):
    url = s3.url(s3.bucket(), "tiered")
    plain, tiered = [], []
    for i in range(3):  # interleaved, so load on the machine falls on each alike
        plain.append(_append_rate(tmp_path / f"plain-{i}", None, None))
        tiered.append(_append_rate(tmp_path / f"tiered-{i}", f"{url}/{i}", s3.storage_options))
    benchmark.pedantic(lambda: None, rounds=1)  # the figures are the rates above, timed by hand
    best_plain, best_tiered = max(plain), max(tiered)
    record_ratio("tiering: appends/s with tiering vs without", best_tiered[0] / best_plain[0], 0.9,
                 f"{TIER_MB} MiB of 1 KiB records, 4 MiB segments, a round every 100 ms")
    record_figure("tiering appends", plain_records_per_s=round(best_plain[0]),
                  tiered_records_per_s=round(best_tiered[0]),
                  segments_closed=best_tiered[1], copied_while_appending=best_tiered[2])
