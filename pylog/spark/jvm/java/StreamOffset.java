package pylog.spark;

import java.io.IOException;
import java.util.Iterator;
import java.util.Map;
import java.util.TreeMap;

import com.fasterxml.jackson.core.JsonProcessingException;
import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ObjectNode;
import org.apache.spark.sql.connector.read.streaming.Offset;

/** A stream's position: the next offset of each partition, {@code {"topic": {"partition": offset}}},
 *  the JSON of the Python source's offsets (pylog/spark/source.py), written as Python's
 *  {@code json.dumps} writes it (topics by name, partitions by number), so that either reader
 *  restarts from a checkpoint the other wrote and finds equal offsets equal (Spark compares
 *  offsets by their JSON). Immutable. */
final class StreamOffset extends Offset {
    private static final ObjectMapper JSON = new ObjectMapper();
    /** topic -> partition -> next offset */
    final TreeMap<String, TreeMap<Integer, Long>> offsets;

    StreamOffset(TreeMap<String, TreeMap<Integer, Long>> offsets) {
        this.offsets = offsets;
    }

    /** The offsets a checkpoint or the planner holds; an IllegalArgumentException saying what is
     *  wrong for anything else. */
    static StreamOffset parse(String json) {
        try {
            return of(JSON.readTree(json));
        } catch (IOException | IllegalArgumentException e) {
            throw new IllegalArgumentException("not a pylog stream offset (JSON like {\"topic\": {\"0\": 42}}): "
                + json + " (" + e.getMessage() + ")", e);
        }
    }

    static StreamOffset of(JsonNode node) {
        if (node == null || !node.isObject()) throw new IllegalArgumentException("expected a JSON object of topics");
        TreeMap<String, TreeMap<Integer, Long>> out = new TreeMap<>();
        for (Iterator<Map.Entry<String, JsonNode>> topics = node.fields(); topics.hasNext(); ) {
            Map.Entry<String, JsonNode> topic = topics.next();
            if (!topic.getValue().isObject()) {
                throw new IllegalArgumentException("topic " + topic.getKey() + " maps to " + topic.getValue()
                    + ", not to an object of partitions");
            }
            TreeMap<Integer, Long> parts = out.computeIfAbsent(topic.getKey(), t -> new TreeMap<>());
            for (Iterator<Map.Entry<String, JsonNode>> ps = topic.getValue().fields(); ps.hasNext(); ) {
                Map.Entry<String, JsonNode> p = ps.next();
                if (!p.getValue().canConvertToLong() || !p.getValue().isIntegralNumber()) {
                    throw new IllegalArgumentException(topic.getKey() + "-" + p.getKey() + " has offset " + p.getValue());
                }
                parts.put(Integer.parseInt(p.getKey()), p.getValue().asLong());
            }
        }
        return new StreamOffset(out);
    }

    /** The offset of {@code topic}-{@code partition}, or {@code otherwise} when it has none. */
    long get(String topic, int partition, long otherwise) {
        TreeMap<Integer, Long> parts = offsets.get(topic);
        Long offset = parts == null ? null : parts.get(partition);
        return offset == null ? otherwise : offset;
    }

    /** These offsets, raised to {@code floor}'s where it is ahead, with its partitions that
     *  these lack: a stream's partitions never go back. */
    StreamOffset atLeast(StreamOffset floor) {
        TreeMap<String, TreeMap<Integer, Long>> out = copy();
        floor.offsets.forEach((t, parts) -> parts.forEach((p, o) ->
            out.computeIfAbsent(t, x -> new TreeMap<>()).merge(p, o, Math::max)));
        return new StreamOffset(out);
    }

    TreeMap<String, TreeMap<Integer, Long>> copy() {
        TreeMap<String, TreeMap<Integer, Long>> out = new TreeMap<>();
        offsets.forEach((t, parts) -> out.put(t, new TreeMap<>(parts)));
        return out;
    }

    /** The offsets as the planner takes them. */
    ObjectNode node() {
        ObjectNode out = JSON.createObjectNode();
        offsets.forEach((t, parts) -> {
            ObjectNode o = out.putObject(t);
            parts.forEach((p, off) -> o.put(Integer.toString(p), off));
        });
        return out;
    }

    /** Python's {@code json.dumps} of the offsets: {@code {"t": {"0": 5, "1": 7}}}. */
    @Override
    public String json() {
        StringBuilder out = new StringBuilder("{");
        String topicSep = "";
        for (Map.Entry<String, TreeMap<Integer, Long>> t : offsets.entrySet()) {
            out.append(topicSep).append(quote(t.getKey())).append(": {");
            String sep = "";
            for (Map.Entry<Integer, Long> p : t.getValue().entrySet()) {
                out.append(sep).append('"').append(p.getKey()).append("\": ").append(p.getValue());
                sep = ", ";
            }
            out.append('}');
            topicSep = ", ";
        }
        return out.append('}').toString();
    }

    private static String quote(String s) {
        try {
            return JSON.writeValueAsString(s);
        } catch (JsonProcessingException e) {
            throw new IllegalStateException(e);
        }
    }
}
