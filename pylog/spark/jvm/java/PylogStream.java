package pylog.spark;

import java.util.HashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Optional;
import java.util.TreeMap;

import com.fasterxml.jackson.databind.JsonNode;

import org.apache.spark.sql.connector.read.InputPartition;
import org.apache.spark.sql.connector.read.PartitionReaderFactory;
import org.apache.spark.sql.connector.read.streaming.CompositeReadLimit;
import org.apache.spark.sql.connector.read.streaming.MicroBatchStream;
import org.apache.spark.sql.connector.read.streaming.Offset;
import org.apache.spark.sql.connector.read.streaming.ReadAllAvailable;
import org.apache.spark.sql.connector.read.streaming.ReadLimit;
import org.apache.spark.sql.connector.read.streaming.ReadMaxRows;
import org.apache.spark.sql.connector.read.streaming.ReadMinRows;
import org.apache.spark.sql.connector.read.streaming.ReportsSourceMetrics;
import org.apache.spark.sql.connector.read.streaming.SupportsTriggerAvailableNow;

/** {@code readStream.format("pylog")} on the JVM (docs/spark.md, "Streaming"): each micro-batch's
 *  offset ranges are planned by the Python planner, as a batch scan's are, and read by
 *  {@link RangeReader}. Offsets are the Python source's ({@link StreamOffset}), so a query
 *  restarts from a checkpoint either reader wrote.
 *
 *  <p>Admission control is Spark's Kafka source's: {@code maxOffsetsPerTrigger} caps a
 *  micro-batch (split across partitions by backlog, by the planner: the Python source's rule);
 *  {@code minOffsetsPerTrigger} skips a trigger until that many new offsets exist, unless
 *  {@code maxTriggerDelay} (default 15m) has passed since the last micro-batch. With
 *  {@code Trigger.AvailableNow} the query reads up to the ends it saw at its start, capped
 *  per micro-batch, and stops; the minimum does not hold a micro-batch back there. Cost per
 *  trigger: one planner request (the latest offsets; one more when capped), and one more per
 *  micro-batch (its ranges, with the aborted transactions of a read_committed query). */
final class PylogStream implements MicroBatchStream, SupportsTriggerAvailableNow, ReportsSourceMetrics {
    /** Options only the Python source reads: a stream giving one is served by it. */
    private static final List<String> PYTHON_ONLY = List.of("groupId", "commitOffsetsToGroup", "remote_storage");

    private final Map<String, String> plannerOptions;
    private final String path;
    private final PartitionReaderFactory factory;
    private final Long maxOffsets, minOffsets;
    private final long maxTriggerDelayMs;
    private boolean availableNow;
    /** The ends seen at the start of a Trigger.AvailableNow query; the latest ends seen. */
    private StreamOffset availableNowEnd, latest;
    private long lastTriggerMillis;

    PylogStream(Map<String, String> options, PartitionReaderFactory factory) {
        this.plannerOptions = new HashMap<>(options);
        this.path = options.getOrDefault("path", "");
        this.factory = factory;
        JsonNode admission = Planner.streamAdmission(plannerOptions);
        this.maxOffsets = admission.get("maxOffsets").isNull() ? null : admission.get("maxOffsets").asLong();
        this.minOffsets = admission.get("minOffsets").isNull() ? null : admission.get("minOffsets").asLong();
        this.maxTriggerDelayMs = admission.get("maxTriggerDelayMs").asLong();
    }

    /** The option that makes a stream the Python source's (see {@link #PYTHON_ONLY};
     *  {@code startingOffsets=group}), or null when the JVM stream serves it. */
    static String pythonOnly(Map<String, String> options) {
        Map<String, String> lower = lowerCased(options);
        if ("group".equalsIgnoreCase(lower.getOrDefault("startingoffsets", ""))) return "startingOffsets=group";
        for (String name : PYTHON_ONLY) {
            if (lower.containsKey(name.toLowerCase(Locale.ROOT))) return name;
        }
        return null;
    }

    private static Map<String, String> lowerCased(Map<String, String> options) {
        Map<String, String> out = new HashMap<>();
        options.forEach((k, v) -> out.put(k.toLowerCase(Locale.ROOT), v));
        return out;
    }

    @Override
    public Offset initialOffset() {
        return Planner.streamOffsets("initial", plannerOptions);
    }

    @Override
    public Offset deserializeOffset(String json) {
        return StreamOffset.parse(json);
    }

    @Override
    public void prepareForTriggerAvailableNow() {
        availableNow = true;
    }

