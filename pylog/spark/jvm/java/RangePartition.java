package pylog.spark;

import org.apache.spark.sql.connector.read.InputPartition;

/** One task: offsets [start, end) of one partition dir, as the Python planner chose them,
 *  with the aborted transactions (producer id, first offset) a read_committed task skips. */
final class RangePartition implements InputPartition {
    private static final long serialVersionUID = 1L;
    final String dir, topic;
    final int partition;
    final long start, end;
    final boolean committed, failOnDataLoss;
    final long[][] aborted;

    RangePartition(String dir, String topic, int partition, long start, long end, boolean committed,
                   boolean failOnDataLoss, long[][] aborted) {
        this.dir = dir;
        this.topic = topic;
        this.partition = partition;
        this.start = start;
        this.end = end;
        this.committed = committed;
        this.failOnDataLoss = failOnDataLoss;
        this.aborted = aborted;
    }
}
