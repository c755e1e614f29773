package io.pylog.interop.encode;

import java.io.FileOutputStream;
import java.nio.ByteBuffer;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import org.apache.kafka.common.TopicIdPartition;
import org.apache.kafka.common.Uuid;
import org.apache.kafka.common.compress.Compression;
import org.apache.kafka.common.record.TimestampType;
import org.apache.kafka.common.record.internal.MemoryRecordsBuilder;
import org.apache.kafka.common.record.internal.RecordBatch;
import org.apache.kafka.common.utils.ByteBufferOutputStream;
import org.apache.kafka.server.log.remote.metadata.storage.serialization.RemoteLogMetadataSerde;
import org.apache.kafka.server.log.remote.storage.RemoteLogMetadata;
import org.apache.kafka.server.log.remote.storage.RemoteLogSegmentId;
import org.apache.kafka.server.log.remote.storage.RemoteLogSegmentMetadata;
import org.apache.kafka.server.log.remote.storage.RemoteLogSegmentMetadata.CustomMetadata;
import org.apache.kafka.server.log.remote.storage.RemoteLogSegmentMetadataUpdate;
import org.apache.kafka.server.log.remote.storage.RemoteLogSegmentState;
import org.apache.kafka.server.log.remote.storage.RemotePartitionDeleteMetadata;
import org.apache.kafka.server.log.remote.storage.RemotePartitionDeleteState;

/**
 * A __remote_log_metadata segment as Kafka's TopicBasedRemoteLogMetadataManager writes one: each
 * record's value is RemoteLogMetadataSerde's bytes of one event, no key. The events are one remote
 * segment's life (copy started, finished with custom metadata, deletion started and finished)
 * and its partition's deletion, for tests/kafka/test_dump_parity.py.
 *
 * <pre>
 * RemoteLogMetadataLog FILE.log
 * </pre>
 */
public final class RemoteLogMetadataLog {
    private static final long T0_MS = 1_700_000_000_000L;

    public static void main(String[] argv) throws Exception {
        TopicIdPartition partition = new TopicIdPartition(new Uuid(1L, 2L), 3, "tiered-é");
        RemoteLogSegmentId segment = new RemoteLogSegmentId(partition, new Uuid(-4L, 5L));
        List<RemoteLogMetadata> events = List.of(
            new RemoteLogSegmentMetadata(segment, 0, 99, T0_MS + 10, 1, T0_MS + 20, 4096,
                Optional.empty(), RemoteLogSegmentState.COPY_SEGMENT_STARTED, Map.of(0, 0L, 3, 60L)),
            new RemoteLogSegmentMetadataUpdate(segment, T0_MS + 30, Optional.of(new CustomMetadata(new byte[] {1, 2, 3})),
                RemoteLogSegmentState.COPY_SEGMENT_FINISHED, 1),
            new RemoteLogSegmentMetadataUpdate(segment, T0_MS + 40, Optional.empty(),
                RemoteLogSegmentState.DELETE_SEGMENT_STARTED, 2),
            new RemoteLogSegmentMetadataUpdate(segment, T0_MS + 50, Optional.empty(),
                RemoteLogSegmentState.DELETE_SEGMENT_FINISHED, 2),
            new RemoteLogSegmentMetadata(segment, 100, 100, T0_MS + 60, 2, T0_MS + 70, 1, Optional.empty(),
                RemoteLogSegmentState.COPY_SEGMENT_STARTED, Map.of(7, 100L), true),
            new RemotePartitionDeleteMetadata(partition, RemotePartitionDeleteState.DELETE_PARTITION_MARKED, T0_MS + 80, 2),
            new RemotePartitionDeleteMetadata(partition, RemotePartitionDeleteState.DELETE_PARTITION_FINISHED, T0_MS + 90, 2));
        RemoteLogMetadataSerde serde = new RemoteLogMetadataSerde();
        MemoryRecordsBuilder builder = new MemoryRecordsBuilder(new ByteBufferOutputStream(ByteBuffer.allocate(1024)),
            RecordBatch.MAGIC_VALUE_V2, Compression.NONE, TimestampType.CREATE_TIME, 0, RecordBatch.NO_TIMESTAMP,
            RecordBatch.NO_PRODUCER_ID, RecordBatch.NO_PRODUCER_EPOCH, RecordBatch.NO_SEQUENCE, false, false, 0,
            Integer.MAX_VALUE);
        for (RemoteLogMetadata event : events) {
            builder.append(event.eventTimestampMs(), null, serde.serialize(event));
        }
        ByteBuffer out = builder.build().buffer();
        try (FileOutputStream file = new FileOutputStream(argv[0])) {
            file.getChannel().write(out);
        }
    }
}
