package pylog.spark;

import java.io.File;
import java.io.FileNotFoundException;
import java.io.IOException;
import java.io.Serializable;
import java.nio.file.Files;
import java.nio.file.NoSuchFileException;
import java.util.HashMap;
import java.util.Map;

import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.fs.FSDataInputStream;
import org.apache.hadoop.fs.FileStatus;
import org.apache.hadoop.fs.FileSystem;
import org.apache.hadoop.fs.Path;
import org.apache.hadoop.util.functional.FutureIO;

/** The files of one partition directory (docs/spark.md, "Object storage"): a local path or
 *  {@code file://} URL, read through java.nio with segments mapped; or a URL of any Hadoop
 *  FileSystem ({@code s3a://}, {@code gs://}, {@code abfss://}, ...), listed and read with
 *  positioned reads through {@link FileSystem}. {@code s3://} is read as {@code s3a://} unless
 *  the Hadoop conf names a FileSystem for {@code s3}. A missing directory is an IOException, a
 *  file missing since the listing a {@link FileNotFoundException}, as for a local directory. */
abstract class PartitionDir {
    final String path;
    /** name -> bytes, from the last {@link #list()}. */
    Map<String, Long> sizes = Map.of();

    private PartitionDir(String path) {
        this.path = path;
    }

    /** Whether {@code dir} names a local directory: no scheme, or {@code file:}. */
    static boolean isLocal(String dir) {
        int colon = dir.indexOf(':');
        return colon < 0 || dir.startsWith("file:") || dir.indexOf('/') < colon;
    }

    /** {@code dir}'s files; {@code conf} (for a non-local {@code dir}) is the session's Hadoop conf. */
    static PartitionDir of(String dir, Configuration conf) throws IOException {
        if (isLocal(dir)) return new Local(dir.startsWith("file:") ? new Path(dir).toUri().getPath() : dir);
        return new Hadoop(dir, conf);
    }

    /** The directory's file names and sizes. */
    abstract Map<String, Long> list() throws IOException;

    /** The file {@code name} of the last listing, to read from front to back. */
    abstract SegmentBytes open(String name) throws IOException;

    /** The whole of file {@code name} of the last listing, or null when there is none. */
    abstract byte[] readAll(String name) throws IOException;

    String pathOf(String name) {
        return path + "/" + name;
    }

    private static final class Local extends PartitionDir {
        private final File dir;

        Local(String path) {
            super(path);
            this.dir = new File(path);
        }

        @Override
        Map<String, Long> list() throws IOException {
            String[] names = dir.list();
            if (names == null) throw new IOException("no partition dir at " + dir);
            Map<String, Long> out = new HashMap<>();
            for (String name : names) out.put(name, -1L);  // sizes are read at open
            sizes = out;
            return out;
        }

        @Override
        SegmentBytes open(String name) throws IOException {
            return SegmentBytes.mapped(new File(dir, name));
        }

        @Override
        byte[] readAll(String name) throws IOException {
            try {
                return Files.readAllBytes(new File(dir, name).toPath());
            } catch (NoSuchFileException | FileNotFoundException e) {
                return null;
            }
        }

        @Override
        String pathOf(String name) {
            return new File(dir, name).getPath();
        }
    }

    private static final class Hadoop extends PartitionDir {
        private final FileSystem fs;
        private final Path dir;

        Hadoop(String url, Configuration conf) throws IOException {
            super(url);
            Path p = new Path(url);
            if ("s3".equals(p.toUri().getScheme()) && conf.get("fs.s3.impl") == null) {
                p = new Path("s3a" + url.substring(2));
            }
            this.dir = p;
            this.fs = p.getFileSystem(conf);
        }

        @Override
        Map<String, Long> list() throws IOException {
            Map<String, Long> out = new HashMap<>();
            FileStatus[] listed;
            try {
                listed = fs.listStatus(dir);
            } catch (FileNotFoundException e) {
                throw new IOException("no partition dir at " + path, e);
            }
            for (FileStatus s : listed) {
                if (s.isFile()) out.put(s.getPath().getName(), s.getLen());
            }
            sizes = out;
            return out;
        }

        @Override
        SegmentBytes open(String name) throws IOException {
            Long size = sizes.get(name);
            if (size == null) throw new FileNotFoundException(pathOf(name));
            FSDataInputStream in = FutureIO.awaitFuture(fs.openFile(new Path(dir, name))
                .opt("fs.option.openfile.read.policy", "sequential")
                .opt("fs.option.openfile.length", Long.toString(size))
                .build());
            return SegmentBytes.windowed(pathOf(name), in, size);
        }

        @Override
        byte[] readAll(String name) throws IOException {
            Long size = sizes.get(name);
            if (size == null) return null;
            if (size > Integer.MAX_VALUE) throw new IOException(pathOf(name) + " is over 2 GiB");
            byte[] out = new byte[(int) size.longValue()];
            try (FSDataInputStream in = FutureIO.awaitFuture(fs.openFile(new Path(dir, name))
                    .opt("fs.option.openfile.read.policy", "whole-file")
                    .opt("fs.option.openfile.length", Long.toString(size))
                    .build())) {
                in.readFully(0, out);
            } catch (FileNotFoundException e) {
                return null;
            }
            return out;
        }
    }

    /** The session's Hadoop conf, shipped to executors with a query's tasks. */
    static final class Conf implements Serializable {
        private static final long serialVersionUID = 1L;
        private final org.apache.spark.util.SerializableConfiguration conf;

        Conf(Configuration conf) {
            this.conf = new org.apache.spark.util.SerializableConfiguration(conf);
        }

        Configuration get() {
            return conf.value();
        }
    }
}
