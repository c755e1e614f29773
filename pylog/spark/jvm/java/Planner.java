package pylog.spark;

import java.io.BufferedReader;
import java.io.File;
import java.io.IOException;
import java.io.InputStreamReader;
import java.io.OutputStream;
import java.nio.charset.StandardCharsets;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ObjectNode;
import org.apache.hadoop.conf.Configuration;
import org.apache.spark.sql.SparkSession;

/** Planning is Python's: the options and the pushed bounds go to {@code python -m pylog.spark.jvm.plan}
 *  (the one option parser and range planner), the offset ranges come back as JSON. The planner
 *  process lives as long as the driver: the first query pays its start (~0.5 s), the others
 *  a request (milliseconds plus opening the logs). */
final class Planner {
    static final String PYTHON_CONF = "spark.pylog.python", PATH_CONF = "spark.pylog.pythonPath";
    private static final ObjectMapper JSON = new ObjectMapper();

    private Planner() {}

    static final class Plan {
        final List<RangePartition> ranges = new ArrayList<>();
    }

    static Plan plan(Map<String, String> options, ObjectNode pruned) {
        ObjectNode request = request(options);
        request.set("pruned", pruned);
        return plan(run(request));
    }

    /** A stream's offsets: where a new query starts ({@code "initial"}) or each partition's
     *  latest offset at the query's isolation level ({@code "latest"}). */
    static StreamOffset streamOffsets(String which, Map<String, String> options) {
        ObjectNode request = request(options);
        request.put("stream", which);
        return StreamOffset.of(run(request).get("offsets"));
    }

    /** A stream's admission options ({@code maxOffsets}, {@code minOffsets}: null when not set;
     *  {@code maxTriggerDelayMs}), parsed and checked as the Python source parses them. */
    static JsonNode streamAdmission(Map<String, String> options) {
        ObjectNode request = request(options);
        request.put("stream", "admission");
        return run(request);
    }

    /** maxOffsetsPerTrigger: the end offsets from {@code start} toward {@code target} with at
     *  most {@code maxOffsets} offsets in all (the planner's split, the Python source's too). */
    static StreamOffset streamCapped(Map<String, String> options, StreamOffset start, StreamOffset target,
                                     long maxOffsets) {
        ObjectNode request = request(options);
        request.put("stream", "capped");
        request.set("start", start.node());
        request.set("end", target.node());
        request.put("maxOffsets", maxOffsets);
        return StreamOffset.of(run(request).get("offsets"));
    }

    /** A micro-batch's ranges, from offsets {@code start} to {@code end}; fails on records lost
     *  below {@code start} unless failOnDataLoss is false (the planner's rule). */
    static Plan streamRanges(Map<String, String> options, StreamOffset start, StreamOffset end) {
        ObjectNode request = request(options);
        request.put("stream", "ranges");
        request.set("start", start.node());
        request.set("end", end.node());
        return plan(run(request));
    }

    /** A request carrying the query's options (and the session's S3A settings for a URL). */
    private static ObjectNode request(Map<String, String> options) {
        ObjectNode request = JSON.createObjectNode();
        ObjectNode opts = request.putObject("options");
        options.forEach(opts::put);
        if (!PartitionDir.isLocal(options.getOrDefault("path", ""))) putHadoop(opts, options);
        return request;
    }

    private static Plan plan(JsonNode reply) {
        Plan plan = new Plan();
        boolean committed = reply.get("committed").asBoolean();
        boolean failOnDataLoss = reply.get("failOnDataLoss").asBoolean();
        for (JsonNode r : reply.get("ranges")) {
            String topic = r.get(0).asText();
            int partition = r.get(1).asInt();
            long[][] aborted = new long[r.get(4).size()][];
            for (int i = 0; i < aborted.length; i++) {
                aborted[i] = new long[] {r.get(4).get(i).get(0).asLong(), r.get(4).get(i).get(1).asLong()};
            }
            plan.ranges.add(new RangePartition(r.get(5).asText(), topic, partition,
                r.get(2).asLong(), r.get(3).asLong(), committed, failOnDataLoss, aborted));
        }
        return plan;
    }

    /** Fails (at {@code load()}) unless {@code path} is a log dir to read: the rule of
     *  {@code plan.require_log_dir}, asked of the planner. */
    static void check(String path, Map<String, String> options) {
        ObjectNode request = JSON.createObjectNode();
        request.put("check", path);
        if (!PartitionDir.isLocal(path)) {
            ObjectNode opts = request.putObject("options");
            options.forEach(opts::put);
            putHadoop(opts, options);
        }
        run(request);
    }

    /** Hadoop settings handed to the Python planner, which reads object storage through fsspec
     *  and takes them as its storage options when the query gives none (pylog/spark/options.py). */
    static final String HADOOP_PREFIX = "fs.s3a.";

    /** {@code options} with the session's S3A settings added where they do not say, for a
     *  log dir that is not local (the Python source takes them as its storage options). */
    static Map<String, String> withHadoop(Map<String, String> options) {
        if (PartitionDir.isLocal(options.getOrDefault("path", ""))) return options;
        Map<String, String> out = new java.util.HashMap<>(options);
        hadoopConf(options).getPropsWithPrefix(HADOOP_PREFIX).forEach((k, v) -> out.putIfAbsent(HADOOP_PREFIX + k, v));
        return out;
    }

