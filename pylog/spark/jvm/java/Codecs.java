package pylog.spark;

import java.io.ByteArrayInputStream;
import java.io.IOException;
import java.io.InputStream;
import java.util.Arrays;
import java.util.zip.GZIPInputStream;

import com.github.luben.zstd.ZstdInputStreamNoFinalizer;
import net.jpountz.lz4.LZ4Factory;
import net.jpountz.lz4.LZ4SafeDecompressor;
import org.xerial.snappy.Snappy;

/** Kafka's four codecs, decompressing a whole batch body into one array (docs/format/batch.md). */
final class Codecs {
    static final int NONE = 0, GZIP = 1, SNAPPY = 2, LZ4 = 3, ZSTD = 4;
    private static final byte[] XERIAL_MAGIC = {(byte) 0x82, 'S', 'N', 'A', 'P', 'P', 'Y', 0};
    private static final int LZ4_MAGIC = 0x184D2204;
    private static final LZ4SafeDecompressor LZ4_BLOCKS = LZ4Factory.fastestInstance().safeDecompressor();

    private Codecs() {}

    /** The decompressed bytes of {@code buf[off, off+len)}; the result's valid length is {@code out.length}. */
    static Bytes decompress(int codec, byte[] buf, int off, int len, int sizeHint) throws IOException {
        switch (codec) {
            case GZIP: return readAll(new GZIPInputStream(new ByteArrayInputStream(buf, off, len), 64 << 10), sizeHint);
            case SNAPPY: return snappy(buf, off, len);
            case LZ4: return lz4(buf, off, len, sizeHint);
            case ZSTD:
                try (InputStream in = new ZstdInputStreamNoFinalizer(new ByteArrayInputStream(buf, off, len))) {
                    return readAll(in, sizeHint);
                }
            default: throw new IOException("unknown compression codec " + codec);
        }
    }

    /** A byte array and how much of it is valid. */
    static final class Bytes {
        final byte[] data;
        final int length;
        Bytes(byte[] data, int length) { this.data = data; this.length = length; }
    }

    private static Bytes readAll(InputStream in, int sizeHint) throws IOException {
        byte[] out = new byte[Math.max(sizeHint, 1024)];
        int n = 0;
        while (true) {
            if (n == out.length) out = Arrays.copyOf(out, out.length * 2);
            int r = in.read(out, n, out.length - n);
            if (r < 0) return new Bytes(out, n);
            n += r;
        }
    }

    /** Kafka's snappy: xerial's stream framing (magic, version, compat, then length-prefixed blocks), or one raw block. */
    private static Bytes snappy(byte[] buf, int off, int len) throws IOException {
        if (len < 16 || !Arrays.equals(buf, off, off + 8, XERIAL_MAGIC, 0, 8)) {
            byte[] out = new byte[Snappy.uncompressedLength(buf, off, len)];
            return new Bytes(out, Snappy.uncompress(buf, off, len, out, 0));
        }
        int pos = off + 16, end = off + len, n = 0;
        byte[] out = new byte[Math.max(len * 2, 1024)];
        while (pos < end) {
            if (end - pos < 4) throw new IOException("snappy block length is cut short");
            int block = readIntBE(buf, pos);
            pos += 4;
            if (block < 0 || block > end - pos) throw new IOException("snappy block of " + block + " bytes does not fit");
            int size = Snappy.uncompressedLength(buf, pos, block);
            if (n + size > out.length) out = Arrays.copyOf(out, Math.max(out.length * 2, n + size));
            n += Snappy.uncompress(buf, pos, block, out, n);
            pos += block;
        }
        return new Bytes(out, n);
    }

    /** Kafka's LZ4 frames (magic, FLG, BD, optional content size, header checksum, blocks, end mark).
     *  The header checksum is not checked: magic-0 messages carry Kafka's old, wrong one, and the
     *  batch CRC already covers these bytes. */
    private static Bytes lz4(byte[] buf, int off, int len, int sizeHint) throws IOException {
        int pos = off, end = off + len, n = 0;
        byte[] out = new byte[Math.max(sizeHint, 1024)];
        while (pos < end) {
            if (end - pos < 7 || readIntLE(buf, pos) != LZ4_MAGIC) throw new IOException("not an LZ4 frame");
            int flg = buf[pos + 4] & 0xFF;
            int maxBlock = 1 << (8 + 2 * ((buf[pos + 5] >> 4) & 7));
            boolean blockChecksum = (flg & 0x10) != 0, contentChecksum = (flg & 0x04) != 0;
            pos += 6 + ((flg & 0x08) != 0 ? 8 : 0) + 1;
            while (true) {
                if (end - pos < 4) throw new IOException("LZ4 frame is cut short");
                int size = readIntLE(buf, pos);
                pos += 4;
                if (size == 0) break;
                boolean raw = (size & 0x80000000) != 0;
                size &= 0x7FFFFFFF;
                if (size > end - pos) throw new IOException("LZ4 block of " + size + " bytes does not fit");
                if (n + maxBlock > out.length) out = Arrays.copyOf(out, Math.max(out.length * 2, n + maxBlock));
                if (raw) {
                    System.arraycopy(buf, pos, out, n, size);
                    n += size;
                } else {
                    n += LZ4_BLOCKS.decompress(buf, pos, size, out, n, out.length - n);
                }
                pos += size + (blockChecksum ? 4 : 0);
            }
            pos += contentChecksum ? 4 : 0;
        }
        return new Bytes(out, n);
    }

    static int readIntBE(byte[] b, int p) {
        return ((b[p] & 0xFF) << 24) | ((b[p + 1] & 0xFF) << 16) | ((b[p + 2] & 0xFF) << 8) | (b[p + 3] & 0xFF);
    }

    static int readIntLE(byte[] b, int p) {
        return (b[p] & 0xFF) | ((b[p + 1] & 0xFF) << 8) | ((b[p + 2] & 0xFF) << 16) | ((b[p + 3] & 0xFF) << 24);
    }

    static long readLongBE(byte[] b, int p) {
        return ((long) readIntBE(b, p) << 32) | (readIntBE(b, p + 4) & 0xFFFFFFFFL);
    }

    static short readShortBE(byte[] b, int p) {
        return (short) (((b[p] & 0xFF) << 8) | (b[p + 1] & 0xFF));
    }
}
