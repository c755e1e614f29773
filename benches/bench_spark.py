"""Spark scan: unique random 100 B values in 4 partitions (2M records; 20M with
``PYLOG_BENCH_LARGE=1``), read by pylog's JVM reader, its Python source, parquet over the same
records and, at 2M, a no-decode Python source (``spark_floor.py``, the least any Python data
source costs for these rows), with three queries: ``count()``, ``sum(length(value))`` and a
full-row scan (``write.format("noop")``).

Fair by construction: two Spark drivers run side by side, one ``local[2]`` (every reader) and
one ``local[1]`` (the JVM reader and parquet), driven in lockstep so that only one query runs at a time;
the readers and the two drivers take turns query by query (so a burst of load on the shared
machine hits all of them), every query builds its DataFrame anew (no cached plan or relation),
and each ratio is taken per round, reported as min / median / max over the rounds. The
timings go to ``docs/perf/spark_scan_<n>M.json``; ``spark_plot.py`` draws them."""

from __future__ import annotations

import json
import math
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from benches.conftest import LARGE, record_figure, record_ratio
from pylog import LogManager

RECORDS = 20_000_000 if LARGE else 2_000_000
ROUNDS = 5
QUERIES = ("count", "sum_length", "full_scan")
#: the floor is the Python source's yardstick, measured at 2M only (at 20M it would cost as long as the rest)
READERS = ("jvm", "python", "parquet") + (() if LARGE else ("floor",))
#: the readers the ``local[1]`` driver also runs: the JVM reader, and parquet as the yardstick of
#: what Spark itself gains from a second core on the same query
SCALED = ("jvm", "parquet")
RESULTS = Path(__file__).resolve().parent.parent / "docs" / "perf" / f"spark_scan_{RECORDS // 1_000_000}M.json"
#: A driver: builds its session, then answers each stdin line "<query> <reader>" with "took <seconds>".
SCRIPT = r"""
import json, os, sys, time
os.environ["PYSPARK_PYTHON"] = sys.executable
from pyspark.sql import SparkSession
import pylog.spark
master, root, parquet, rows = sys.argv[1:5]
builder = (SparkSession.builder.master(master).config("spark.ui.enabled", "false")
           .config("spark.ui.showConsoleProgress", "false").config("spark.sql.shuffle.partitions", "4"))
for key, value in json.loads(sys.argv[5]).items():  # e.g. S3A's jars and settings
    builder = builder.config(key, value)
spark = pylog.spark.session(builder)
spark.sparkContext.setLogLevel("ERROR")
from benches.spark_floor import FloorSource
spark.dataSource.register(FloorSource)
def frame(reader):
    if reader == "parquet":
        return spark.read.parquet(parquet)
    if reader == "floor":
        return spark.read.format("pylog-floor").option("rows", rows).load()
    return spark.read.format("pylog").option("reader", reader).load(root)
def write_stream(df, out=root.rstrip("/") + "-writes"):  # the same rows as write_batch, as a stream
    import tempfile, uuid
    q = (spark.readStream.schema(df.schema).parquet(parquet).selectExpr("key", "value")
         .writeStream.format("pylog").option("topic", "s" + uuid.uuid4().hex[:12])
         .option("checkpointLocation", tempfile.mkdtemp()).trigger(availableNow=True).start(out))
    q.awaitTermination()
def write_batch(df, out=root.rstrip("/") + "-writes"):
    import uuid
    (df.selectExpr("key", "value").write.format("pylog").mode("append")
       .option("topic", "b" + uuid.uuid4().hex[:12]).save(out))
QUERIES = {"count": lambda df: df.count(),
           "write_batch": write_batch, "write_stream": write_stream,
           "sum_length": lambda df: df.selectExpr("sum(length(value))").collect(),
           "full_scan": lambda df: df.write.format("noop").mode("overwrite").save(),
           "parquet": lambda df: df.write.mode("overwrite").parquet(parquet)}
schemas = {}
def stream_available_now(reader):  # the whole backlog as a stream, from a new checkpoint, into the noop sink
    import shutil, tempfile
    if reader == "parquet":
        schema = schemas.setdefault("parquet", spark.read.parquet(parquet).schema)  # first (warm-up) round only
        df = spark.readStream.schema(schema).parquet(parquet)
    else:
        df = spark.readStream.format("pylog").option("reader", reader).option("startingOffsets", "earliest").load(root)
    ckpt = tempfile.mkdtemp()
    try:
        q = df.writeStream.format("noop").option("checkpointLocation", ckpt).trigger(availableNow=True).start()
        q.awaitTermination()
        assert sum(p["numInputRows"] for p in q.recentProgress) == int(rows), q.recentProgress
    finally:
        shutil.rmtree(ckpt, ignore_errors=True)
STREAMS = {"stream_available_now": stream_available_now}
def latencies(samples):  # append -> row in a pylog sink, for a query that keeps running
    import tempfile
    from pylog import Log, LogManager
    src, out = tempfile.mkdtemp(), tempfile.mkdtemp()
    with LogManager(src) as m:
        m.create_topic("lat", 1)
    q = (spark.readStream.format("pylog").option("startingOffsets", "earliest").load(src)
         .selectExpr("key", "value").writeStream.format("pylog").option("topic", "lat-out")
         .option("checkpointLocation", tempfile.mkdtemp()).trigger(processingTime="0 seconds").start(out))
    def seen():  # rows the sink committed so far
        if not os.path.isdir(os.path.join(out, "lat-out-0")):
            return 0
        with Log.open(os.path.join(out, "lat-out-0"), read_only=True) as sink:
            return sum(1 for _ in sink.records(isolation="committed"))
    took = []
    with LogManager(src) as m:
        log = m.topic("lat").log(0)
        for i in range(samples + 1):  # the first is the query's warm-up
            t = time.perf_counter()
            log.append([b"sample-%d" % i])
            while seen() <= i:
                time.sleep(0.002)
            took.append(time.perf_counter() - t)
    q.stop()
    print("latencies", json.dumps(took[1:]), flush=True)
for line in sys.stdin:
    query, reader = line.split()
    if query == "latency":
        latencies(int(reader))
        continue
    t = time.perf_counter()
    STREAMS[query](reader) if query in STREAMS else QUERIES[query](frame(reader))
    print("took", time.perf_counter() - t, flush=True)
spark.stop()
"""