    private static void putHadoop(ObjectNode opts, Map<String, String> options) {
        hadoopConf(options).getPropsWithPrefix(HADOOP_PREFIX).forEach((k, v) -> {
            if (!opts.has(HADOOP_PREFIX + k)) opts.put(HADOOP_PREFIX + k, v);
        });
    }

    /** The session's Hadoop conf ({@code spark.hadoop.*}) with the query's {@code fs.*} options over it. */
    static Configuration hadoopConf(Map<String, String> options) {
        Configuration conf = SparkSession.active().sessionState().newHadoopConf();
        options.forEach((k, v) -> {
            if (k.startsWith("fs.")) conf.set(k, v);
        });
        return conf;
    }

    /** The planner's interpreter and where it was named: the session's {@code spark.pylog.python}
     *  ({@code register()} sets it to the driver's interpreter), else {@code PYSPARK_DRIVER_PYTHON},
     *  {@code PYSPARK_PYTHON}, else {@code python3} on {@code PATH}. */
    private static String[] python() {
        String conf = SparkSession.getActiveSession().isDefined()
            ? SparkSession.getActiveSession().get().conf().get(PYTHON_CONF, null) : null;
        if (conf != null) return new String[] {conf, PYTHON_CONF};
        for (String env : new String[] {"PYSPARK_DRIVER_PYTHON", "PYSPARK_PYTHON"}) {
            if (System.getenv(env) != null) return new String[] {System.getenv(env), "$" + env};
        }
        return new String[] {"python3", "PATH"};
    }

    private static String pythonPath() {
        return SparkSession.getActiveSession().isDefined()
            ? SparkSession.getActiveSession().get().conf().get(PATH_CONF, null) : null;
    }

    /** Lines of the planner's stderr kept for an error message (it is also copied to the driver's). */
    private static final int STDERR_LINES = 20;
    private static Process process;
    private static BufferedReader replies;
    private static String started;
    private static Thread stderrCopier;
    private static final ArrayDeque<String> stderrTail = new ArrayDeque<>();

    /** One request and its reply, over the planner process (started, or restarted after it
     *  died or the settings changed, here). Synchronized: one driver, one planner. */
    private static synchronized JsonNode run(ObjectNode request) {
        String[] python = python();
        String path = pythonPath();
        String what = "the pylog planner (" + python[0] + " -m pylog.spark.jvm.plan, the Python named by " + python[1]
            + ")";
        try {
            if (process == null || !process.isAlive() || !(python[0] + "\0" + path).equals(started)) {
                start(python[0], path);
            }
            OutputStream in = process.getOutputStream();
            in.write(JSON.writeValueAsBytes(request));
            in.write('\n');
            in.flush();
            String line = replies.readLine();
            if (line == null) throw new IllegalStateException(what + " exited" + exitAndStderr());
            JsonNode reply = JSON.readTree(line);
            if (reply.has("error")) throw new IllegalArgumentException(reply.get("error").asText());
            return reply;
        } catch (IOException e) {
            throw new IllegalStateException("cannot run " + what + ": " + e.getMessage() + exitAndStderr()
                + " (set " + PYTHON_CONF + " to a Python that has pylog)", e);
        }
    }

    /** The dead planner's exit code and last stderr lines, for an error message. */
    private static String exitAndStderr() {
        if (process == null) return "";
        process.destroy();
        try {
            boolean ended = process.waitFor(5, TimeUnit.SECONDS);
            if (stderrCopier != null) stderrCopier.join(5000);  // until its stderr closes: the whole message
            String code = ended ? " with code " + process.exitValue() : "";
            synchronized (stderrTail) {
                return stderrTail.isEmpty() ? code : code + ":\n" + String.join("\n", stderrTail);
            }
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            return "";
        }
    }

    private static void start(String python, String path) throws IOException {
        if (process != null) process.destroy();
        synchronized (stderrTail) {
            stderrTail.clear();
        }
        ProcessBuilder pb = new ProcessBuilder(python, "-m", "pylog.spark.jvm.plan");
        if (path != null) {
            String old = pb.environment().get("PYTHONPATH");
            pb.environment().put("PYTHONPATH", old == null || old.isEmpty() ? path : path + File.pathSeparator + old);
        }
        started = python + "\0" + path;
        process = pb.start();
        replies = new BufferedReader(new InputStreamReader(process.getInputStream(), StandardCharsets.UTF_8));
        BufferedReader errors = new BufferedReader(new InputStreamReader(process.getErrorStream(),
            StandardCharsets.UTF_8));
        stderrCopier = new Thread(() -> copyStderr(errors), "pylog-planner-stderr");
        stderrCopier.setDaemon(true);
        stderrCopier.start();
    }

    /** Copies the planner's stderr to the driver's, keeping its last lines. */
    private static void copyStderr(BufferedReader errors) {
        try (errors) {
            for (String line; (line = errors.readLine()) != null; ) {
                System.err.println(line);
                synchronized (stderrTail) {
                    if (stderrTail.size() == STDERR_LINES) stderrTail.removeFirst();
                    stderrTail.addLast(line);
                }
            }
        } catch (IOException e) {
            // the planner went away: its lines so far are kept
        }
    }
}
