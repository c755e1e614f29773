package pylog.spark;

import java.io.BufferedReader;
import java.io.File;
import java.io.IOException;
import java.io.InputStreamReader;
import java.io.OutputStream;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ObjectNode;
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
        ObjectNode request = JSON.createObjectNode();
        ObjectNode opts = request.putObject("options");
        options.forEach(opts::put);
        request.set("pruned", pruned);
        JsonNode reply = run(request);
        Plan plan = new Plan();
        boolean committed = reply.get("committed").asBoolean();
        boolean failOnDataLoss = reply.get("failOnDataLoss").asBoolean();
        String root = reply.get("root").asText();
        for (JsonNode r : reply.get("ranges")) {
            String topic = r.get(0).asText();
            int partition = r.get(1).asInt();
            long[][] aborted = new long[r.get(4).size()][];
            for (int i = 0; i < aborted.length; i++) {
                aborted[i] = new long[] {r.get(4).get(i).get(0).asLong(), r.get(4).get(i).get(1).asLong()};
            }
            plan.ranges.add(new RangePartition(new File(root, topic + "-" + partition).getPath(), topic, partition,
                r.get(2).asLong(), r.get(3).asLong(), committed, failOnDataLoss, aborted));
        }
        return plan;
    }

    /** Fails (at {@code load()}) unless {@code path} is a log dir to read: the rule of
     *  {@code plan.require_log_dir}, asked of the planner. */
    static void check(String path) {
        ObjectNode request = JSON.createObjectNode();
        request.put("check", path);
        run(request);
    }

    private static String conf(String key, String env, String fallback) {
        String value = SparkSession.getActiveSession().isDefined()
            ? SparkSession.getActiveSession().get().conf().get(key, null) : null;
        if (value == null && env != null) value = System.getenv(env);
        return value != null ? value : fallback;
    }

    private static Process process;
    private static BufferedReader replies;
    private static String started;

    /** One request and its reply, over the planner process (started, or restarted after it
     *  died or the settings changed, here). Synchronized: one driver, one planner. */
    private static synchronized JsonNode run(ObjectNode request) {
        String python = conf(PYTHON_CONF, "PYSPARK_DRIVER_PYTHON", null);
        if (python == null) python = conf(PYTHON_CONF, "PYSPARK_PYTHON", "python3");
        String path = conf(PATH_CONF, null, null);
        try {
            if (process == null || !process.isAlive() || !(python + "\0" + path).equals(started)) start(python, path);
            OutputStream in = process.getOutputStream();
            in.write(JSON.writeValueAsBytes(request));
            in.write('\n');
            in.flush();
            String line = replies.readLine();
            if (line == null) {
                process.destroy();
                throw new IllegalStateException("the pylog planner (" + python + " -m pylog.spark.jvm.plan) exited; "
                    + "its error is on the driver's stderr");
            }
            JsonNode reply = JSON.readTree(line);
            if (reply.has("error")) throw new IllegalArgumentException(reply.get("error").asText());
            return reply;
        } catch (IOException e) {
            if (process != null) process.destroy();
            throw new IllegalStateException("cannot run the pylog planner with " + python + " (set " + PYTHON_CONF
                + " to a Python that has pylog): " + e.getMessage(), e);
        }
    }

    private static void start(String python, String path) throws IOException {
        if (process != null) process.destroy();
        ProcessBuilder pb = new ProcessBuilder(python, "-m", "pylog.spark.jvm.plan");
        if (path != null) {
            String old = pb.environment().get("PYTHONPATH");
            pb.environment().put("PYTHONPATH", old == null || old.isEmpty() ? path : path + File.pathSeparator + old);
        }
        pb.redirectError(ProcessBuilder.Redirect.INHERIT);
        process = pb.start();
        replies = new BufferedReader(new InputStreamReader(process.getInputStream(), StandardCharsets.UTF_8));
        started = python + "\0" + path;
    }
}
