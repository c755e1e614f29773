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
import java.util.Base64;
import java.util.Collection;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.Set;
import java.util.concurrent.Future;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.ListOffsetsOptions;
import org.apache.kafka.clients.admin.NewTopic;
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
 * header values are UTF-8 text, or base64 with --base64 (null stays null). Partitions are named
 * --tp TOPIC:PARTITION (repeatable), or --topic T --partition P.
 *
 * <pre>
 * Clients --bootstrap-server HOST:PORT produce [--config k=v]...   stdin: one step a line:
 *     {"topic":T,"partition":P,"key":K,"value":V,"timestamp":MS,"headers":[[k,v]]}  a record
 *     {"producer":{"k":"v",...},"as":NAME}  from here on, a new producer with these settings over
 *                                 --config (initTransactions() when they name a transactional.id)
 *     {"op":"begin"|"commit"|"abort"|"flush"}  the current producer's transaction, or a flush
 *     any step with "by":NAME  first makes that producer the current one
 *     {"op":"halt"}  flush, print, and stop the JVM at once: open transactions stay open
 *   prints, per record in input order: {"topic","partition","offset","timestamp"}
 * Clients ... consume --tp T:P... [--from OFFSET] [--isolation read_committed] [--base64]
 *   reads each partition from OFFSET (default: its log start) to its end (the LSO when
 *   read_committed) and prints per record {"topic","partition","offset","timestamp",
 *   "timestampType","key","value","headers","leaderEpoch"}
 * Clients ... offsets --tp T:P... [--timestamp MS]...
 *   prints per partition {"topic","partition","earliest","latest","lso","maxTimestamp":{offset,timestamp},
 *   "forTimestamp":[{"timestamp":MS,"offset":O,"recordTimestamp":TS}...]} (offset -1 where none)
 * Clients ... create-topics   stdin: {"topic":T,"partitions":N,"configs":{"k":"v"}} a line
 *   creates them all (replication factor 1) in one request; prints {"topic"} per topic created
 * Clients ... commit --group G --tp T:P:OFFSET... [--subscribe] [--metadata M] [--config k=v]...
 *   a consumer of group G (assigned the partitions, or subscribed to their topics and waiting for
 *   them) commits the offsets; prints {"group","topic","partition","committed"} per partition
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
            case "create-topics" -> createTopics(args);
            default -> throw new IllegalArgumentException("unknown command " + args.command);
        }
        System.out.flush();
    }

    // -- produce --------------------------------------------------------------------------------

    private static void produce(Args args) throws Exception {
        Map<String, KafkaProducer<byte[], byte[]>> producers = new LinkedHashMap<>();
        List<Future<RecordMetadata>> sent = new ArrayList<>();
        try {
            KafkaProducer<byte[], byte[]> current = null;
            BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
            for (String line; (line = in.readLine()) != null; ) {
                if (line.isBlank()) {
                    continue;
                }
                JsonNode step = JSON.readTree(line);
                if (step.has("producer")) {
                    current = newProducer(args, step.get("producer"));
                    producers.put(step.path("as").asText("producer-" + producers.size()), current);
                    continue;
                }
                if (step.has("by")) {
                    current = producers.get(step.get("by").asText());
                } else if (current == null) {
                    current = newProducer(args, JSON.createObjectNode());
                    producers.put("producer-0", current);
                }
                switch (step.path("op").asText("send")) {
                    case "send" -> sent.add(current.send(record(step, args.base64())));
                    case "begin" -> current.beginTransaction();
                    case "commit" -> current.commitTransaction();
                    case "abort" -> { current.flush(); current.abortTransaction(); }
                    case "flush" -> current.flush();
                    case "halt" -> halt(producers.values(), sent);
                    default -> throw new IllegalArgumentException("unknown step " + line);
                }
            }
            producers.values().forEach(KafkaProducer::flush);
            printSent(sent);
        } finally {
            producers.values().forEach(KafkaProducer::close);
        }
    }

    private static KafkaProducer<byte[], byte[]> newProducer(Args args, JsonNode settings) {
        Properties props = args.clientProperties();
        settings.fields().forEachRemaining(e -> props.put(e.getKey(), e.getValue().asText()));
        props.put("key.serializer", ByteArraySerializer.class.getName());
        props.put("value.serializer", ByteArraySerializer.class.getName());
        KafkaProducer<byte[], byte[]> producer = new KafkaProducer<>(props);
        if (props.containsKey("transactional.id")) {
            producer.initTransactions();
        }
        return producer;
    }

    private static void halt(Collection<KafkaProducer<byte[], byte[]>> producers, List<Future<RecordMetadata>> sent)
            throws Exception {
        producers.forEach(KafkaProducer::flush);
        printSent(sent);
        Runtime.getRuntime().halt(0);
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

    private static ProducerRecord<byte[], byte[]> record(JsonNode step, boolean base64) {
        RecordHeaders headers = new RecordHeaders();
        for (JsonNode h : step.path("headers")) {
            headers.add(h.get(0).asText(), bytes(h.get(1), base64));
        }
        Integer partition = step.has("partition") ? step.get("partition").asInt() : null;
        Long timestamp = step.hasNonNull("timestamp") ? step.get("timestamp").asLong() : null;
        return new ProducerRecord<>(step.get("topic").asText(), partition, timestamp,
                bytes(step.get("key"), base64), bytes(step.get("value"), base64), headers);
    }

    private static byte[] bytes(JsonNode text, boolean base64) {
        if (text == null || text.isNull()) {
            return null;
        }
        return base64 ? Base64.getDecoder().decode(text.asText()) : text.asText().getBytes(StandardCharsets.UTF_8);
    }

    private static String text(byte[] bytes, boolean base64) {
        if (bytes == null) {
            return null;
        }
        return base64 ? Base64.getEncoder().encodeToString(bytes) : new String(bytes, StandardCharsets.UTF_8);
    }

    // -- consume --------------------------------------------------------------------------------

    private static void consume(Args args) {
        Properties props = args.clientProperties();
        props.put("key.deserializer", ByteArrayDeserializer.class.getName());
        props.put("value.deserializer", ByteArrayDeserializer.class.getName());
        props.put("enable.auto.commit", "false");
        props.put("isolation.level", args.get("--isolation", "read_uncommitted"));
        try (KafkaConsumer<byte[], byte[]> consumer = new KafkaConsumer<>(props)) {
            for (TopicPartition tp : args.partitions()) {
                consumeOne(consumer, tp, args);
            }
        }
    }

    private static void consumeOne(KafkaConsumer<byte[], byte[]> consumer, TopicPartition tp, Args args) {
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
                throw new IllegalStateException(tp + ": no records up to " + end + " within " + DEADLINE);
            }
            for (ConsumerRecord<byte[], byte[]> r : consumer.poll(POLL)) {
                System.out.println(json(r, args.base64()));
            }
        }
    }

    private static ObjectNode json(ConsumerRecord<byte[], byte[]> r, boolean base64) {
        ObjectNode out = JSON.createObjectNode();
        out.put("topic", r.topic()).put("partition", r.partition()).put("offset", r.offset())
           .put("timestamp", r.timestamp()).put("timestampType", r.timestampType().name)
           .put("key", text(r.key(), base64)).put("value", text(r.value(), base64));
        ArrayNode headers = out.putArray("headers");
        for (Header h : r.headers()) {
            headers.addArray().add(h.key()).add(text(h.value(), base64));
        }
        r.leaderEpoch().ifPresentOrElse(e -> out.put("leaderEpoch", e), () -> out.putNull("leaderEpoch"));
        return out;
    }

    // -- offsets --------------------------------------------------------------------------------

    private static void offsets(Args args) throws Exception {
        try (Admin admin = Admin.create(args.clientProperties())) {
            for (TopicPartition tp : args.partitions()) {
                System.out.println(offsetsOf(admin, tp, args.all("--timestamp")));
            }
        }
    }

    private static ObjectNode offsetsOf(Admin admin, TopicPartition tp, List<String> timestamps) throws Exception {
        ObjectNode out = JSON.createObjectNode();
        out.put("topic", tp.topic()).put("partition", tp.partition());
        out.put("earliest", listOffset(admin, tp, OffsetSpec.earliest(), IsolationLevel.READ_UNCOMMITTED).offset());
        out.put("latest", listOffset(admin, tp, OffsetSpec.latest(), IsolationLevel.READ_UNCOMMITTED).offset());
        out.put("lso", listOffset(admin, tp, OffsetSpec.latest(), IsolationLevel.READ_COMMITTED).offset());
        ListOffsetsResultInfo max = listOffset(admin, tp, OffsetSpec.maxTimestamp(), IsolationLevel.READ_UNCOMMITTED);
        out.putObject("maxTimestamp").put("offset", max.offset()).put("timestamp", max.timestamp());
        ArrayNode found = out.putArray("forTimestamp");
        for (String ts : timestamps) {
            ListOffsetsResultInfo at = listOffset(admin, tp, OffsetSpec.forTimestamp(Long.parseLong(ts)),
                    IsolationLevel.READ_UNCOMMITTED);
            found.addObject().put("timestamp", Long.parseLong(ts)).put("offset", at.offset())
                 .put("recordTimestamp", at.timestamp());
        }
        return out;
    }

    private static ListOffsetsResultInfo listOffset(Admin admin, TopicPartition tp, OffsetSpec spec,
                                                    IsolationLevel isolation) throws Exception {
        return admin.listOffsets(Map.of(tp, spec), new ListOffsetsOptions(isolation)).partitionResult(tp).get();
    }

    // -- create-topics --------------------------------------------------------------------------

    private static void createTopics(Args args) throws Exception {
        List<NewTopic> topics = new ArrayList<>();
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        for (String line; (line = in.readLine()) != null; ) {
            if (line.isBlank()) {
                continue;
            }
            JsonNode spec = JSON.readTree(line);
            Map<String, String> configs = new HashMap<>();
            spec.path("configs").fields().forEachRemaining(e -> configs.put(e.getKey(), e.getValue().asText()));
            topics.add(new NewTopic(spec.get("topic").asText(), spec.path("partitions").asInt(1), (short) 1)
                    .configs(configs));
        }
        try (Admin admin = Admin.create(args.clientProperties())) {
            admin.createTopics(topics).all().get();
        }
        for (NewTopic t : topics) {
            System.out.println(JSON.createObjectNode().put("topic", t.name()));
        }
    }

    // -- commit ---------------------------------------------------------------------------------

    private static void commit(Args args) {
        Properties props = args.clientProperties();
        props.put("group.id", args.get("--group", null));
        props.put("enable.auto.commit", "false");
        props.put("auto.offset.reset", "earliest");
        props.put("key.deserializer", ByteArrayDeserializer.class.getName());
        props.put("value.deserializer", ByteArrayDeserializer.class.getName());
        Map<TopicPartition, OffsetAndMetadata> offsets = new LinkedHashMap<>();
        for (String tpo : args.all("--tp")) {
            String[] parts = tpo.split(":");
            offsets.put(new TopicPartition(parts[0], Integer.parseInt(parts[1])),
                    new OffsetAndMetadata(Long.parseLong(parts[2]), args.get("--metadata", "")));
        }
        try (KafkaConsumer<byte[], byte[]> consumer = new KafkaConsumer<>(props)) {
            if (args.has("--subscribe")) {
                joinFor(consumer, offsets.keySet());
            } else {
                consumer.assign(offsets.keySet());
            }
            consumer.commitSync(offsets);
            offsets.forEach((tp, om) -> {
                ObjectNode out = JSON.createObjectNode();
                out.put("group", args.get("--group", null)).put("topic", tp.topic()).put("partition", tp.partition())
                   .put("committed", om.offset());
                System.out.println(out);
            });
        }
    }

    /** Subscribe to the partitions' topics and poll (fetching nothing) until all are assigned. */
    private static void joinFor(KafkaConsumer<byte[], byte[]> consumer, Set<TopicPartition> partitions) {
        consumer.subscribe(partitions.stream().map(TopicPartition::topic).distinct().toList());
        long deadline = System.nanoTime() + DEADLINE.toNanos();
        while (!consumer.assignment().containsAll(partitions)) {
            if (System.nanoTime() > deadline) {
                throw new IllegalStateException("not assigned " + partitions + " within " + DEADLINE);
            }
            consumer.poll(POLL);
            consumer.pause(consumer.assignment());
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
                if (argv[i].equals("--base64") || argv[i].equals("--subscribe")) {
                    options.computeIfAbsent(argv[i], k -> new ArrayList<>()).add("");
                } else if (argv[i].startsWith("--")) {
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

        boolean base64() {
            return has("--base64");
        }

        List<TopicPartition> partitions() {
            List<TopicPartition> out = new ArrayList<>();
            if (has("--topic")) {
                out.add(new TopicPartition(get("--topic", null), Integer.parseInt(get("--partition", "0"))));
            }
            for (String tp : all("--tp")) {
                int colon = tp.lastIndexOf(':');
                out.add(new TopicPartition(tp.substring(0, colon), Integer.parseInt(tp.substring(colon + 1))));
            }
            return out;
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
