package pylog.spark;

import java.io.IOException;
import java.util.Arrays;
import java.util.HashSet;
import java.util.Set;

/** read_committed: the aborted transactions the planner found for a task's range (from the
 *  log's checked .txnindex files, or a replay of the log where they are missing or wrong:
 *  docs/format/txnindex.md), applied to batches in offset order as Kafka's consumer does. */
final class Transactions {
    private final long[][] aborted; // (producerId, firstOffset), by firstOffset
    private final Set<Long> open = new HashSet<>();
    private int next;

    interface ControlType {
        int get() throws IOException;
    }

    private Transactions(long[][] aborted) {
        this.aborted = aborted;
    }

    /** The aborted transactions (producer id, first offset) of a range, in any order. */
    static Transactions of(long[][] aborted) {
        long[][] sorted = aborted.clone();
        Arrays.sort(sorted, (a, b) -> Long.compare(a[1], b[1]));
        return new Transactions(sorted);
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