class _Driver:
    """One Spark driver process, asked to time one query at a time."""

    def __init__(self, master: str, root, parquet, records: int = RECORDS, conf: dict | None = None):
        env = {**os.environ, "PYTHONPATH": os.getcwd() + os.pathsep + os.environ.get("PYTHONPATH", "")}
        self.stderr = tempfile.TemporaryFile("w+")
        self.proc = subprocess.Popen([sys.executable, "-c", SCRIPT, master, str(root), str(parquet), str(records),
                                      json.dumps(conf or {})],
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self.stderr,
                                     text=True, env=env)

    def time(self, query: str, reader: str) -> float:
        """Seconds the query took; raises with the driver's stderr if it failed."""
        self.proc.stdin.write(f"{query} {reader}\n")
        self.proc.stdin.flush()
        for line in self.proc.stdout:
            if line.startswith("took "):
                return float(line.split()[1])
        self.stderr.seek(0)
        raise RuntimeError(self.stderr.read()[-3000:])

    def latencies(self, samples: int) -> list[float]:
        """Seconds from each of ``samples`` appends to its row in a pylog sink, for one query
        that keeps running (pylog -> pylog, ``processingTime=0``)."""
        self.proc.stdin.write(f"latency {samples}\n")
        self.proc.stdin.flush()
        for line in self.proc.stdout:
            if line.startswith("latencies "):
                return json.loads(line.split(" ", 1)[1])
        self.stderr.seek(0)
        raise RuntimeError(self.stderr.read()[-3000:])

    def close(self) -> None:
        self.proc.stdin.close()
        self.proc.wait(timeout=300)
        self.stderr.close()


