package pylog.spark;

import java.io.FileNotFoundException;
import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.file.NoSuchFileException;
import java.util.ArrayList;
import java.util.List;
import java.util.zip.CRC32C;

import org.apache.spark.sql.connector.read.PartitionReader;
import org.apache.spark.sql.types.StructType;
import org.apache.spark.sql.vectorized.ColumnarBatch;

/** One task: the records of offsets [start, end) of one partition, read from its segment
 *  files (local, or on a Hadoop FileSystem: {@link PartitionDir}) into column batches
 *  (docs/spark.md, "The JVM reader").
 *
 *  <p>Starts at the position the segment's offset index gives for {@code start}, checks the
 *  CRC of every batch it reads, and fails on a batch that does not parse or check, naming
 *  the file and position: nothing is skipped silently. Offsets must rise through a segment and
 *  stay inside its range [base offset, next segment's base offset), as the Python reader
 *  requires (a batch's base offset lies outside its CRC). When no column needs the records
 *  (e.g. {@code count()}), whole batches inside the range are counted from their headers. */
final class RangeReader implements PartitionReader<ColumnarBatch> {
    private static final int TARGET_ROWS = 4096;
    private static final int V2_HEADER = 61;

    /** Listings a task takes in a row while a writer's compaction or retention renames and
     *  deletes files under it (the Python reader's RELIST_ATTEMPTS). */
    private static final int RELIST_ATTEMPTS = 100;

    private final RangePartition part;
    private final PartitionDir dir;
    private final RowSink sink;
    private RecordDecoder decoder;
    private Transactions aborts;
    private List<String> segments;
    private final CRC32C crc = new CRC32C();
    private int segment = -1;
    /** The segment being read; {@code map} is its window holding the current batch at {@code at}. */
    private String file;
    private SegmentBytes bytes;
    private ByteBuffer map;
    private int position, size, at;
    /** The last offset of the segment's previous batch, and the next segment's base offset. */
    private long previousLast, segmentEnd;
    /** Rows start at {@code from}: the range's start, or after what was read before a relist. */
    private long from, readThrough;
    private int relists;
    /** Where a batch last failed the offset checks: a second failure there, after a relist, is corruption. */
    private String suspect;
    private byte[] buf = new byte[1 << 16];
    private boolean done;

    RangeReader(RangePartition part, StructType required, PartitionDir dir) throws IOException {
        this.part = part;
        this.dir = dir;
        this.sink = new RowSink(required, part.topic, part.partition);
        resumeAt(part.start);
    }

    /** List the segments (again) and read on from {@code offset}: at the start, and when a
     *  file vanished or a batch left its segment's range because a compaction or retention
     *  changed the directory since the last listing. The records kept keep their offsets,
     *  so reading on from the next offset of a fresh listing returns each record once. */
    private void resumeAt(long offset) throws IOException {
        while (true) {
            try {
                List<String> live = SegmentFiles.live(dir);
                if (aborts == null && part.committed) aborts = Transactions.of(part.aborted);
                segments = fromFloorOf(live, offset);
                break;
            } catch (FileNotFoundException | NoSuchFileException e) {
                countRelist(e);
            }
        }
        from = offset;
        readThrough = offset - 1;
        decoder = new RecordDecoder(sink, from, part.end);
        segment = -1;
        closeSegment();
        if (segments.isEmpty()) {
            done = true;
            return;
        }
        long first = SegmentFiles.baseOffset(segments.get(0));
        if (first > offset && offset < part.end && part.failOnDataLoss) {  // retention ran since planning or the last listing
            throw new IOException(part.topic + "-" + part.partition + ": offset " + offset
                + " was removed (the log now starts at " + first + "); set failOnDataLoss=false to skip it");
        }
    }

    private void countRelist(IOException cause) throws IOException {
        if (++relists > RELIST_ATTEMPTS) {
            throw new IOException("the files of " + part.topic + "-" + part.partition + " in " + dir.path + " kept changing "
                + "under the query (" + RELIST_ATTEMPTS + " listings): " + cause.getMessage(), cause);
        }
    }

    /** The segments from the one holding {@code start} on. */
    private static List<String> fromFloorOf(List<String> segments, long start) {
        int first = 0;
        for (int i = 0; i < segments.size(); i++) {
            if (SegmentFiles.baseOffset(segments.get(i)) <= start) first = i;
        }
        return new ArrayList<>(segments.subList(first, segments.size()));
    }

    private void closeSegment() throws IOException {
        map = null;
        if (bytes != null) bytes.close();
        bytes = null;
    }

    private boolean openNext() throws IOException {
        closeSegment();
        if (++segment >= segments.size()) return false;
        file = segments.get(segment);
        try {
            bytes = dir.open(file);
            size = bytes.size;
            position = segment == 0 ? OffsetIndex.position(dir, file, from, size) : 0;
        } catch (FileNotFoundException | NoSuchFileException e) {  // renamed or deleted since the listing
            countRelist(e);
            resumeAt(readThrough + 1);
            return true;
        }
        previousLast = SegmentFiles.baseOffset(file) - 1;
        segmentEnd = segment + 1 < segments.size() ? SegmentFiles.baseOffset(segments.get(segment + 1)) : Long.MAX_VALUE;
        return true;
    }

