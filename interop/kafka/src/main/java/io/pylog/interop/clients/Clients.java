package io.pylog.interop.clients;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.concurrent.Future;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.ListOffsetsOptions;
import org.apache.kafka.clients.admin.ListOffsetsResult.ListOffsetsResultInfo;
import org.apache.kafka.clients.admin.OffsetSpec;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.clients.producer.RecordMetadata;
import org.apache.kafka.common.IsolationLevel;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.header.Header;
import org.apache.kafka.common.header.internals.RecordHeaders;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;
import org.apache.kafka.common.serialization.ByteArraySerializer;

/**
 * Kafka's own producer, consumer and admin client, driven from the command line for the
 * interoperability tests (tests/kafka/). Input and output are JSON lines; keys, values and
 * header values are UTF-8 text (null stays null).
 *
 * <pre>
 * Clients --bootstrap-server HOST:PORT produce [--config k=v]...   stdin: one step a line:
 *     {"topic":T,"partition":P,"key":K,"value":V,"timestamp":MS,"headers":[[k,v]]}  a record
 *     {"op":"begin"|"commit"|"abort"|"flush"}  transactions (needs --config transactional.id=X)
 *     {"op":"halt"}  stop the JVM at once: an open transaction stays open
 *   prints, per record in input order: {"topic","partition","offset","timestamp"}
 * Clients ... consume --topic T --partition P [--from OFFSET] [--isolation read_committed]
 *   reads from OFFSET (default: the log start) to the end (the LSO when read_committed) and prints
 *   {"offset","timestamp","timestampType","key","value","headers","leaderEpoch"} per record
 * Clients ... offsets --topic T --partition P [--timestamp MS]...
 *   prints {"earliest","latest","lso","maxTimestamp":{offset,timestamp}} and, per --timestamp,
 *   {"timestamp":MS,"offset":O,"recordTimestamp":TS} (offset -1 where none)
 * Clients ... commit --group G --topic T --partition P --offset O [--metadata M]
 *   a consumer in group G assigned T-P commits O; prints {"group","partition","committed"}
 * </pre>
 */
public final class Clients {
    private static final ObjectMapper JSON = new ObjectMapper();
    private static final Duration POLL = Duration.ofMillis(200);
    private static final Duration DEADLINE = Duration.ofSeconds(60);

    public static void main(String[] argv) throws Exception {
        Args args = new Args(argv);
        switch (args.command) {
            case "produce" -> produce(args);
            case "consume" -> consume(args);
            case "offsets" -> offsets(args);
            case "commit" -> commit(args);
            default -> throw new IllegalArgumentException("unknown command " + args.command);
        }
        System.out.flush();
    }

    // -- produce --------------------------------------------------------------------------------

    private static void produce(Args args) throws Exception {
        Properties props = args.clientProperties();
        props.put("key.serializer", ByteArraySerializer.class.getName());
        props.put("value.serializer", ByteArraySerializer.class.getName());
        List<Future<RecordMetadata>> sent = new ArrayList<>();
        try (KafkaProducer<byte[], byte[]> producer = new KafkaProducer<>(props)) {
            if (props.containsKey("transactional.id")) {
                producer.initTransactions();
            }
            BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
            for (String line; (line = in.readLine()) != null; ) {
                if (line.isBlank()) {
                    continue;
                }
                JsonNode step = JSON.readTree(line);
                switch (step.path("op").asText("send")) {
                    case "send" -> sent.add(producer.send(record(step)));
                    case "begin" -> producer.beginTransaction();
                    case "commit" -> producer.commitTransaction();
                    case "abort" -> { producer.flush(); producer.abortTransaction(); }
                    case "flush" -> producer.flush();
                    case "halt" -> { producer.flush(); printSent(sent); Runtime.getRuntime().halt(0); }
                    default -> throw new IllegalArgumentException("unknown step " + line);
                }
            }
            producer.flush();
            printSent(sent);
        }
    }

    private static void printSent(List<Future<RecordMetadata>> sent) throws Exception {
        for (Future<RecordMetadata> f : sent) {
            RecordMetadata m = f.get();
            ObjectNode out = JSON.createObjectNode();
            out.put("topic", m.topic()).put("partition", m.partition()).put("offset", m.offset())
               .put("timestamp", m.timestamp());
            System.out.println(out);
        }
        System.out.flush();
    }

    private static ProducerRecord<byte[], byte[]> record(JsonNode step) {
        RecordHeaders headers = new RecordHeaders();
        for (JsonNode h : step.path("headers")) {
            headers.add(h.get(0).asText(), bytes(h.get(1)));
        }
        Integer partition = step.has("partition") ? step.get("partition").asInt() : null;
        Long timestamp = step.hasNonNull("timestamp") ? step.get("timestamp").asLong() : null;
        return new ProducerRecord<>(step.get("topic").asText(), partition, timestamp,
                bytes(step.get("key")), bytes(step.get("value")), headers);
    }

    private static byte[] bytes(JsonNode text) {
        return text == null || text.isNull() ? null : text.asText().getBytes(StandardCharsets.UTF_8);
    }

    private static String text(byte[] bytes) {
        return bytes == null ? null : new String(bytes, StandardCharsets.UTF_8);
    }

    // -- consume --------------------------------------------------------------------------------

