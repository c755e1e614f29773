package io.pylog.interop.writes;

import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.header.Header;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;

/**
 * Kafka's consumer and admin client reading back, in one JVM, what pylog wrote into a broker's
 * log dir (tests/kafka/test_pylog_writes_*.py). Output is JSON lines; keys, values and header
 * values are UTF-8 text (null stays null).
 *
 * <pre>
 * ReadBack --bootstrap-server B read [--partition TOPIC:P]... [--group G]...
 *   per partition and isolation level (read_uncommitted, read_committed), every record from the
 *   log start to the end (the LSO when read_committed):
 *     {"isolation","topic","partition","offset","timestamp","key","value","headers","leaderEpoch"}
 *   then per group, its committed offsets:
 *     {"group","topic","partition","offset","leaderEpoch","metadata"}
 * </pre>
 */
public final class ReadBack {
    private static final ObjectMapper JSON = new ObjectMapper();
    private static final Duration POLL = Duration.ofMillis(200);
    private static final long DEADLINE_NS = Duration.ofSeconds(60).toNanos();

    public static void main(String[] argv) throws Exception {
        Map<String, List<String>> options = new HashMap<>();
        String command = null;
        for (int i = 0; i < argv.length; i++) {
            if (argv[i].startsWith("--")) {
                options.computeIfAbsent(argv[i], k -> new ArrayList<>()).add(argv[++i]);
            } else {
                command = argv[i];
            }
        }
        Properties props = new Properties();
        props.put("bootstrap.servers", options.get("--bootstrap-server").get(0));
        if ("read".equals(command)) {
            List<TopicPartition> partitions = new ArrayList<>();
            for (String tp : options.getOrDefault("--partition", List.of())) {
                int colon = tp.lastIndexOf(':');
                partitions.add(new TopicPartition(tp.substring(0, colon), Integer.parseInt(tp.substring(colon + 1))));
            }
            for (String isolation : List.of("read_uncommitted", "read_committed")) {
                readAll(props, partitions, isolation);
            }
            for (String group : options.getOrDefault("--group", List.of())) {
                printCommitted(props, group);
            }
        } else {
            throw new IllegalArgumentException("usage: --bootstrap-server B read [--partition T:P]... [--group G]...");
        }
        System.out.flush();
    }

    private static void readAll(Properties base, List<TopicPartition> partitions, String isolation) {
        Properties props = new Properties();
        props.putAll(base);
        props.put("key.deserializer", ByteArrayDeserializer.class.getName());
        props.put("value.deserializer", ByteArrayDeserializer.class.getName());
        props.put("enable.auto.commit", "false");
        props.put("isolation.level", isolation);
        try (KafkaConsumer<byte[], byte[]> consumer = new KafkaConsumer<>(props)) {
            consumer.assign(partitions);
            consumer.seekToBeginning(partitions);
            Map<TopicPartition, Long> ends = consumer.endOffsets(partitions);
            long deadline = System.nanoTime() + DEADLINE_NS;
            while (partitions.stream().anyMatch(tp -> consumer.position(tp) < ends.get(tp))) {
                if (System.nanoTime() > deadline) {
                    throw new IllegalStateException(isolation + ": not at " + ends + " within the deadline");
                }
                for (ConsumerRecord<byte[], byte[]> r : consumer.poll(POLL)) {
                    System.out.println(record(isolation, r));
                }
            }
        }
    }

    private static ObjectNode record(String isolation, ConsumerRecord<byte[], byte[]> r) {
        ObjectNode out = JSON.createObjectNode();
        out.put("isolation", isolation).put("topic", r.topic()).put("partition", r.partition())
           .put("offset", r.offset()).put("timestamp", r.timestamp())
           .put("key", text(r.key())).put("value", text(r.value()));
        ArrayNode headers = out.putArray("headers");
        for (Header h : r.headers()) {
            headers.addArray().add(h.key()).add(text(h.value()));
        }
        r.leaderEpoch().ifPresentOrElse(e -> out.put("leaderEpoch", e), () -> out.putNull("leaderEpoch"));
        return out;
    }

    private static void printCommitted(Properties props, String group) throws Exception {
        try (Admin admin = Admin.create(props)) {
            Map<TopicPartition, OffsetAndMetadata> offsets =
                admin.listConsumerGroupOffsets(group).partitionsToOffsetAndMetadata().get();
            for (Map.Entry<TopicPartition, OffsetAndMetadata> e : offsets.entrySet()) {
                ObjectNode out = JSON.createObjectNode();
                out.put("group", group).put("topic", e.getKey().topic()).put("partition", e.getKey().partition())
                   .put("offset", e.getValue().offset()).put("metadata", e.getValue().metadata());
                e.getValue().leaderEpoch().ifPresentOrElse(ep -> out.put("leaderEpoch", ep),
                                                           () -> out.putNull("leaderEpoch"));
                System.out.println(out);
            }
        }
    }

    private static String text(byte[] bytes) {
        return bytes == null ? null : new String(bytes, StandardCharsets.UTF_8);
    }
}