    @Override
    public boolean next() throws IOException {
        sink.clear();
        while (!done && sink.rows() < TARGET_ROWS) {
            if (bytes == null || position >= size) {
                if (!openNext()) {
                    done = true;
                    break;
                }
                continue;
            }
            readBatch();
        }
        return sink.rows() > 0;
    }

    private IOException corrupt(String what) {
        return new IOException("corrupt batch in " + dir.pathOf(file) + " at position " + position + ": " + what);
    }

    private void readBatch() throws IOException {
        if (size - position < 17) throw corrupt("only " + (size - position) + " bytes left, a batch header is 17+");
        window(V2_HEADER);
        long base = map.getLong(at);
        int length = map.getInt(at + 8);
        int magic = map.get(at + 16);
        if (length < 14 || length > size - position - 12) throw corrupt("batch length " + length + " does not fit the file");
        int total = 12 + length;
        if (magic > 2) throw corrupt("unknown magic " + magic);
        if (magic == 2 && total < V2_HEADER) throw corrupt("v2 batch of " + total + " bytes is shorter than its header");
        window(total);
        // a legacy entry's offset is its last (a compressed wrapper's inner messages end there)
        long last = magic == 2 ? base + map.getInt(at + 23) : base;
        if (!follows(base, last)) return;
        if (magic == 2) {
            readV2(base, total);
        } else {
            readLegacy(base, total);
        }
        position += total;
        readThrough = Math.max(readThrough, last);
    }

    /** Whether a batch of offsets [first, last] follows the previous one inside the segment's
     *  range. When it does not, the listing may be stale (a compaction merged segments since):
     *  the first time at a place, list again and read on (false); the second time, fail. */
    private boolean follows(long first, long last) throws IOException {
        if (first <= previousLast || last < first || last >= segmentEnd) {
            String here = file + "@" + position;
            if (!here.equals(suspect)) {
                suspect = here;
                countRelist(corrupt("batch holds offsets " + first + ".." + last));
                resumeAt(readThrough + 1);
                return false;
            }
            String expected = "after " + previousLast + (segmentEnd == Long.MAX_VALUE ? "" : " and below " + segmentEnd);
            throw corrupt("batch holds offsets " + first + ".." + last + ", expected " + expected);
        }
        previousLast = last;
        return true;
    }

    /** Makes the {@code length} bytes at {@code position} readable at {@code map[at]}. */
    private void window(int length) throws IOException {
        at = bytes.at(position, length);
        map = bytes.window;
    }

    private void readV2(long base, int total) throws IOException {
        long last = base + map.getInt(at + 23);
        if (base >= part.end) {
            done = true;
            return;
        }
        crc.reset();
        crc.update(map.slice(at + 21, total - 21));
        int stored = map.getInt(at + 17);
        if ((int) crc.getValue() != stored) {
            throw corrupt(String.format("CRC mismatch (stored %08x, computed %08x)", stored, (int) crc.getValue()));
        }
        if (last >= part.end - 1) done = true;
        if (last < from) return;
        short attributes = map.getShort(at + 21);
        boolean control = (attributes & 0x20) != 0, transactional = (attributes & 0x10) != 0;
        long producerId = map.getLong(at + 43);
        int count = map.getInt(at + 57);
        if (control) {
            if (aborts != null) aborts.control(producerId, last, () -> controlType(total));
            return;
        }
        if (aborts != null && aborts.skip(producerId, transactional, last)) return;
        if (!sink.needsRecords && base >= from && last < part.end
                && (sink.offset == null || count == last - base + 1)) {
            if (sink.offset == null) {
                sink.addRows(count);  // no column to fill: the rows are only counted
            } else {
                sink.reserve(count);
                for (int i = 0; i < count; i++) sink.setOffset(sink.addRow(), base + i);
            }
            return;
        }
        byte[] batch = copy(total);
        int codec = attributes & 0x07;
        long baseTs = Codecs.readLongBE(batch, 27), maxTs = Codecs.readLongBE(batch, 35);
        boolean appendTime = (attributes & 0x08) != 0;
        try {
            if (codec == Codecs.NONE) {
                decoder.v2(batch, V2_HEADER, total, count, base, baseTs, maxTs, appendTime);
            } else {
                Codecs.Bytes records = Codecs.decompress(codec, batch, V2_HEADER, total - V2_HEADER, (total - V2_HEADER) * 4);
                decoder.v2(records.data, 0, records.length, count, base, baseTs, maxTs, appendTime);
            }
        } catch (IOException | RuntimeException e) {
            throw corrupt(e.getMessage() == null ? e.toString() : e.getMessage());
        }
    }

    private int controlType(int total) throws IOException {
        byte[] batch = copy(total);
        return RecordDecoder.controlType(batch, V2_HEADER, total);
    }

    private void readLegacy(long last, int total) throws IOException {
        if (last < from) return;
        byte[] entry = copy(total);
        try {
            decoder.legacy(entry, 0, total, null);
        } catch (IOException | RuntimeException e) {
            throw corrupt(e.getMessage() == null ? e.toString() : e.getMessage());
        }
        if (last >= part.end - 1) done = true;
    }

    /** The current batch's bytes, in a reused array. */
    private byte[] copy(int total) {
        if (buf.length < total) buf = new byte[Math.max(total, buf.length * 2)];
        map.get(at, buf, 0, total);
        return buf;
    }

    @Override
    public ColumnarBatch get() {
        return sink.batch();
    }

    @Override
    public void close() throws IOException {
        closeSegment();
        sink.close();
    }
}
