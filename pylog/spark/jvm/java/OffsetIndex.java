package pylog.spark;

import java.io.File;
import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.file.Files;

/** Kafka's sparse offset index (docs/format/index.md): 8-byte entries of (offset - base, position). */
final class OffsetIndex {
    private OffsetIndex() {}

    /** The position to start reading {@code segment} for {@code target}: that of the last entry
     *  at or below it, or 0 without a usable index. Cost: one read of the .index file. */
    static int position(File segment, long target, int segmentBytes) throws IOException {
        File index = SegmentFiles.sibling(segment, ".index");
        if (!index.isFile()) return 0;
        ByteBuffer entries = ByteBuffer.wrap(Files.readAllBytes(index.toPath()));
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
