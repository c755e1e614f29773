package pylog.spark;

import java.util.EnumSet;
import java.util.HashSet;
import java.util.Map;
import java.util.Set;

import org.apache.spark.sql.connector.catalog.SupportsRead;
import org.apache.spark.sql.connector.catalog.SupportsWrite;
import org.apache.spark.sql.connector.catalog.Table;
import org.apache.spark.sql.connector.catalog.TableCapability;
import org.apache.spark.sql.connector.catalog.TableProvider;
import org.apache.spark.sql.connector.expressions.Transform;
import org.apache.spark.sql.connector.read.ScanBuilder;
import org.apache.spark.sql.connector.write.LogicalWriteInfo;
import org.apache.spark.sql.connector.write.WriteBuilder;
import org.apache.spark.sql.execution.datasources.v2.python.PythonDataSourceV2;
import org.apache.spark.sql.sources.DataSourceRegister;
import org.apache.spark.sql.types.ArrayType;
import org.apache.spark.sql.types.DataTypes;
import org.apache.spark.sql.types.StructField;
import org.apache.spark.sql.types.StructType;
import org.apache.spark.sql.util.CaseInsensitiveStringMap;

/** {@code format("pylog")} when pylog's jar is on the classpath: batch reads and streams by the
 *  JVM reader, everything else (writes, {@code reader=python}, streams with options only the
 *  Python source reads: {@link PylogStream#pythonOnly}) by the Python source, registered in the
 *  session under the same name (docs/spark.md). */
public final class PylogProvider implements TableProvider, DataSourceRegister {
    static final String NAME = "pylog";

    @Override
    public String shortName() {
        return NAME;
    }

    static StructType schema(boolean headers) {
        StructType s = new StructType()
            .add("key", DataTypes.BinaryType).add("value", DataTypes.BinaryType)
            .add("topic", DataTypes.StringType).add("partition", DataTypes.IntegerType)
            .add("offset", DataTypes.LongType).add("timestamp", DataTypes.TimestampType)
            .add("timestampType", DataTypes.IntegerType);
        if (!headers) return s;
        StructType header = new StructType().add("key", DataTypes.StringType).add("value", DataTypes.BinaryType);
        return s.add(new StructField("headers", new ArrayType(header, true), true,
            org.apache.spark.sql.types.Metadata.empty()));
    }

    @Override
    public StructType inferSchema(CaseInsensitiveStringMap options) {
        String path = options.get("path");
        if (path != null) Planner.check(path, options.asCaseSensitiveMap());  // plan.require_log_dir: fail at load()
        return schema("true".equalsIgnoreCase(options.getOrDefault("includeHeaders", "false")));
    }

    @Override
    public boolean supportsExternalMetadata() {
        return true;
    }

    @Override
    public Table getTable(StructType schema, Transform[] partitioning, Map<String, String> properties) {
        PythonDataSourceV2 python = new PythonDataSourceV2();
        python.setShortName(NAME);
        Table pythonTable = python.getTable(schema, partitioning, properties);
        String reader = new CaseInsensitiveStringMap(properties).getOrDefault("reader", "auto").toLowerCase();
        return new PylogTable(schema, pythonTable, !reader.equals("python"));
    }

    /** Reads here (unless {@code jvm} is false), the rest delegated to the Python source's
     *  table, which is given the session's S3A settings for a log dir in object storage. */
    private static final class PylogTable implements Table, SupportsRead, SupportsWrite {
        private final StructType schema;
        private final Table python;
        private final boolean jvm;

        PylogTable(StructType schema, Table python, boolean jvm) {
            this.schema = schema;
            this.python = python;
            this.jvm = jvm;
        }

        @Override
        public String name() {
            return NAME;
        }

        @Override
        @SuppressWarnings("deprecation")
        public StructType schema() {
            return schema;
        }

        @Override
        public Set<TableCapability> capabilities() {
            Set<TableCapability> caps = new HashSet<>(python.capabilities());
            caps.addAll(EnumSet.of(TableCapability.BATCH_READ));
            return caps;
        }

        @Override
        public ScanBuilder newScanBuilder(CaseInsensitiveStringMap options) {
            CaseInsensitiveStringMap withHadoop = new CaseInsensitiveStringMap(Planner.withHadoop(options.asCaseSensitiveMap()));
            if (!jvm) return ((SupportsRead) python).newScanBuilder(withHadoop);
            return new PylogScan(schema, options.asCaseSensitiveMap(),
                () -> ((SupportsRead) python).newScanBuilder(withHadoop).build());
        }

        @Override
        public WriteBuilder newWriteBuilder(LogicalWriteInfo info) {
            return ((SupportsWrite) python).newWriteBuilder(info);
        }
    }
}
