import java.io.BufferedReader;
import java.io.BufferedWriter;
import java.io.StringReader;
import java.io.StringWriter;
import java.util.ArrayList;

import py4j.Gateway;
import py4j.commands.CallCommand;

/**
 * Runs Py4J call commands that Python deferred, in order, in one round trip
 * ({@code engine.runtime.deferred_calls}).
 *
 * <p>Each command is what Py4J would have sent on its own, without its leading {@code c} line:
 * the target, the method, the arguments, {@code e}. A target line {@code $k} or an argument line
 * {@code r$k} stands for the object the k-th command of the batch returned. Each command runs
 * through Py4J's own {@code CallCommand}, so methods are resolved, arguments read and results
 * registered exactly as for a call sent alone. A command that names the result of a command
 * that failed does not run: its answer is that command's (the same exception).
 *
 * <p>Compiled by Spark's Janino the first time a call is queued: plain Java, no lambdas.
 */
public final class CallPipeline {
    private Gateway gateway;

    /** The Py4J gateway whose objects the commands name (set once, before {@code run}). */
    public void setGateway(Object gateway) {
        this.gateway = (Gateway) gateway;
    }

    /**
     * Runs {@code commands}; {@code drop} lists (comma-separated) the commands whose results
     * Python no longer holds: they are released once the batch has run. Returns one Py4J
     * answer line per command, each ending with a newline.
     */
    public String run(String commands, String drop) throws Exception {
        String[] lines = commands.split("\n", -1);
        ArrayList ids = new ArrayList();
        ArrayList answers = new ArrayList();
        StringBuilder command = new StringBuilder();
        String failed = null;
        boolean target = true;
        CallCommand call = new CallCommand();
        call.init(gateway, null);
        StringWriter out = new StringWriter();
        BufferedWriter writer = new BufferedWriter(out, 256);
        for (int i = 0; i < lines.length; i++) {
            String line = lines[i];
            if (line.length() == 0 && i == lines.length - 1) {
                break;
            }
            String reference = null;
            if (target && line.startsWith("$")) {
                reference = line.substring(1);
            } else if (line.startsWith("r$")) {
                reference = line.substring(2);
            }
            if (reference != null) {
                int index = Integer.parseInt(reference);
                Object id = ids.get(index);
                if (id == null) {
                    failed = (String) answers.get(index);
                    line = target ? "?" : "r?";
                } else {
                    line = (target ? "" : "r") + id;
                }
            }
            target = false;
            command.append(line).append('\n');
            if (line.equals("e")) {
                String answer = failed != null ? failed : call(command.toString(), call, out, writer);
                answers.add(answer);
                ids.add(isObject(answer) ? answer.substring(3, answer.length() - 1) : null);
                command.setLength(0);
                failed = null;
                target = true;
            }
        }
        if (drop.length() > 0) {
            String[] dropped = drop.split(",");
            for (int i = 0; i < dropped.length; i++) {
                Object id = ids.get(Integer.parseInt(dropped[i]));
                if (id != null) {
                    gateway.deleteObject((String) id);
                }
            }
        }
        StringBuilder result = new StringBuilder();
        for (int i = 0; i < answers.size(); i++) {
            result.append((String) answers.get(i));
        }
        return result.toString();
    }

    /** Whether a Py4J answer returns a JVM object: a reference, array, set, list, map or iterator. */
    static boolean isObject(String answer) {
        return answer.startsWith("!y") && answer.length() > 4 && "rthlag".indexOf(answer.charAt(2)) >= 0;
    }

    private String call(String command, CallCommand call, StringWriter out, BufferedWriter writer)
            throws Exception {
        out.getBuffer().setLength(0);
        // A reader sized to the command: the default 8 KB buffer cost more than the call.
        call.execute("c", new BufferedReader(new StringReader(command), command.length() + 1), writer);
        writer.flush();
        return out.toString();
    }
}
