"""Users learn which Spark reader serves them: ``pylog --version`` says which queries the
JVM reader takes and which the Python source, and a batch read that the Python source
serves only because the jar is missing from the session warns that a faster reader exists
(tests/spark/test_discovery.py checks, on a plain SparkSession, that it warns once)."""

from __future__ import annotations

import warnings

import pytest

from pylog import Log, Record
from pylog.cli.main import version_text

pytestmark = pytest.mark.spark


def test_version_says_when_each_spark_reader_is_used():
    lines = version_text().splitlines()
    jvm, python = lines[3], lines[4]
    assert jvm.startswith("Spark JVM reader: ") and python.startswith("Spark Python source: "), lines
    if jvm.startswith("Spark JVM reader: off"):
        assert python == "Spark Python source: every query"
    else:
        assert "pylog.spark.session()" in jvm and "spark.jars=pylog.spark.jar_path()" in jvm and "streams" in jvm, jvm
        assert "plain SparkSession" in python and "streams" in python and "writes" in python, python


@pytest.fixture
def log_dir(tmp_path):
    with Log.open(tmp_path / "t-0") as log:
        log.append([Record(b"v")])
    return str(tmp_path)


def test_a_read_the_python_source_serves_for_want_of_the_jar_says_how_to_get_the_jvm_reader(log_dir):
    pytest.importorskip("pyspark", reason="pyspark is not installed (extra 'spark')")
    from pylog.spark.source import KAFKA_SCHEMA, PylogDataSource, SlowReaderWarning
    with pytest.warns(SlowReaderWarning, match=r"3-12x faster.*pylog\.spark\.session\(\).*spark\.jars"):
        PylogDataSource({"path": log_dir}).reader(KAFKA_SCHEMA)


def test_a_read_that_asks_for_the_python_source_does_not_warn(log_dir):
    pytest.importorskip("pyspark", reason="pyspark is not installed (extra 'spark')")
    from pylog.spark.source import KAFKA_SCHEMA, PylogDataSource
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        PylogDataSource({"path": log_dir, "reader": "python"}).reader(KAFKA_SCHEMA)
