package pylog.spark;

import java.io.File;
import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.file.Files;
import java.util.ArrayList;
import java.util.HashSet;
import java.util.List;
import java.util.Set;

/** read_committed: the aborted transactions of a partition's .txnindex files
 *  (docs/format/txnindex.md), applied to batches in offset order as Kafka's consumer does. */
final class Transactions {
    private static final int ENTRY_BYTES = 34;
    private final long[][] aborted; // (producerId, firstOffset), by firstOffset
    private final Set<Long> open = new HashSet<>();
    private int next;

    interface ControlType {
        int get() throws IOException;
    }

    private Transactions(long[][] aborted) {
        this.aborted = aborted;
    }

    /** Aborted transactions overlapping offsets [start, end), from the .txnindex files of the
     *  live {@code segments} (SegmentFiles.live). Cost: one read of each. */
    static Transactions load(List<File> segments, long start, long end) throws IOException {
        List<long[]> out = new ArrayList<>();
        for (File segment : segments) {
            File f = SegmentFiles.sibling(segment, ".txnindex");
            if (!f.isFile()) continue;
            ByteBuffer b = ByteBuffer.wrap(Files.readAllBytes(f.toPath()));
            for (int p = 0; p + ENTRY_BYTES <= b.limit(); p += ENTRY_BYTES) {
                long pid = b.getLong(p + 2), first = b.getLong(p + 10), last = b.getLong(p + 18);
                if (last >= start && first < end) out.add(new long[] {pid, first});
            }
        }
        out.sort((a, b) -> Long.compare(a[1], b[1]));
        return new Transactions(out.toArray(new long[0][]));
    }

    private void advance(long lastOffset) {
        while (next < aborted.length && aborted[next][1] <= lastOffset) open.add(aborted[next++][0]);
    }

    /** Whether a data batch ending at {@code lastOffset} belongs to an aborted transaction. */
    boolean skip(long producerId, boolean transactional, long lastOffset) {
        advance(lastOffset);
        return transactional && open.contains(producerId);
    }

    /** A control batch: an abort marker closes its producer's aborted transaction. */
    void control(long producerId, long lastOffset, ControlType type) throws IOException {
        advance(lastOffset);
        if (open.contains(producerId) && type.get() == 0) open.remove(producerId);
    }
}