def _measure(root: Path, parquet: Path, rounds: int = ROUNDS) -> dict:
    """{"local2": {query: {reader: [s, ...]}}, "local1": {query: {reader in SCALED: [...]}}}, round by round."""
    two, one = _Driver("local[2]", root, parquet), _Driver("local[1]", root, parquet)
    try:
        two.time("parquet", "jvm")
        out = {"local2": {q: {r: [] for r in READERS} for q in QUERIES}, "local1": {q: {r: [] for r in SCALED} for q in QUERIES}}
        for n in range(rounds + 1):  # round 0 warms up: JIT, Python workers, file cache
            for q in QUERIES:
                for reader in READERS:
                    t = two.time(q, reader)
                    if n:
                        out["local2"][q][reader].append(t)
                    if reader in SCALED:
                        t = one.time(q, reader)
                        if n:
                            out["local1"][q][reader].append(t)
        return out
    finally:
        two.close()
        one.close()


def _write(root, records: int = RECORDS):
    """``records`` unique random values (no two alike: nothing for a codec or a cache to exploit)."""
    with LogManager(root) as m:
        t = m.create_topic("bench", 4)
        for p in range(4):
            log = t.log(p)
            for _ in range(records // 4 // 1000):
                blob = os.urandom(100 * 1000)
                log.append([blob[i:i + 100] for i in range(0, len(blob), 100)])


def _spread(fast: list, slow: list) -> tuple[float, float, float]:
    """min / median / max over rounds of slow[i] / fast[i] (> 1: ``fast`` is faster)."""
    ratios = [s / f for f, s in zip(fast, slow)]
    return min(ratios), statistics.median(ratios), max(ratios)


def _detail(spread) -> str:
    return "min %.2f / median %.2f / max %.2f over %d rounds" % (*spread, ROUNDS)


def test_spark_scan_vs_parquet_floor_and_scaling(benchmark, tmp_path):
    pytest.importorskip("pyspark")
    from pylog.spark import jar_path
    if jar_path() is None:
        pytest.skip("no JVM reader (no JDK): only the Python source could be measured")
    root, parquet = tmp_path / "root", tmp_path / "bench.parquet"
    _write(root)
    out = benchmark.pedantic(lambda: _measure(root, parquet), rounds=1)
    two, one = out["local2"], out["local1"]
    size = f"{RECORDS // 1_000_000}M"
    for q in QUERIES:
        record_figure(f"spark {q} {size} x 100 B (median s, local[2])",
                      **{r: round(statistics.median(ts), 3) for r, ts in two[q].items()},
                      **{f"{r}_local1": round(statistics.median(ts), 3) for r, ts in one[q].items()})
        vs_parquet = _spread(two[q]["jvm"], two[q]["parquet"])
        record_ratio(f"spark {q} {size}: JVM reader vs parquet (local[2])", vs_parquet[1], 1.0, _detail(vs_parquet))
        if "floor" in two[q]:
            vs_floor = _spread(two[q]["python"], two[q]["floor"])
            record_ratio(f"spark {q} {size}: Python source vs no-decode Python floor", vs_floor[1], 0.8,
                         _detail(vs_floor))
        scaling = _spread(two[q]["jvm"], one[q]["jvm"])
        record_ratio(f"spark {q} {size}: JVM reader local[2] vs local[1]", scaling[1], 1.6, _detail(scaling))
        parquet_scaling = _spread(two[q]["parquet"], one[q]["parquet"])
        record_ratio(f"spark {q} {size}: parquet local[2] vs local[1] (yardstick)", parquet_scaling[1], None,
                     _detail(parquet_scaling))
        vs_python = _spread(two[q]["jvm"], two[q]["python"])
        record_ratio(f"spark {q} {size}: JVM reader vs Python source", vs_python[1], None, _detail(vs_python))
    RESULTS.write_text(json.dumps({"records": RECORDS, "rounds": ROUNDS, **out}, indent=1) + "\n")


#: records of the object-storage scan (``PYLOG_BENCH_S3_RECORDS``), and its rounds
S3_RECORDS = int(os.environ.get("PYLOG_BENCH_S3_RECORDS", "400000"))
S3_ROUNDS = 3
S3_JARS = Path(__file__).resolve().parent.parent / "interop" / "spark-s3" / "target" / "lib"


def test_spark_scan_on_object_storage(benchmark, tmp_path):
    """The same records in a bucket of the loopback S3 endpoint (tests/s3_endpoint.py), read
    over S3A: the JVM reader vs ``spark.read.parquet`` of the same records in the same
    bucket, the Python source (through the session's S3A settings) vs the no-decode floor;
    one ``local[2]`` driver, readers taking turns query by query, ratios per round."""
    pytest.importorskip("pyspark")
    from pylog.spark import jar_path
    from tests.s3_endpoint import S3Endpoint, missing_packages
    if jar_path() is None or missing_packages() or not S3_JARS.is_dir():
        pytest.skip("needs the JVM reader, s3fs and moto, and interop/spark-s3/prepare's jars")
    s3 = S3Endpoint()
    try:
        root = tmp_path / "root"
        _write(root, S3_RECORDS)
        url = s3.url(s3.bucket(), "logs")
        s3.upload_dir(root, url)
        url, parquet = "s3a" + url[2:], "s3a" + s3.url(s3.bucket(), "bench.parquet")[2:]
        conf = {**s3.hadoop_conf, "spark.jars": ",".join(str(j) for j in sorted(S3_JARS.glob("*.jar")))}
        driver = _Driver("local[2]", url, parquet, S3_RECORDS, conf)
        readers = ("jvm", "python", "parquet", "floor")
        try:
            driver.time("parquet", "jvm")
            times = {q: {r: [] for r in readers} for q in QUERIES}

            def measure():
                for n in range(S3_ROUNDS + 1):  # round 0 warms up
                    for q in QUERIES:
                        for reader in readers:
                            t = driver.time(q, reader)
                            if n:
                                times[q][reader].append(t)
            benchmark.pedantic(measure, rounds=1)
        finally:
            driver.close()
    finally:
        s3.stop()
    size = f"{S3_RECORDS // 1000}k"
    for q in QUERIES:
        record_figure(f"spark {q} {size} x 100 B on S3 (median s, local[2])",
                      **{r: round(statistics.median(ts), 3) for r, ts in times[q].items()})
        vs_parquet = _spread(times[q]["jvm"], times[q]["parquet"])
        detail = "min %.2f / median %.2f / max %.2f over %d rounds" % (*vs_parquet, S3_ROUNDS)
        record_ratio(f"spark {q} {size} on S3: JVM reader vs parquet", vs_parquet[1],
                     None if q == "count" else 1.0, detail)
        vs_floor = _spread(times[q]["python"], times[q]["floor"])
        detail = "min %.2f / median %.2f / max %.2f over %d rounds" % (*vs_floor, S3_ROUNDS)
        record_ratio(f"spark {q} {size} on S3: Python source vs no-decode Python floor", vs_floor[1], 0.8, detail)


#: rows of the write benchmark (``PYLOG_BENCH_WRITE_RECORDS``), and its rounds
WRITE_RECORDS = int(os.environ.get("PYLOG_BENCH_WRITE_RECORDS", "400000"))
WRITE_ROUNDS = 3


def test_spark_stream_write_vs_batch_write(benchmark, tmp_path):
    """``writeStream.format("pylog")`` (exactly once: a transaction per task) of the rows of
    a parquet file, read as a file stream with ``Trigger.AvailableNow``, against
    ``df.write.format("pylog")`` of the same rows (staged by the tasks, appended by the
    driver's commit), in turns on one ``local[2]`` driver (round 0 warms up)."""
    pytest.importorskip("pyspark")
    root, parquet = tmp_path / "root", tmp_path / "bench.parquet"
    _write(root, WRITE_RECORDS)
    driver = _Driver("local[2]", root, parquet, WRITE_RECORDS)

    def measure():
        driver.time("parquet", "python")
        out = {"write_batch": [], "write_stream": []}
        for n in range(WRITE_ROUNDS + 1):
            for query in out:
                t = driver.time(query, "parquet")
                if n:
                    out[query].append(t)
        return out

    try:
        out = benchmark.pedantic(measure, rounds=1)
    finally:
        driver.close()
    size = f"{WRITE_RECORDS // 1000}k"
    record_figure(f"spark write {size} x 100 B (median s, local[2])",
                  **{q: round(statistics.median(ts), 3) for q, ts in out.items()})
    spread = _spread(out["write_stream"], out["write_batch"])
    record_ratio(f"spark write {size}: writeStream (exactly once) vs df.write", spread[1], 0.8,
                 "min %.2f / median %.2f / max %.2f over %d rounds" % (*spread, WRITE_ROUNDS))


#: records of the streaming benchmark's backlog, and its rounds
STREAM_RECORDS = 2_000_000
STREAM_ROUNDS = 5
#: the stream readers: pylog's JVM stream, its Python source, and Spark's parquet file-stream source
STREAM_READERS = ("jvm", "python", "parquet")


def test_spark_stream_available_now_backlog(benchmark, tmp_path):
    """``readStream`` of a 2M-record backlog with ``Trigger.AvailableNow`` into the noop sink,
    each run from a new checkpoint: pylog's JVM stream, its Python source (``reader=python``)
    and ``spark.readStream.parquet`` over the same records, in turns on one ``local[2]``
    driver (round 0 warms up), ratios per round. A run's time is the query's: its start,
    planning, the micro-batch (one: no admission limit) and its checkpoint writes."""
    pytest.importorskip("pyspark")
    from pylog.spark import jar_path
    if jar_path() is None:
        pytest.skip("no JVM reader (no JDK): only the Python source could be measured")
    root, parquet = tmp_path / "root", tmp_path / "bench.parquet"
    _write(root, STREAM_RECORDS)
    driver = _Driver("local[2]", root, parquet, STREAM_RECORDS)

    def measure():
        driver.time("parquet", "jvm")
        out = {r: [] for r in STREAM_READERS}
        for n in range(STREAM_ROUNDS + 1):
            for reader in STREAM_READERS:
                t = driver.time("stream_available_now", reader)
                if n:
                    out[reader].append(t)
        return out

    try:
        out = benchmark.pedantic(measure, rounds=1)
    finally:
        driver.close()
    size = f"{STREAM_RECORDS // 1_000_000}M"
    record_figure(f"spark stream AvailableNow {size} x 100 B backlog (median s, local[2])",
                  **{r: round(statistics.median(ts), 3) for r, ts in out.items()})
    for other, name, goal in (("python", "Python source", 3.0), ("parquet", "parquet file stream", 1.0)):
        spread = _spread(out["jvm"], out[other])
        record_ratio(f"spark stream AvailableNow {size}: JVM stream vs {name}", spread[1], goal,
                     "min %.2f / median %.2f / max %.2f over %d rounds" % (*spread, STREAM_ROUNDS))
#: appends timed by the latency benchmark (``PYLOG_BENCH_LATENCY_SAMPLES``)
LATENCY_SAMPLES = int(os.environ.get("PYLOG_BENCH_LATENCY_SAMPLES", "40"))


def test_spark_stream_end_to_end_latency(benchmark, tmp_path):
    """One record appended at a time to a topic that a running query (Python source ->
    ``writeStream.format("pylog")``, exactly once, ``processingTime=0``) copies to another
    log dir: seconds from the append until the row is readable (``read_committed``) in the
    output, p50 and p99 over the samples (the first, the query's warm-up, left out). A
    figure, not a ratio: the floor is a micro-batch's fixed cost in Spark (planning in a
    Python worker, a task, a commit)."""
    pytest.importorskip("pyspark")
    root, parquet = tmp_path / "root", tmp_path / "unused.parquet"
    root.mkdir()
    driver = _Driver("local[2]", root, parquet, 0)
    try:
        took = benchmark.pedantic(lambda: driver.latencies(LATENCY_SAMPLES), rounds=1)
    finally:
        driver.close()
    ordered = sorted(took)
    p50, p99 = ordered[len(ordered) // 2], ordered[min(len(ordered) - 1, math.ceil(len(ordered) * 0.99) - 1)]
    record_figure(f"spark stream end-to-end latency, append -> pylog sink ({len(took)} samples, local[2])",
                  p50_s=round(p50, 3), p99_s=round(p99, 3), max_s=round(ordered[-1], 3))
