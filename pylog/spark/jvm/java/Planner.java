package pylog.spark;

import java.io.ByteArrayOutputStream;
import java.io.File;
import java.io.IOException;
import java.io.InputStream;
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
 *  (the one option parser and range planner), the offset ranges come back as JSON. Cost: one
 *  Python process per query plan, ~0.2 s. */
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
            plan.ranges.add(new RangePartition(new File(root, topic + "-" + partition).getPath(), topic, partition,
                r.get(2).asLong(), r.get(3).asLong(), committed, failOnDataLoss));
        }
        return plan;
    }

    private static String conf(String key, String env, String fallback) {
        String value = SparkSession.getActiveSession().isDefined()
            ? SparkSession.getActiveSession().get().conf().get(key, null) : null;
        if (value == null && env != null) value = System.getenv(env);
        return value != null ? value : fallback;
    }

    private static JsonNode run(ObjectNode request) {
        String python = conf(PYTHON_CONF, "PYSPARK_DRIVER_PYTHON", null);
        if (python == null) python = conf(PYTHON_CONF, "PYSPARK_PYTHON", "python3");
        ProcessBuilder pb = new ProcessBuilder(python, "-m", "pylog.spark.jvm.plan");
        String path = conf(PATH_CONF, null, null);
        if (path != null) {
            String old = pb.environment().get("PYTHONPATH");
            pb.environment().put("PYTHONPATH", old == null || old.isEmpty() ? path : path + File.pathSeparator + old);
        }
        pb.redirectError(ProcessBuilder.Redirect.INHERIT);
        try {
            Process p = pb.start();
            try (OutputStream in = p.getOutputStream()) {
                in.write(JSON.writeValueAsBytes(request));
            }
            byte[] out = readAll(p.getInputStream());
            int rc = p.waitFor();
            JsonNode reply = out.length == 0 ? null : JSON.readTree(out);
            if (reply != null && reply.has("error")) throw new IllegalArgumentException(reply.get("error").asText());
            if (rc != 0 || reply == null) {
                throw new IllegalStateException("the pylog planner (" + python + " -m pylog.spark.jvm.plan) exited with "
                    + rc + ": " + new String(out, StandardCharsets.UTF_8));
            }
            return reply;
        } catch (IOException e) {
            throw new IllegalStateException("cannot run the pylog planner with " + python + " (set " + PYTHON_CONF
                + " to a Python that has pylog): " + e.getMessage(), e);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            throw new IllegalStateException("interrupted while planning", e);
        }
    }

    private static byte[] readAll(InputStream in) throws IOException {
        ByteArrayOutputStream out = new ByteArrayOutputStream();
        in.transferTo(out);
        return out.toByteArray();
    }
}
