package io.pylog.interop.encode;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import java.io.File;
import java.nio.ByteBuffer;
import java.util.ArrayList;
import java.util.Base64;
import java.util.List;
import org.apache.kafka.common.compress.Compression;
import org.apache.kafka.common.header.Header;
import org.apache.kafka.common.header.internals.RecordHeader;
import org.apache.kafka.common.record.TimestampType;
import org.apache.kafka.common.record.internal.ControlRecordType;
import org.apache.kafka.common.record.internal.EndTransactionMarker;
import org.apache.kafka.common.record.internal.MemoryRecords;
import org.apache.kafka.common.record.internal.MemoryRecordsBuilder;
import org.apache.kafka.common.record.internal.RecordBatch;
import org.apache.kafka.common.utils.ByteBufferOutputStream;

/**
 * The bytes of Kafka's MemoryRecordsBuilder for batches described in JSON, for the test that
 * compares them with pylog's encode_batch (tests/kafka/test_encode_parity.py).
 *
 * <pre>
 * EncodeBatches FILE    FILE: a JSON array of batches, each
 *   {"codec": "none|gzip|snappy|lz4|zstd", "level": int|null, "timestampType": "CreateTime|LogAppendTime",
 *    "logAppendTime": ms, "baseOffset", "producerId", "producerEpoch", "baseSequence", "transactional",
 *    "partitionLeaderEpoch",
 *    "records": [{"timestamp", "key": base64|null, "value": base64|null, "headers": [[key, base64|null]]}],
 *    "marker": null | {"type": "COMMIT|ABORT", "coordinatorEpoch", "timestamp"}}
 * prints one line a batch: its bytes in base64.
 * </pre>
 */
public final class EncodeBatches {
    private static final Base64.Decoder BASE64_IN = Base64.getDecoder();
    private static final Base64.Encoder BASE64_OUT = Base64.getEncoder();

    public static void main(String[] argv) throws Exception {
        for (JsonNode batch : new ObjectMapper().readTree(new File(argv[0]))) {
            System.out.println(BASE64_OUT.encodeToString(encode(batch)));
        }
        System.out.flush();
    }

    private static byte[] encode(JsonNode batch) {
        JsonNode marker = batch.path("marker");
        boolean control = !marker.isMissingNode() && !marker.isNull();
        TimestampType timestampType = "LogAppendTime".equals(batch.path("timestampType").asText("CreateTime"))
            ? TimestampType.LOG_APPEND_TIME : TimestampType.CREATE_TIME;
        MemoryRecordsBuilder builder = new MemoryRecordsBuilder(new ByteBufferOutputStream(ByteBuffer.allocate(1024)),
            RecordBatch.MAGIC_VALUE_V2, compression(batch.path("codec").asText("none"), batch.path("level")),
            timestampType, batch.path("baseOffset").asLong(0), batch.path("logAppendTime").asLong(RecordBatch.NO_TIMESTAMP),
            batch.path("producerId").asLong(-1), (short) batch.path("producerEpoch").asInt(-1),
            batch.path("baseSequence").asInt(-1), batch.path("transactional").asBoolean(false), control,
            batch.path("partitionLeaderEpoch").asInt(-1), Integer.MAX_VALUE);
        if (control) {
            ControlRecordType type = ControlRecordType.valueOf(marker.get("type").asText());
            builder.appendEndTxnMarker(marker.get("timestamp").asLong(),
                new EndTransactionMarker(type, marker.get("coordinatorEpoch").asInt()));
        }
        for (JsonNode record : batch.path("records")) {
            builder.append(record.get("timestamp").asLong(), bytes(record.get("key")), bytes(record.get("value")),
                headers(record.path("headers")));
        }
        ByteBuffer out = builder.build().buffer();
        byte[] bytes = new byte[out.remaining()];
        out.get(bytes);
        return bytes;
    }

    private static Compression compression(String codec, JsonNode level) {
        boolean given = !level.isMissingNode() && !level.isNull();
        switch (codec) {
            case "none": return Compression.NONE;
            case "snappy": return Compression.snappy().build();
            case "gzip": return given ? Compression.gzip().level(level.asInt()).build() : Compression.gzip().build();
            case "lz4": return given ? Compression.lz4().level(level.asInt()).build() : Compression.lz4().build();
            case "zstd": return given ? Compression.zstd().level(level.asInt()).build() : Compression.zstd().build();
            default: throw new IllegalArgumentException("unknown codec " + codec);
        }
    }

    private static byte[] bytes(JsonNode base64) {
        return base64 == null || base64.isNull() ? null : BASE64_IN.decode(base64.asText());
    }

    private static Header[] headers(JsonNode pairs) {
        List<Header> out = new ArrayList<>();
        for (JsonNode pair : pairs) {
            out.add(new RecordHeader(pair.get(0).asText(), bytes(pair.get(1))));
        }
        return out.toArray(new Header[0]);
    }
}
