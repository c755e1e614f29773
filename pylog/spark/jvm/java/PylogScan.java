package pylog.spark;

import java.io.IOException;
import java.io.UncheckedIOException;
import java.sql.Timestamp;
import java.time.Instant;
import java.util.ArrayList;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.function.Supplier;

import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ObjectNode;
import org.apache.hadoop.conf.Configuration;
import org.apache.spark.sql.catalyst.InternalRow;
import org.apache.spark.sql.connector.expressions.NamedReference;
import org.apache.spark.sql.connector.expressions.aggregate.AggregateFunc;
import org.apache.spark.sql.connector.expressions.aggregate.Aggregation;
import org.apache.spark.sql.connector.expressions.aggregate.Count;
import org.apache.spark.sql.connector.expressions.aggregate.CountStar;
import org.apache.spark.sql.connector.read.Batch;
import org.apache.spark.sql.connector.read.InputPartition;
import org.apache.spark.sql.connector.read.PartitionReader;
import org.apache.spark.sql.connector.read.PartitionReaderFactory;
import org.apache.spark.sql.connector.read.Scan;
import org.apache.spark.sql.connector.read.ScanBuilder;
import org.apache.spark.sql.connector.read.SupportsPushDownAggregates;
import org.apache.spark.sql.connector.read.SupportsPushDownFilters;
import org.apache.spark.sql.connector.read.SupportsPushDownRequiredColumns;
import org.apache.spark.sql.connector.read.streaming.MicroBatchStream;
import org.apache.spark.sql.sources.EqualTo;
import org.apache.spark.sql.sources.Filter;
import org.apache.spark.sql.sources.GreaterThan;
import org.apache.spark.sql.sources.GreaterThanOrEqual;
import org.apache.spark.sql.sources.In;
import org.apache.spark.sql.sources.LessThan;
import org.apache.spark.sql.sources.LessThanOrEqual;
import org.apache.spark.sql.types.DataTypes;
import org.apache.spark.sql.types.StructType;
import org.apache.spark.sql.util.CaseInsensitiveStringMap;
import org.apache.spark.sql.vectorized.ColumnarBatch;

/** A batch scan of pylog partition dirs: pruned columns, pushed bounds, planned in Python.
 *  Filters on topic, partition, offset and a lower bound on timestamp narrow the ranges (the
 *  same rules as the Python source: docs/spark.md); every filter is still evaluated by Spark.
 *  A {@code count()} of the whole scan is pushed down: each task counts its range from batch
 *  headers (CRCs checked, aborted and control batches skipped, as the scan would) and
 *  returns one row, which Spark sums. A stream ({@code readStream}) is a {@link PylogStream}. */
