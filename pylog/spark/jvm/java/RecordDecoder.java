package pylog.spark;

import java.io.IOException;

/** Records of one batch into a {@link RowSink}: v2 records (varint-framed) and legacy
 *  messages (magic 0 and 1, with compressed wrappers). Offsets outside [{@code from}, {@code until})
 *  are left out. Throws {@link IOException} on bytes that do not parse; the caller names the place. */
final class RecordDecoder {
    private final RowSink sink;
    private final long from, until;
    private int pos;

    RecordDecoder(RowSink sink, long from, long until) {
        this.sink = sink;
        this.from = from;
        this.until = until;
    }

    /** v2 records: {@code count} of them in {@code buf[start, end)}. */
    void v2(byte[] buf, int start, int end, int count, long baseOffset, long baseTimestamp, long maxTimestamp,
            boolean logAppendTime) throws IOException {
        pos = start;
        sink.reserve(count);
        int type = logAppendTime ? 1 : 0;
        for (int i = 0; i < count; i++) {
            int length = readVarint(buf, end);
            int recordEnd = pos + length;
            if (length < 0 || recordEnd > end) throw new IOException("record " + i + " of " + length + " bytes does not fit");
            pos++; // attributes
            long tsDelta = readVarlong(buf, recordEnd);
            long offset = baseOffset + readVarint(buf, recordEnd);
            if (offset < from || offset >= until) {
                pos = recordEnd;
                continue;
            }
            int row = sink.addRow();
            sink.setOffset(row, offset);
            sink.setTimestamp(row, logAppendTime ? maxTimestamp : baseTimestamp + tsDelta, type);
            int keyLen = readVarint(buf, recordEnd);
            RowSink.putBytes(sink.key, row, buf, pos, checkLen(keyLen, recordEnd));
            pos += Math.max(keyLen, 0);
            int valueLen = readVarint(buf, recordEnd);
            RowSink.putBytes(sink.value, row, buf, pos, checkLen(valueLen, recordEnd));
            pos += Math.max(valueLen, 0);
            if (sink.headers != null) headers(buf, row, recordEnd);
            pos = recordEnd;
        }
    }

    private void headers(byte[] buf, int row, int recordEnd) throws IOException {
        int n = readVarint(buf, recordEnd);
        int first = sink.beginHeaders();
        for (int h = 0; h < n; h++) {
            int keyLen = checkLen(readVarint(buf, recordEnd), recordEnd);
            if (keyLen < 0) throw new IOException("header key is null");
            int keyOff = pos;
            pos += keyLen;
            int valueLen = checkLen(readVarint(buf, recordEnd), recordEnd);
            sink.addHeader(buf, keyOff, keyLen, pos, valueLen);
            pos += Math.max(valueLen, 0);
        }
        sink.endHeaders(row, first);
    }

    private int checkLen(int len, int limit) throws IOException {
        if (len < -1 || (len > 0 && len > limit - pos)) throw new IOException("field of " + len + " bytes does not fit");
        return len;
    }

    /** The control type (0 abort, 1 commit) in the key of a control batch's first record. */
    static int controlType(byte[] buf, int start, int end) throws IOException {
        RecordDecoder d = new RecordDecoder(null, 0, 0);
        d.pos = start;
        d.readVarint(buf, end);
        d.pos++;
        d.readVarlong(buf, end);
        d.readVarint(buf, end);
        int keyLen = d.readVarint(buf, end);
        if (keyLen < 4 || d.pos + 4 > end) throw new IOException("control record key is too short");
        return Codecs.readShortBE(buf, d.pos + 2);
    }

    /** Legacy messages in {@code buf[start, end)} (one log entry, or a wrapper's inner set).
     *  {@code wrapper} is the compressed wrapper's (offset, timestamp, attributes) or null. */
    void legacy(byte[] buf, int start, int end, long[] wrapper) throws IOException {
        int p = start;
        long lastInner = -1;
        if (wrapper != null) { // v1 inner offsets are relative: the wrapper holds the last one
            for (int q = start; q + 12 <= end; q += 12 + Codecs.readIntBE(buf, q + 8)) lastInner = Codecs.readLongBE(buf, q);
        }
        while (p < end) {
            if (end - p < 12 + 14) throw new IOException("legacy message is cut short");
            long offset = Codecs.readLongBE(buf, p);
            int size = Codecs.readIntBE(buf, p + 8);
            int body = p + 12, bodyEnd = body + size;
            if (size < 14 || bodyEnd > end) throw new IOException("legacy message of " + size + " bytes does not fit");
            long crc = Codecs.readIntBE(buf, body) & 0xFFFFFFFFL;
            java.util.zip.CRC32 c = new java.util.zip.CRC32();
            c.update(buf, body + 4, size - 4);
            if (c.getValue() != crc) throw new IOException("legacy message CRC mismatch (stored " + crc + ", computed " + c.getValue() + ")");
            int magic = buf[body + 4];
            int attributes = buf[body + 5];
            int q = body + 6;
            long ts = -1;
            int tsType = -1;
            if (magic == 1) {
                ts = Codecs.readLongBE(buf, q);
                q += 8;
                tsType = (attributes & 0x08) != 0 ? 1 : 0;
            }
            int keyLen = Codecs.readIntBE(buf, q);
            int keyOff = q + 4;
            q = keyOff + Math.max(keyLen, 0);
            int valueLen = Codecs.readIntBE(buf, q);
            int valueOff = q + 4;
            if (keyLen < -1 || valueLen < -1 || valueOff + Math.max(valueLen, 0) > bodyEnd)
                throw new IOException("legacy message fields do not fit");
            int codec = attributes & 0x07;
            if (codec != Codecs.NONE) {
                if (wrapper != null) throw new IOException("nested compressed legacy message");
                Codecs.Bytes inner = Codecs.decompress(codec, buf, valueOff, Math.max(valueLen, 0), valueLen * 4);
                legacy(inner.data, 0, inner.length, new long[] {offset, ts, tsType, magic});
            } else {
                if (wrapper != null) {
                    if (magic == 1 && wrapper[3] == 1) offset = wrapper[0] - lastInner + offset;
                    if (wrapper[2] == 1) { ts = wrapper[1]; tsType = 1; }
                }
                if (offset >= from && offset < until) {
                    sink.reserve(1);
                    int row = sink.addRow();
                    sink.setOffset(row, offset);
                    sink.setTimestamp(row, ts, tsType);
                    RowSink.putBytes(sink.key, row, buf, keyOff, keyLen);
                    RowSink.putBytes(sink.value, row, buf, valueOff, valueLen);
                    if (sink.headers != null) sink.endHeaders(row, sink.beginHeaders());
                }
            }
            p = bodyEnd;
        }
    }

    private int readVarint(byte[] buf, int limit) throws IOException {
        long v = readVarlong(buf, limit);
        if (v != (int) v) throw new IOException("varint out of range");
        return (int) v;
    }

    private long readVarlong(byte[] buf, int limit) throws IOException {
        long raw = 0;
        for (int shift = 0; shift < 64; shift += 7) {
            if (pos >= limit) throw new IOException("varint is cut short");
            byte b = buf[pos++];
            raw |= (long) (b & 0x7F) << shift;
            if (b >= 0) return (raw >>> 1) ^ -(raw & 1);
        }
        throw new IOException("varint is too long");
    }
}
