package io.pylog.interop.clients;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import java.io.BufferedReader;
import java.io.ByteArrayOutputStream;
import java.io.InputStreamReader;
import java.io.PrintStream;
import java.lang.reflect.InvocationTargetException;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;
import org.apache.kafka.common.utils.Exit;

/**
 * Runs several of Kafka's command-line tools in one JVM, one after the other: a JVM start costs
 * seconds, a tool's run milliseconds. stdin: one JSON array a line, {@code ["main.Class", "arg",
 * ...]}; stdout: one JSON object a tool, {@code {"stdout","stderr","returncode"}}, in order.
 * A tool's System.exit (through Kafka's Exit) ends the tool, not the JVM. Tools whose main
 * returns or calls Exit.exit last answer as alone (TransactionsCommand, ConsumerGroupCommand,
 * GetOffsetShell); TopicCommand exits from deep inside and catches that: run it alone.
 */
public final class Tools {
    private static final ObjectMapper JSON = new ObjectMapper();

    /** A tool's call to Exit.exit, carried back to {@link #run}. */
    private static final class Exited extends RuntimeException {
        final int status;

        Exited(int status) {
            super(null, null, false, false);
            this.status = status;
        }
    }

    public static void main(String[] argv) throws Exception {
        PrintStream out = System.out;
        Exit.setExitProcedure((status, message) -> { throw new Exited(status); });
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        for (String line; (line = in.readLine()) != null; ) {
            if (!line.isBlank()) {
                out.println(run(JSON.readTree(line)));
                out.flush();
            }
        }
    }

    private static String run(JsonNode call) throws Exception {
        List<String> args = new ArrayList<>();
        call.forEach(a -> args.add(a.asText()));
        String mainClass = args.remove(0);
        ByteArrayOutputStream stdout = new ByteArrayOutputStream();
        ByteArrayOutputStream stderr = new ByteArrayOutputStream();
        PrintStream savedOut = System.out;
        PrintStream savedErr = System.err;
        int status = 0;
        System.setOut(new PrintStream(stdout, true, StandardCharsets.UTF_8));
        System.setErr(new PrintStream(stderr, true, StandardCharsets.UTF_8));
        try {
            Class.forName(mainClass).getMethod("main", String[].class).invoke(null, (Object) args.toArray(new String[0]));
        } catch (InvocationTargetException e) {
            if (e.getCause() instanceof Exited exited) {
                status = exited.status;
            } else {
                e.getCause().printStackTrace();
                status = 1;
            }
        } finally {
            System.out.flush();
            System.err.flush();
            System.setOut(savedOut);
            System.setErr(savedErr);
        }
        return JSON.createObjectNode()
                .put("stdout", stdout.toString(StandardCharsets.UTF_8))
                .put("stderr", stderr.toString(StandardCharsets.UTF_8))
                .put("returncode", status).toString();
    }
}
