"""Spark integration: ``spark.read.format("pylog")`` and friends (docs/spark.md).

Importing ``pylog.spark`` does not import pyspark; ``register``, ``session`` and the classes
in ``pylog.spark.source`` do. Batch reads go to the JVM reader when pylog's jar is on the
session's classpath (``session()`` puts it there), else to the Python source.
"""

import os
import sys

from pylog.errors import InvalidArgumentError, InvalidConfigError
from pylog.spark import jvm

#: SQL confs the JVM reader reads to start its Python planner
PYTHON_CONF, PYTHON_PATH_CONF = "spark.pylog.python", "spark.pylog.pythonPath"


def jar_path(*, build: bool = True):
    """Path of pylog's Spark jar for ``spark.jars``: the one the install compiled, else one
    built on first use; None without pyspark, or with neither that jar nor a JDK
    (see :func:`pylog.spark.jvm.jar_path`)."""
    return jvm.jar_path(build=build)


def register(spark) -> None:
    """Register the ``pylog`` format on a SparkSession (auto-discovery through the
    ``pyspark_pylog`` module also works once pylog is installed), and tell the JVM reader,
    if its jar is loaded, which Python plans its queries: this interpreter and this pylog.
    Raises :class:`InvalidConfigError` when Spark already holds a JVM source ``pylog`` (the
    jar) but found no Python one: its Python cannot import pylog."""
    from pylog.spark.source import PylogDataSource
    spark.conf.set(PYTHON_CONF, sys.executable)
    spark.conf.set(PYTHON_PATH_CONF, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
    try:
        spark.dataSource.register(PylogDataSource)
    except Exception as e:
        if "DATA_SOURCE_ALREADY_EXISTS" not in str(e):
            raise
        python = os.environ.get("PYSPARK_DRIVER_PYTHON") or os.environ.get("PYSPARK_PYTHON") or "python3 (on PATH)"
        raise InvalidConfigError(
            f"Spark cannot register the Python half of format('pylog'): its JVM started with {python} as its "
            f"Python, which cannot import pylog, not with this interpreter ({sys.executable}). Create the session "
            f"with pylog.spark.session() before any other, or set PYSPARK_PYTHON={sys.executable} before Spark "
            f"starts") from None


def session(builder=None):
    """``builder.getOrCreate()`` with pylog's jar added to ``spark.jars`` (when it can be
    built) and the format registered. ``builder`` is a ``SparkSession.Builder``, a master
    URL (``"local[2]"``: ``SparkSession.builder.master("local[2]")``) or None (Spark's
    default builder). A session that already runs keeps its classpath and its Python.

    Spark runs its Python workers, and looks for Python data sources, with ``$PYSPARK_PYTHON``,
    else whatever ``python3`` is on ``PATH``: from ``venv/bin/python app.py`` without an
    activated venv (cron, systemd, an IDE) that is another Python, without pylog. So unless
    ``$PYSPARK_PYTHON`` is set, this sets it to this interpreter before Spark starts."""
    from pyspark.sql import SparkSession
    if isinstance(builder, str):
        builder = SparkSession.builder.master(builder)
    elif builder is None:
        builder = SparkSession.builder
    elif not isinstance(builder, SparkSession.Builder):
        raise InvalidArgumentError(f"session() takes a SparkSession.Builder or a master URL such as 'local[2]', "
                                   f"not {type(builder).__name__}")
    jar = jar_path()
    if jar is not None:
        jars = [j for j in builder._options.get("spark.jars", "").split(",") if j]
        builder = builder.config("spark.jars", ",".join(jars + [jar]))
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)  # not the python3 on PATH: see the docstring
    spark = builder.getOrCreate()
    register(spark)
    return spark


__all__ = ["jar_path", "register", "session"]
