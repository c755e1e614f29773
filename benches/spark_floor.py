"""A Python data source with pylog's schema that yields ready-made Arrow batches and
decodes nothing: the least any Python data source can cost Spark for the same rows.
The Spark benchmark reads it beside pylog to show which part of the time is pylog's."""

from __future__ import annotations

import os

import numpy as np
from pyspark.sql.datasource import DataSource, DataSourceReader, InputPartition

ROWS_PER_BATCH = 60_000


class FloorSource(DataSource):
    """``format("pylog-floor")``, options ``rows`` (total) and ``partitions``."""

    @classmethod
    def name(cls) -> str:
        return "pylog-floor"

    def schema(self):
        from pylog.spark.source import KAFKA_SCHEMA
        return KAFKA_SCHEMA

    def reader(self, schema):
        return FloorReader(int(self.options["rows"]), int(self.options.get("partitions", "4")))


class FloorReader(DataSourceReader):
    def __init__(self, rows: int, partitions: int):
        self.rows = rows
        self.parts = partitions

    def partitions(self):
        return [InputPartition(i) for i in range(self.parts)]

    def read(self, partition):
        import pyarrow as pa
        from pylog.record.columnar import arrow_schema
        total = self.rows // self.parts
        n = min(ROWS_PER_BATCH, total)
        values = pa.Array.from_buffers(pa.binary(), n, [None, pa.py_buffer(np.arange(0, 100 * (n + 1), 100, np.int32)),
                                                        pa.py_buffer(os.urandom(100 * n))])
        batch = pa.RecordBatch.from_arrays(
            [pa.nulls(n, pa.binary()), values, pa.array(["bench"] * n), pa.array(np.zeros(n, np.int32)),
             pa.array(np.arange(n, dtype=np.int64)), pa.array(np.arange(n) * 1000, pa.timestamp("us", tz="UTC")),
             pa.array(np.zeros(n, np.int32))], schema=arrow_schema(pa))
        for start in range(0, total, n):
            yield batch if total - start >= n else batch.slice(0, total - start)
