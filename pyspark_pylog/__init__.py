"""Spark discovers data sources in top-level ``pyspark_*`` modules with a ``DefaultSource``:
this one makes ``spark.read.format("pylog")`` work after ``pip install pylog[spark]``."""

from pylog.spark.source import PylogDataSource as DefaultSource

__all__ = ["DefaultSource"]
