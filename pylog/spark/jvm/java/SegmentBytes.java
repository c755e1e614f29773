package pylog.spark;

import java.io.IOException;
import java.io.RandomAccessFile;
import java.nio.ByteBuffer;
import java.nio.channels.FileChannel;

import org.apache.hadoop.fs.FSDataInputStream;

/** A segment file's bytes, read front to back: a local file mapped whole, or a file of a Hadoop
 *  FileSystem read in windows of {@link #WINDOW_BYTES} with positioned reads (one ranged GET
 *  each on object storage, or one stream kept open by S3A's sequential read policy). */
abstract class SegmentBytes implements AutoCloseable {
    /** Bytes fetched per positioned read of a remote segment. */
    static final int WINDOW_BYTES = 8 << 20;

    final String path;
    final int size;
    /** The bytes of [start, start + window.limit()) of the file. */
    ByteBuffer window;
    long start;

    private SegmentBytes(String path, long size) throws IOException {
        if (size > Integer.MAX_VALUE) throw new IOException("segment " + path + " is over 2 GiB");
        this.path = path;
        this.size = (int) size;
    }

    /** Makes [position, position + length) readable in {@link #window} and returns the index of
     *  {@code position} there; {@code length} is cut at the end of the file. */
    abstract int at(int position, int length) throws IOException;

    @Override
    public abstract void close() throws IOException;

    /** A local file, mapped: every position is readable as it is. */
    static SegmentBytes mapped(java.io.File file) throws IOException {
        try (RandomAccessFile raf = new RandomAccessFile(file, "r")) {
            SegmentBytes bytes = new SegmentBytes(file.getPath(), raf.length()) {
                @Override
                int at(int position, int length) {
                    return position;
                }

                @Override
                public void close() {
                    window = null;
                }
            };
            bytes.window = raf.getChannel().map(FileChannel.MapMode.READ_ONLY, 0, bytes.size);
            return bytes;
        }
    }

    /** An open stream of a Hadoop FileSystem's file of {@code size} bytes, read in windows. */
    static SegmentBytes windowed(String path, FSDataInputStream in, long size) throws IOException {
        return new SegmentBytes(path, size) {
            private byte[] array = new byte[0];

            @Override
            int at(int position, int length) throws IOException {
                int end = (int) Math.min((long) position + length, size);
                if (window != null && position >= start && end <= start + window.limit()) {
                    return (int) (position - start);
                }
                int n = Math.min(Math.max(end - position, WINDOW_BYTES), size - position);
                if (array.length < n) array = new byte[Math.max(n, Math.min(WINDOW_BYTES, size))];
                in.readFully(position, array, 0, n);
                window = ByteBuffer.wrap(array, 0, n).slice();
                start = position;
                return 0;
            }

            @Override
            public void close() throws IOException {
                window = null;
                in.close();
            }
        };
    }
}
