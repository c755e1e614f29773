package pylog.spark;

import java.io.IOException;
import java.nio.ByteBuffer;

/** Kafka's sparse offset index (docs/format/index.md): 8-byte entries of (offset - base, position). */
final class OffsetIndex {
    private OffsetIndex() {}

    /** The position to start reading {@code segment} for {@code target}: that of the last entry
     *  at or below it, or 0 without a usable index. Cost: one read of the .index file (one GET
     *  on object storage). */
    static int position(PartitionDir dir, String segment, long target, int segmentBytes) throws IOException {
        byte[] index = dir.readAll(SegmentFiles.sibling(segment, ".index"));
        if (index == null) return 0;
        ByteBuffer entries = ByteBuffer.wrap(index);
        long base = SegmentFiles.baseOffset(segment);
        int n = entries.limit() / 8;
        while (n > 1 && entries.getLong((n - 1) * 8) == 0) n--; // preallocated, unwritten tail
        int lo = 0, hi = n - 1, found = -1;
        while (lo <= hi) {
            int mid = (lo + hi) >>> 1;
            long offset = base + entries.getInt(mid * 8);
            if (offset <= target) {
                found = mid;
                lo = mid + 1;
            } else {
                hi = mid - 1;
            }
        }
        if (found < 0) return 0;
        int pos = entries.getInt(found * 8 + 4);
        return pos >= 0 && pos < segmentBytes ? pos : 0;
    }
}
