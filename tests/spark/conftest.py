"""One local SparkSession (local[2]) for every Spark test: starting one costs ~10 s here."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
os.environ.setdefault("TZ", "UTC")


def _java_ok() -> str | None:
    java = shutil.which("java")
    if java is None:
        return "Java 17+ is not installed (PySpark 4 needs it)"
    out = subprocess.run([java, "-version"], capture_output=True, text=True).stderr
    try:
        major = int(out.split('"')[1].split(".")[0])
    except (IndexError, ValueError):
        return f"cannot read the Java version from {out!r}"
    return None if major >= 17 else f"Java {major} found; PySpark 4 needs 17+"


S3A_LIB = Path(__file__).resolve().parents[2] / "interop" / "spark-s3" / "target" / "lib"


def _s3a_jars(request) -> list[str]:
    """Hadoop's S3A jars (interop/spark-s3/prepare, run here when missing), only when a collected
    test uses the fixture ``s3a_spark`` (tests/spark/test_object_storage.py); [] when they cannot
    be had (that fixture then says why)."""
    if not any("s3a_spark" in getattr(item, "fixturenames", ()) for item in request.session.items):
        return []
    if not S3A_LIB.is_dir():
        subprocess.run([str(S3A_LIB.parents[1] / "prepare")], capture_output=True)
    return sorted(str(p) for p in S3A_LIB.glob("*.jar"))


@pytest.fixture(scope="session")
def spark(tmp_path_factory, request):
    pytest.importorskip("pyspark", reason="pyspark is not installed (extra 'spark')")
    pytest.importorskip("pyarrow", reason="pyarrow is not installed (extra 'spark')")
    problem = _java_ok()
    if problem:
        pytest.skip(problem)
    repo = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    os.environ["PYTHONPATH"] = repo + os.pathsep + os.environ.get("PYTHONPATH", "")
    from pyspark.sql import SparkSession
    from pylog.spark import jar_path
    jar = jar_path()  # None without a JDK: then only the Python source is tested
    session = (SparkSession.builder.master("local[2]").appName("pylog-tests")
               .config("spark.jars", ",".join(j for j in [jar, *_s3a_jars(request)] if j))
               .config("spark.ui.enabled", "false")
               .config("spark.ui.showConsoleProgress", "false")
               .config("spark.sql.shuffle.partitions", "2")
               .config("spark.default.parallelism", "2")
               .config("spark.sql.session.timeZone", "UTC")
               .config("spark.sql.warehouse.dir", str(tmp_path_factory.mktemp("warehouse")))
               .config("spark.driver.bindAddress", "127.0.0.1")
               .config("spark.driver.host", "127.0.0.1")
               .config("spark.executorEnv.PYTHONPATH", os.environ["PYTHONPATH"])
               .getOrCreate())
    session.sparkContext.setLogLevel("ERROR")
    from pylog.spark import register
    register(session)
    yield session
    session.stop()


@pytest.fixture(params=["jvm", "python"])
def reader(request, spark):
    """Each reader in turn, on the one session (the JVM one when pylog's jar could be built)."""
    from pylog.spark import jar_path
    if request.param == "jvm" and jar_path(build=False) is None:
        pytest.skip("no JVM reader: pylog's jar cannot be built here (no JDK)")
    return request.param


def read_with(spark, reader):
    """``spark.read.format("pylog")`` with the given reader."""
    return spark.read.format("pylog").option("reader", reader)