    @Override
    public ReadLimit getDefaultReadLimit() {
        ReadLimit max = maxOffsets == null ? null : ReadLimit.maxRows(maxOffsets);
        if (minOffsets == null || availableNow) return max == null ? ReadLimit.allAvailable() : max;
        ReadLimit min = ReadLimit.minRows(minOffsets, maxTriggerDelayMs);
        return max == null ? min : ReadLimit.compositeLimit(new ReadLimit[] {min, max});
    }

    @Override
    public Offset latestOffset() {
        throw new UnsupportedOperationException("latestOffset(start, limit) is the one Spark calls");
    }

    @Override
    public Offset latestOffset(Offset startOffset, ReadLimit limit) {
        StreamOffset start = startOffset == null ? initial() : asStreamOffset(startOffset);
        if (availableNow && availableNowEnd == null) availableNowEnd = Planner.streamOffsets("latest", plannerOptions);
        latest = availableNow ? availableNowEnd : Planner.streamOffsets("latest", plannerOptions);
        StreamOffset target = latest.atLeast(start);
        ReadLimit[] limits = limit instanceof CompositeReadLimit c ? c.getReadLimits() : new ReadLimit[] {limit};
        Long maxRows = null;
        for (ReadLimit l : limits) {
            if (l instanceof ReadAllAvailable) return target;
            if (l instanceof ReadMinRows min && delay(min, start, target)) return start;
            if (l instanceof ReadMaxRows max) maxRows = max.maxRows();
        }
        return maxRows == null ? target : Planner.streamCapped(plannerOptions, start, target, maxRows);
    }

    private StreamOffset initial() {
        return (StreamOffset) initialOffset();
    }

    private static StreamOffset asStreamOffset(Offset offset) {
        return offset instanceof StreamOffset s ? s : StreamOffset.parse(offset.json());
    }

    /** Whether this trigger waits (Spark's Kafka source's rule): fewer than the minimum new
     *  offsets and less than the maximum delay since the last micro-batch. */
    private boolean delay(ReadMinRows min, StreamOffset start, StreamOffset target) {
        long now = System.currentTimeMillis();
        if (now - lastTriggerMillis < min.maxTriggerDelayMs() && backlog(start, target) < min.minRows()) return true;
        lastTriggerMillis = now;
        return false;
    }

    private static long backlog(StreamOffset start, StreamOffset target) {
        long total = 0;
        for (Map.Entry<String, TreeMap<Integer, Long>> t : target.offsets.entrySet()) {
            for (Map.Entry<Integer, Long> p : t.getValue().entrySet()) {
                total += Math.max(0, p.getValue() - start.get(t.getKey(), p.getKey(), 0));
            }
        }
        return total;
    }

    @Override
    public Offset reportLatestOffset() {
        return latest;
    }

    @Override
    public InputPartition[] planInputPartitions(Offset start, Offset end) {
        return Planner.streamRanges(plannerOptions, asStreamOffset(start), asStreamOffset(end)).ranges
            .toArray(new InputPartition[0]);
    }

    @Override
    public PartitionReaderFactory createReaderFactory() {
        return factory;
    }

    @Override
    public void commit(Offset end) {
        // nothing to release: the offsets live in Spark's checkpoint
    }

    @Override
    public void stop() {
        // the planner process serves the driver's other queries
    }

    /** How far the stream is behind the latest offsets it saw, as Spark's Kafka source reports
     *  it: {@code minOffsetsBehindLatest}, {@code maxOffsetsBehindLatest}, {@code avgOffsetsBehindLatest}. */
    @Override
    public Map<String, String> metrics(Optional<Offset> latestConsumed) {
        if (latestConsumed.isEmpty() || latest == null) return Map.of();
        StreamOffset consumed = asStreamOffset(latestConsumed.get());
        long min = Long.MAX_VALUE, max = 0, sum = 0, n = 0;
        for (Map.Entry<String, TreeMap<Integer, Long>> t : latest.offsets.entrySet()) {
            for (Map.Entry<Integer, Long> p : t.getValue().entrySet()) {
                long behind = Math.max(0, p.getValue() - consumed.get(t.getKey(), p.getKey(), 0));
                min = Math.min(min, behind);
                max = Math.max(max, behind);
                sum += behind;
                n++;
            }
        }
        if (n == 0) return Map.of();
        return Map.of("minOffsetsBehindLatest", Long.toString(min), "maxOffsetsBehindLatest", Long.toString(max),
            "avgOffsetsBehindLatest", Double.toString((double) sum / n));
    }

    @Override
    public String toString() {
        return "pylog (JVM stream) " + path;
    }
}
