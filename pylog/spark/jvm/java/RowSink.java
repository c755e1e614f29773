package pylog.spark;

import java.nio.charset.StandardCharsets;

import org.apache.spark.sql.execution.vectorized.ConstantColumnVector;
import org.apache.spark.sql.execution.vectorized.OnHeapColumnVector;
import org.apache.spark.sql.execution.vectorized.WritableColumnVector;
import org.apache.spark.sql.types.DataTypes;
import org.apache.spark.sql.types.StructField;
import org.apache.spark.sql.types.StructType;
import org.apache.spark.sql.vectorized.ColumnVector;
import org.apache.spark.sql.vectorized.ColumnarBatch;
import org.apache.spark.unsafe.types.UTF8String;

/** The Spark columns of one task's output, only those the query needs. {@code topic} and
 *  {@code partition} are constants (a task reads one partition); the rest are filled row by row. */
final class RowSink {
    final WritableColumnVector key, value, offset, timestamp, timestampType, headers;
    /** Whether any column needs the records themselves (not just the batch headers). */
    final boolean needsRecords;
    private final ColumnarBatch batch;
    private int rows, headerRows;

    RowSink(StructType required, String topic, int partition) {
        ColumnVector[] vectors = new ColumnVector[required.fields().length];
        WritableColumnVector k = null, v = null, o = null, t = null, tt = null, h = null;
        for (int i = 0; i < vectors.length; i++) {
            StructField f = required.fields()[i];
            switch (f.name()) {
                case "topic": {
                    ConstantColumnVector c = new ConstantColumnVector(1, DataTypes.StringType);
                    c.setUtf8String(UTF8String.fromString(topic));
                    vectors[i] = c;
                    continue;
                }
                case "partition": {
                    ConstantColumnVector c = new ConstantColumnVector(1, DataTypes.IntegerType);
                    c.setInt(partition);
                    vectors[i] = c;
                    continue;
                }
                default:
            }
            WritableColumnVector w = new OnHeapColumnVector(4096, f.dataType());
            vectors[i] = w;
            switch (f.name()) {
                case "key": k = w; break;
                case "value": v = w; break;
                case "offset": o = w; break;
                case "timestamp": t = w; break;
                case "timestampType": tt = w; break;
                case "headers": h = w; break;
                default: throw new IllegalArgumentException("format pylog has no column " + f.name());
            }
        }
        key = k; value = v; offset = o; timestamp = t; timestampType = tt; headers = h;
        needsRecords = k != null || v != null || t != null || tt != null || h != null;
        batch = new ColumnarBatch(vectors);
    }

    int rows() { return rows; }

    /** Room for {@code more} rows; call before adding them. */
    void reserve(int more) {
        int want = rows + more;
        for (WritableColumnVector w : new WritableColumnVector[] {key, value, offset, timestamp, timestampType, headers}) {
            if (w != null) w.reserve(want);
        }
    }

    /** Adds one row; {@code row()} is its index. */
    int addRow() { return rows++; }

    /** Adds {@code n} rows with no column to fill (a count). */
    void addRows(int n) { rows += n; }

    void setOffset(int row, long off) { if (offset != null) offset.putLong(row, off); }

    void setTimestamp(int row, long ms, int type) {
        if (timestamp != null) timestamp.putLong(row, ms * 1000L);
        if (timestampType != null) timestampType.putInt(row, type);
    }

    static void putBytes(WritableColumnVector w, int row, byte[] buf, int off, int len) {
        if (w == null) return;
        if (len < 0) w.putNull(row);
        else w.putByteArray(row, buf, off, len);
    }

    /** Starts the headers of {@code row}; add each with {@link #addHeader}, then {@link #endHeaders}. */
    int beginHeaders() { return headerRows; }

    void addHeader(byte[] buf, int keyOff, int keyLen, int valueOff, int valueLen) {
        WritableColumnVector struct = headers.arrayData();
        int i = headerRows++;
        struct.reserve(headerRows);
        struct.getChild(0).reserve(headerRows);
        struct.getChild(1).reserve(headerRows);
        putBytes(struct.getChild(0), i, buf, keyOff, keyLen);
        putBytes(struct.getChild(1), i, buf, valueOff, valueLen);
    }

    void endHeaders(int row, int first) { headers.putArray(row, first, headerRows - first); }

    static byte[] utf8(String s) { return s.getBytes(StandardCharsets.UTF_8); }

    /** The filled rows as a batch; the vectors are reused after {@link #clear}. */
    ColumnarBatch batch() {
        batch.setNumRows(rows);
        return batch;
    }

    void clear() {
        for (WritableColumnVector w : new WritableColumnVector[] {key, value, offset, timestamp, timestampType, headers}) {
            if (w != null) w.reset();
        }
        rows = 0;
        headerRows = 0;
    }

    void close() { batch.close(); }
}