    private static void consume(Args args) {
        Properties props = args.clientProperties();
        props.put("key.deserializer", ByteArrayDeserializer.class.getName());
        props.put("value.deserializer", ByteArrayDeserializer.class.getName());
        props.put("enable.auto.commit", "false");
        props.put("isolation.level", args.get("--isolation", "read_uncommitted"));
        TopicPartition tp = args.topicPartition();
        try (KafkaConsumer<byte[], byte[]> consumer = new KafkaConsumer<>(props)) {
            consumer.assign(List.of(tp));
            if (args.has("--from")) {
                consumer.seek(tp, Long.parseLong(args.get("--from", null)));
            } else {
                consumer.seekToBeginning(List.of(tp));
            }
            long end = consumer.endOffsets(List.of(tp)).get(tp);  // the LSO under read_committed
            long deadline = System.nanoTime() + DEADLINE.toNanos();
            while (consumer.position(tp) < end) {
                if (System.nanoTime() > deadline) {
                    throw new IllegalStateException("no records up to " + end + " within " + DEADLINE);
                }
                for (ConsumerRecord<byte[], byte[]> r : consumer.poll(POLL)) {
                    System.out.println(json(r));
                }
            }
        }
    }

    private static ObjectNode json(ConsumerRecord<byte[], byte[]> r) {
        ObjectNode out = JSON.createObjectNode();
        out.put("offset", r.offset()).put("timestamp", r.timestamp())
           .put("timestampType", r.timestampType().name).put("key", text(r.key())).put("value", text(r.value()));
        ArrayNode headers = out.putArray("headers");
        for (Header h : r.headers()) {
            headers.addArray().add(h.key()).add(text(h.value()));
        }
        r.leaderEpoch().ifPresentOrElse(e -> out.put("leaderEpoch", e), () -> out.putNull("leaderEpoch"));
        return out;
    }

    // -- offsets --------------------------------------------------------------------------------

    private static void offsets(Args args) throws Exception {
        TopicPartition tp = args.topicPartition();
        try (Admin admin = Admin.create(args.clientProperties())) {
            ObjectNode out = JSON.createObjectNode();
            out.put("earliest", listOffset(admin, tp, OffsetSpec.earliest(), IsolationLevel.READ_UNCOMMITTED).offset());
            out.put("latest", listOffset(admin, tp, OffsetSpec.latest(), IsolationLevel.READ_UNCOMMITTED).offset());
            out.put("lso", listOffset(admin, tp, OffsetSpec.latest(), IsolationLevel.READ_COMMITTED).offset());
            ListOffsetsResultInfo max = listOffset(admin, tp, OffsetSpec.maxTimestamp(), IsolationLevel.READ_UNCOMMITTED);
            out.putObject("maxTimestamp").put("offset", max.offset()).put("timestamp", max.timestamp());
            System.out.println(out);
            for (String ts : args.all("--timestamp")) {
                ListOffsetsResultInfo found = listOffset(admin, tp, OffsetSpec.forTimestamp(Long.parseLong(ts)),
                        IsolationLevel.READ_UNCOMMITTED);
                ObjectNode line = JSON.createObjectNode();
                line.put("timestamp", Long.parseLong(ts)).put("offset", found.offset())
                    .put("recordTimestamp", found.timestamp());
                System.out.println(line);
            }
        }
    }

    private static ListOffsetsResultInfo listOffset(Admin admin, TopicPartition tp, OffsetSpec spec,
                                                    IsolationLevel isolation) throws Exception {
        return admin.listOffsets(Map.of(tp, spec), new ListOffsetsOptions(isolation)).partitionResult(tp).get();
    }

    // -- commit ---------------------------------------------------------------------------------

    private static void commit(Args args) {
        Properties props = args.clientProperties();
        props.put("group.id", args.get("--group", null));
        props.put("enable.auto.commit", "false");
        props.put("key.deserializer", ByteArrayDeserializer.class.getName());
        props.put("value.deserializer", ByteArrayDeserializer.class.getName());
        TopicPartition tp = args.topicPartition();
        long offset = Long.parseLong(args.get("--offset", null));
        try (KafkaConsumer<byte[], byte[]> consumer = new KafkaConsumer<>(props)) {
            consumer.assign(List.of(tp));
            consumer.commitSync(Map.of(tp, new OffsetAndMetadata(offset, args.get("--metadata", ""))));
            ObjectNode out = JSON.createObjectNode();
            out.put("group", args.get("--group", null)).put("partition", tp.partition()).put("committed", offset);
            System.out.println(out);
        }
    }

    // -- arguments ------------------------------------------------------------------------------

    /** {@code --bootstrap-server B COMMAND [--name value]...}; names may repeat. */
    private static final class Args {
        final String command;
        final Map<String, List<String>> options = new HashMap<>();

        Args(String[] argv) {
            String cmd = null;
            for (int i = 0; i < argv.length; i++) {
                if (argv[i].startsWith("--")) {
                    options.computeIfAbsent(argv[i], k -> new ArrayList<>()).add(argv[++i]);
                } else if (cmd == null) {
                    cmd = argv[i];
                } else {
                    throw new IllegalArgumentException("unexpected argument " + argv[i]);
                }
            }
            if (cmd == null) {
                throw new IllegalArgumentException("usage: --bootstrap-server B produce|consume|offsets|commit ...");
            }
            command = cmd;
        }

        boolean has(String name) {
            return options.containsKey(name);
        }

        String get(String name, String otherwise) {
            List<String> values = options.get(name);
            return values == null ? otherwise : values.get(values.size() - 1);
        }

        List<String> all(String name) {
            return options.getOrDefault(name, List.of());
        }

        TopicPartition topicPartition() {
            return new TopicPartition(get("--topic", null), Integer.parseInt(get("--partition", "0")));
        }

        Properties clientProperties() {
            Properties props = new Properties();
            props.put("bootstrap.servers", get("--bootstrap-server", null));
            for (String kv : all("--config")) {
                int eq = kv.indexOf('=');
                props.put(kv.substring(0, eq), kv.substring(eq + 1));
            }
            return props;
        }
    }
}
