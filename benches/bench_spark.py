"""Spark scan: 2M unique random 100 B values in 4 partitions, read by pylog's JVM reader, its
Python source, parquet over the same records and a no-decode Python source (``spark_floor.py``,
the least any Python data source costs for these rows), with three queries: ``count()``,
``sum(length(value))`` and a full-row scan (``write.format("noop")``).

Fair by construction: the readers take turns query by query (so a burst of load on the
shared machine hits all of them), every query builds its DataFrame anew (no cached plan or
relation), and each ratio is taken per round, reported as min / median / max over the rounds.
local[2] against local[1] is the JVM reader's median, in a second process."""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys

import pytest

from benches.conftest import record_figure, record_ratio
from pylog import LogManager

RECORDS = 2_000_000
ROUNDS = 5
QUERIES = ("count", "sum_length", "full_scan")
SCRIPT = r"""
import json, os, sys, time
os.environ["PYSPARK_PYTHON"] = sys.executable
from pyspark.sql import SparkSession
import pylog.spark
master, root, parquet, rows, rounds, readers = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4], int(sys.argv[5]), sys.argv[6].split(",")
spark = pylog.spark.session(SparkSession.builder.master(master).config("spark.ui.enabled", "false")
                            .config("spark.sql.shuffle.partitions", "4"))
spark.sparkContext.setLogLevel("ERROR")
from benches.spark_floor import FloorSource
spark.dataSource.register(FloorSource)
def frame(reader):
    if reader == "parquet":
        return spark.read.parquet(parquet)
    if reader == "floor":
        return spark.read.format("pylog-floor").option("rows", rows).load()
    return spark.read.format("pylog").option("reader", reader).load(root)
QUERIES = {"count": lambda df: df.count(),
           "sum_length": lambda df: df.selectExpr("sum(length(value))").collect(),
           "full_scan": lambda df: df.write.format("noop").mode("overwrite").save()}
if "parquet" in readers and not os.path.exists(parquet):
    frame("jvm").write.parquet(parquet)
for name in QUERIES:  # warm up: JIT, Python workers, file cache
    for reader in readers:
        QUERIES[name](frame(reader))
out = {name: {reader: [] for reader in readers} for name in QUERIES}
for _ in range(rounds):
    for name, query in QUERIES.items():
        for reader in readers:
            t = time.perf_counter()
            query(frame(reader))
            out[name][reader].append(time.perf_counter() - t)
print(json.dumps(out))
spark.stop()
"""


def _run(master, root, parquet, readers, rounds=ROUNDS) -> dict:
    env = {**os.environ, "PYTHONPATH": os.getcwd() + os.pathsep + os.environ.get("PYTHONPATH", "")}
    out = subprocess.run([sys.executable, "-c", SCRIPT, master, str(root), str(parquet), str(RECORDS), str(rounds),
                          ",".join(readers)], capture_output=True, text=True, env=env, timeout=3600)
    if out.returncode:
        raise RuntimeError(out.stderr[-3000:])
    return json.loads(out.stdout.strip().splitlines()[-1])


def _write(root):
    """RECORDS unique random values (no two alike: nothing for a codec or a cache to exploit)."""
    with LogManager(root) as m:
        t = m.create_topic("bench", 4)
        for p in range(4):
            log = t.log(p)
            for _ in range(RECORDS // 4 // 1000):
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
    two = benchmark.pedantic(lambda: _run("local[2]", root, parquet, ["jvm", "python", "parquet", "floor"]), rounds=1)
    one = _run("local[1]", root, parquet, ["jvm"])
    med = {q: {r: statistics.median(ts) for r, ts in two[q].items()} for q in QUERIES}
    for q in QUERIES:
        record_figure(f"spark {q} 2M x 100 B (median s, local[2])", **{r: round(t, 3) for r, t in med[q].items()},
                      jvm_local1=round(statistics.median(one[q]["jvm"]), 3))
        vs_parquet = _spread(two[q]["jvm"], two[q]["parquet"])
        record_ratio(f"spark {q}: JVM reader vs parquet (local[2])", vs_parquet[1], 1.0, _detail(vs_parquet))
        vs_floor = _spread(two[q]["python"], two[q]["floor"])
        record_ratio(f"spark {q}: Python source vs no-decode Python floor", vs_floor[1], 0.8, _detail(vs_floor))
        scaling = statistics.median(one[q]["jvm"]) / med[q]["jvm"]
        record_ratio(f"spark {q}: JVM reader local[2] vs local[1]", scaling, 1.6)
        vs_python = _spread(two[q]["jvm"], two[q]["python"])
        record_ratio(f"spark {q}: JVM reader vs Python source", vs_python[1], None, _detail(vs_python))
    print(json.dumps({"local2": two, "local1": one}))
