"""Spark scan: 2M records of 100 B in 4 partitions, count() and sum(length(value)), against
spark.read.parquet over the same records; and local[2] against local[1]. A third reader,
a Python data source of the same schema that yields ready-made Arrow batches
(``spark_floor.py``), shows the least any Python data source costs for these rows."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from benches.conftest import record_figure, record_ratio
from pylog import LogManager

RECORDS = 2_000_000
SCRIPT = r"""
import os, sys, time, json
os.environ["PYSPARK_PYTHON"] = sys.executable
from pyspark.sql import SparkSession
master, root, parquet = sys.argv[1:4]
spark = (SparkSession.builder.master(master).config("spark.ui.enabled", "false")
         .config("spark.sql.shuffle.partitions", "4").getOrCreate())
spark.sparkContext.setLogLevel("ERROR")
from pylog.spark import register
register(spark)
from benches.spark_floor import FloorSource
spark.dataSource.register(FloorSource)
def timed(df):
    best = 1e9
    for _ in range(3):
        t = time.perf_counter(); df.count(); df.selectExpr("sum(length(value))").collect()
        best = min(best, time.perf_counter() - t)
    return best
pylog = timed(spark.read.format("pylog").load(root))
if not os.path.exists(parquet):
    spark.read.format("pylog").load(root).select("key", "value", "topic", "partition", "offset", "timestamp",
        "timestampType").write.parquet(parquet)
pq = timed(spark.read.parquet(parquet))
floor = timed(spark.read.format("pylog-floor").option("rows", sys.argv[4]).load())
print(json.dumps({"pylog": pylog, "parquet": pq, "floor": floor}))
spark.stop()
"""


def _run(master, root, parquet):
    import json
    env = {**os.environ, "PYTHONPATH": os.getcwd() + os.pathsep + os.environ.get("PYTHONPATH", "")}
    out = subprocess.run([sys.executable, "-c", SCRIPT, master, str(root), str(parquet), str(RECORDS)],
                         capture_output=True,
                         text=True, env=env, timeout=900)
    if out.returncode:
        raise RuntimeError(out.stderr[-3000:])
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_spark_scan_vs_parquet_and_scaling(benchmark, tmp_path):
    pytest.importorskip("pyspark")
    root = tmp_path / "root"
    values = [os.urandom(100) for _ in range(1000)]
    with LogManager(root) as m:
        t = m.create_topic("bench", 4)
        for p in range(4):
            log = t.log(p)
            for _ in range(RECORDS // 4 // 1000):
                log.append(values)
    parquet = tmp_path / "bench.parquet"
    two = benchmark.pedantic(lambda: _run("local[2]", root, parquet), rounds=1)
    one = _run("local[1]", root, parquet)
    record_figure("spark scan 2M x 100 B", pylog_s_local2=round(two["pylog"], 2), parquet_s_local2=round(two["parquet"], 2),
                  floor_s_local2=round(two["floor"], 2), pylog_s_local1=round(one["pylog"], 2))
    record_ratio("spark scan: pylog throughput vs parquet (local[2])", two["parquet"] / two["pylog"], 0.5)
    record_ratio("spark scan: local[2] vs local[1]", one["pylog"] / two["pylog"], 1.6)
    record_ratio("spark scan: ready-made Arrow source vs parquet (the ceiling of any Python source)",
                 two["parquet"] / two["floor"], None)
    record_ratio("spark scan: pylog vs ready-made Arrow source", two["floor"] / two["pylog"], None)
