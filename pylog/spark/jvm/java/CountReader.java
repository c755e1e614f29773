package pylog.spark;

import java.io.IOException;

import org.apache.spark.sql.connector.read.PartitionReader;
import org.apache.spark.sql.execution.vectorized.OnHeapColumnVector;
import org.apache.spark.sql.types.DataTypes;
import org.apache.spark.sql.vectorized.ColumnVector;
import org.apache.spark.sql.vectorized.ColumnarBatch;

/** A pushed-down {@code count()}: one row holding the number of rows the task's
 *  {@link RangeReader} (reading no column) yields, in each of {@code columns} columns. */
final class CountReader implements PartitionReader<ColumnarBatch> {
    private final RangeReader rows;
    private final int columns;
    private ColumnarBatch batch;

    CountReader(RangeReader rows, int columns) {
        this.rows = rows;
        this.columns = columns;
    }

    @Override
    public boolean next() throws IOException {
        if (batch != null) return false;
        long count = 0;
        while (rows.next()) count += rows.get().numRows();
        ColumnVector[] vectors = new ColumnVector[columns];
        for (int i = 0; i < columns; i++) {
            OnHeapColumnVector v = new OnHeapColumnVector(1, DataTypes.LongType);
            v.putLong(0, count);
            vectors[i] = v;
        }
        batch = new ColumnarBatch(vectors, 1);
        return true;
    }

    @Override
    public ColumnarBatch get() {
        return batch;
    }

    @Override
    public void close() throws IOException {
        rows.close();
        if (batch != null) batch.close();
    }
}