final class PylogScan implements ScanBuilder, SupportsPushDownRequiredColumns, SupportsPushDownFilters,
        SupportsPushDownAggregates, Scan, Batch {
    /** Columns that are never null: a COUNT of one is the count of rows. */
    private static final Set<String> NEVER_NULL = Set.of("topic", "partition", "offset", "timestamp", "timestampType");
    private static final ObjectMapper JSON = new ObjectMapper();
    private final Map<String, String> options;
    private final Supplier<Scan> streaming;
    private StructType required;
    private final List<Filter> pushed = new ArrayList<>();
    private final Set<String> topics = new LinkedHashSet<>();
    private final Set<Integer> partitions = new LinkedHashSet<>();
    private Long offsetMin, offsetMax, timestampMinMs;
    private InputPartition[] planned;
    /** How many COUNT columns the scan answers (0: it returns records). */
    private int pushedCounts;

    PylogScan(StructType schema, Map<String, String> options, Supplier<Scan> streaming) {
        this.required = schema;
        this.options = options;
        this.streaming = streaming;
    }

    @Override
    public void pruneColumns(StructType requiredSchema) {
        required = requiredSchema;
    }

    @Override
    public Filter[] pushFilters(Filter[] filters) {
        for (Filter f : filters) {
            if (push(f)) pushed.add(f);
        }
        return filters;
    }

    private boolean push(Filter f) {
        if (f instanceof EqualTo e && e.attribute().equals("topic")) return topics.add(String.valueOf(e.value())) || true;
        if (f instanceof EqualTo e && e.attribute().equals("partition")) return partitions.add((Integer) e.value()) || true;
        if (f instanceof In in && in.attribute().equals("topic")) {
            for (Object v : in.values()) topics.add(String.valueOf(v));
            return true;
        }
        if (f instanceof In in && in.attribute().equals("partition")) {
            for (Object v : in.values()) partitions.add((Integer) v);
            return true;
        }
        if (f instanceof GreaterThan g && g.attribute().equals("offset")) return lowOffset((Long) g.value() + 1);
        if (f instanceof GreaterThanOrEqual g && g.attribute().equals("offset")) return lowOffset((Long) g.value());
        if (f instanceof LessThan l && l.attribute().equals("offset")) return highOffset((Long) l.value());
        if (f instanceof LessThanOrEqual l && l.attribute().equals("offset")) return highOffset((Long) l.value() + 1);
        Object ts = f instanceof GreaterThan g && g.attribute().equals("timestamp") ? g.value()
            : f instanceof GreaterThanOrEqual g && g.attribute().equals("timestamp") ? g.value()
            : f instanceof EqualTo e && e.attribute().equals("timestamp") ? e.value() : null;
        Long ms = ts instanceof Timestamp t ? (Long) t.getTime() : ts instanceof Instant i ? (Long) i.toEpochMilli() : null;
        if (ms == null) return false;
        timestampMinMs = timestampMinMs == null ? ms : Math.max(timestampMinMs, ms);
        return true;
    }

    private boolean lowOffset(long lo) {
        offsetMin = offsetMin == null ? lo : Math.max(offsetMin, lo);
        return true;
    }

    private boolean highOffset(long hi) {
        offsetMax = offsetMax == null ? hi : Math.min(offsetMax, hi);
        return true;
    }

    /** COUNT(*) and COUNT of never-null columns, with no GROUP BY: Spark calls this only
     *  when no filter is left for it to evaluate after the scan, so the count is exact. */
    @Override
    public boolean pushAggregation(Aggregation aggregation) {
        if (aggregation.groupByExpressions().length > 0) return false;
        for (AggregateFunc f : aggregation.aggregateExpressions()) {
            if (!(f instanceof CountStar || f instanceof Count c && !c.isDistinct()
                    && c.column() instanceof NamedReference ref && ref.fieldNames().length == 1
                    && NEVER_NULL.contains(ref.fieldNames()[0]))) {
                return false;
            }
        }
        pushedCounts = aggregation.aggregateExpressions().length;
        return true;
    }

    @Override
    public boolean supportCompletePushDown(Aggregation aggregation) {
        return false;  // one count per task: Spark adds them up
    }

    @Override
    public Filter[] pushedFilters() {
        return pushed.toArray(new Filter[0]);
    }

    @Override
    public Scan build() {
        return this;
    }

    @Override
    public StructType readSchema() {
        if (pushedCounts == 0) return required;
        StructType counts = new StructType();
        for (int i = 0; i < pushedCounts; i++) counts = counts.add("count" + i, DataTypes.LongType, false);
        return counts;
    }

    @Override
    public String description() {
        return "pylog (JVM reader) " + options.getOrDefault("path", "") + " pushed " + pushed
            + (pushedCounts > 0 ? " and count()" : "");
    }

    @Override
    public Batch toBatch() {
        return this;
    }

    /** The JVM stream, unless the options name something only the Python source reads
     *  ({@link PylogStream#pythonOnly}): then the Python source's stream, or with option
     *  {@code reader=jvm} an error naming the option. */
    @Override
    public MicroBatchStream toMicroBatchStream(String checkpointLocation) {
        String python = PylogStream.pythonOnly(options);
        if (python == null) return new PylogStream(options, createReaderFactory());
        if ("jvm".equalsIgnoreCase(new CaseInsensitiveStringMap(options).getOrDefault("reader", "auto"))) {
            throw new IllegalArgumentException("option " + python + " is read by the Python stream only: drop option "
                + "reader=jvm (or use reader=python)");
        }
        return streaming.get().toMicroBatchStream(checkpointLocation);
    }

    @Override
    public InputPartition[] planInputPartitions() {
        if (planned == null) planned = plan();  // Spark may ask more than once per query
        return planned;
    }

    private InputPartition[] plan() {
        ObjectNode pruned = JSON.createObjectNode();
        if (!topics.isEmpty()) topics.forEach(pruned.putArray("topic")::add);
        if (!partitions.isEmpty()) partitions.forEach(pruned.putArray("partition")::add);
        if (offsetMin != null) pruned.put("offset_min", offsetMin);
        if (offsetMax != null) pruned.put("offset_max", offsetMax);
        if (timestampMinMs != null) pruned.put("timestamp_min_ms", timestampMinMs);
        return Planner.plan(options, pruned).ranges.toArray(new InputPartition[0]);
    }

    @Override
    public PartitionReaderFactory createReaderFactory() {
        return new Factory(pushedCounts > 0 ? new StructType() : required, pushedCounts, hadoopConf());
    }

    /** For a log dir on a Hadoop FileSystem: the session's Hadoop conf (its {@code spark.hadoop.*}
     *  settings) with the query's {@code fs.*} options over it, as Spark's file sources take
     *  them; null for a local log dir. */
    private PartitionDir.Conf hadoopConf() {
        if (PartitionDir.isLocal(options.getOrDefault("path", ""))) return null;
        Configuration conf = Planner.hadoopConf(options);
        return new PartitionDir.Conf(conf);
    }

    /** Shipped to executors: opens a {@link RangeReader} per task. */
    private static final class Factory implements PartitionReaderFactory {
        private static final long serialVersionUID = 1L;
        private final StructType required;
        private final int counts;
        private final PartitionDir.Conf conf;

        Factory(StructType required, int counts, PartitionDir.Conf conf) {
            this.required = required;
            this.counts = counts;
            this.conf = conf;
        }

        @Override
        public boolean supportColumnarReads(InputPartition partition) {
            return true;
        }

        @Override
        public PartitionReader<InternalRow> createReader(InputPartition partition) {
            throw new UnsupportedOperationException("the pylog JVM reader is columnar only");
        }

        @Override
        public PartitionReader<ColumnarBatch> createColumnarReader(InputPartition partition) {
            try {
                RangePartition range = (RangePartition) partition;
                PartitionDir dir = PartitionDir.of(range.dir, conf == null ? null : conf.get());
                RangeReader reader = new RangeReader(range, required, dir);
                return counts > 0 ? new CountReader(reader, counts) : reader;
            } catch (IOException e) {
                throw new UncheckedIOException(e);
            }
        }
    }
}
