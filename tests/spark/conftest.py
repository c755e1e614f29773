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


INTEROP = Path(__file__).resolve().parents[2] / "interop"
#: jars a fixture needs on the one session's classpath -> the interop project that resolves them
#: from Maven Central (its ``prepare``, run here when its target/lib is missing)
FIXTURE_JARS = {"s3a_spark": INTEROP / "spark-s3",  # Hadoop's S3A (test_object_storage.py)
                "kafka_source_spark": INTEROP / "spark-kafka"}  # Spark's Kafka source (test_kafka_source.py)


def _interop_jars(request) -> list[str]:
    """The jars of each ``FIXTURE_JARS`` project whose fixture a collected test uses; none of
    a project whose jars cannot be had (its fixture then says why)."""
    used = set().union(*(getattr(item, "fixturenames", ()) for item in request.session.items))
    jars = []
    for fixture, project in FIXTURE_JARS.items():
        if fixture not in used:
            continue
        lib = project / "target" / "lib"
        if not lib.is_dir():
            subprocess.run([str(project / "prepare")], capture_output=True)
        jars += sorted(str(p) for p in lib.glob("*.jar"))
    return jars


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
               .config("spark.jars", ",".join(j for j in [jar, *_interop_jars(request)] if j))
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
