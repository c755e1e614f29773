"""Spark integration: ``spark.read.format("pylog")`` and friends (docs/spark.md).

Importing ``pylog.spark`` does not import pyspark; ``register`` and the classes in
``pylog.spark.source`` do.
"""


def register(spark) -> None:
    """Register the ``pylog`` format on a SparkSession (auto-discovery through the
    ``pyspark_pylog`` module also works once pylog is installed)."""
    from pylog.spark.source import PylogDataSource
    spark.dataSource.register(PylogDataSource)


__all__ = ["register"]
