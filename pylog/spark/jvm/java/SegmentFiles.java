package pylog.spark;

import java.io.IOException;
import java.util.ArrayList;
import java.util.List;

/** The segment files a reader sees in a partition directory, by the rule of the Python
 *  reader ({@code live_segment_bases}, docs/format/segment.md): the {@code <base>.log} files,
 *  except where a compaction is caught between its renames. Its cleaned segment is then a
 *  {@code <base>.log.swap}, and it stands in for the segments it replaces, whether they are
 *  still {@code .log} files or already renamed {@code .deleted}. A {@code .swap} at or above
 *  the lowest {@code .cleaned} file is an interrupted split, and the segments it would
 *  replace are still whole: it is ignored. */
final class SegmentFiles {
    static final String LOG = ".log", SWAP = ".swap", CLEANED = ".cleaned";
    private static final int BASE_DIGITS = 20;

    private SegmentFiles() {}

    /** The file names of the live segments of {@code dir}, by base offset. Cost: one listing,
     *  plus a walk of each {@code .swap} file's batch headers from its last index entry. */
    static List<String> live(PartitionDir dir) throws IOException {
        List<Long> plain = new ArrayList<>(), swaps = new ArrayList<>();
        long lowestCleaned = Long.MAX_VALUE;
        for (String name : dir.list().keySet()) {
            long base = baseOf(name);
            if (base < 0) continue;
            String rest = name.substring(BASE_DIGITS);
            if (rest.equals(LOG)) plain.add(base);
            else if (rest.equals(LOG + SWAP)) swaps.add(base);
            else if (rest.endsWith(CLEANED)) lowestCleaned = Math.min(lowestCleaned, base);
        }
        List<long[]> replaced = new ArrayList<>();  // [swap base, swap end)
        List<String> out = new ArrayList<>();
        for (long base : swaps) {
            if (base >= lowestCleaned) continue;
            String swap = name(base, LOG + SWAP);
            replaced.add(new long[] {base, nextOffset(dir, swap)});
            out.add(swap);
        }
        for (long base : plain) {
            boolean covered = false;
            for (long[] r : replaced) covered |= r[0] <= base && base < r[1];
            if (!covered) out.add(name(base, LOG));
        }
        out.sort((a, b) -> Long.compare(baseOffset(a), baseOffset(b)));
        return out;
    }

    /** The base offset a segment file's name starts with. */
    static long baseOffset(String segment) {
        return Long.parseLong(segment.substring(0, BASE_DIGITS));
    }

    /** The file of kind {@code kind} (".index", ".txnindex", ...) of the segment whose log is
     *  {@code log}: {@code <base>.index} for {@code <base>.log}, {@code <base>.index.swap}
     *  for {@code <base>.log.swap}. */
    static String sibling(String log, String kind) {
        return log.substring(0, BASE_DIGITS) + kind + log.substring(BASE_DIGITS + LOG.length());
    }

    private static String name(long base, String suffix) {
        return String.format("%0" + BASE_DIGITS + "d%s", base, suffix);
    }

    /** The base offset of {@code name} if it is {@code <20 ASCII digits>.<something>}, else -1. */
    private static long baseOf(String name) {
        if (name.length() <= BASE_DIGITS || name.charAt(BASE_DIGITS) != '.') return -1;
        for (int i = 0; i < BASE_DIGITS; i++) {
            char c = name.charAt(i);
            if (c < '0' || c > '9') return -1;
        }
        return Long.parseLong(name.substring(0, BASE_DIGITS));
    }

    /** One past the last offset of the segment {@code log} of {@code dir} (at least its base
     *  offset + 1): its whole batches' headers, walked from its last offset-index entry. */
    static long nextOffset(PartitionDir dir, String log) throws IOException {
        long base = baseOffset(log), last = base - 1;
        try (SegmentBytes bytes = dir.open(log)) {
            int size = bytes.size;
            int position = OffsetIndex.position(dir, log, Long.MAX_VALUE, size);
            while (position + 27 <= size) {
                int p = bytes.at(position, 27);
                int total = 12 + bytes.window.getInt(p + 8);
                if (total < 26 || total > size - position) break;  // a torn tail ends the segment
                long first = bytes.window.getLong(p);
                last = bytes.window.get(p + 16) == 2 ? first + bytes.window.getInt(p + 23) : first;
                position += total;
            }
        }
        return Math.max(last + 1, base + 1);
    }
}
