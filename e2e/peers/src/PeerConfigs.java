import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Collection;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.clients.admin.AlterConfigOp;
import org.apache.kafka.clients.admin.AlterConfigsOptions;
import org.apache.kafka.clients.admin.Config;
import org.apache.kafka.clients.admin.ConfigEntry;
import org.apache.kafka.clients.admin.DescribeConfigsOptions;
import org.apache.kafka.common.config.ConfigResource;

/**
 * The Java AdminClient's config calls as an e2e peer.
 *
 * <pre>
 * PeerConfigs --bootstrap-server B alter (topic|broker) NAME [--validate-only] OP:key[=value]...
 *     OP is set, delete, append or subtract (incrementalAlterConfigs). Prints one JSON line:
 *     {"ok": true} or {"error": "ExceptionClass", "message": "..."}.
 * PeerConfigs --bootstrap-server B describe (topic|broker) NAME [key...]
 *     describeConfigs with synonyms and documentation. Prints one JSON line per config:
 *     {"name": n, "value": v, "source": "DYNAMIC_TOPIC_CONFIG", "readOnly": b,
 *      "sensitive": b, "type": "LONG", "documented": b,
 *      "synonyms": [{"name": n, "value": v, "source": s}, ...]}
 *     or a single {"error": ..., "message": ...} line.
 * </pre>
 *
 * NAME may be "" for the cluster-wide broker defaults. Exit status 0 whenever the call
 * was made (errors are printed, for the test to check), 2 on bad arguments.
 */
public final class PeerConfigs {
    public static void main(String[] args) throws Exception {
        String bootstrap = null;
        List<String> rest = new ArrayList<>();
        boolean validateOnly = false;
        for (int i = 0; i < args.length; i++) {
            switch (args[i]) {
                case "--bootstrap-server":
                    bootstrap = args[++i];
                    break;
                case "--validate-only":
                    validateOnly = true;
                    break;
                default:
                    rest.add(args[i]);
            }
        }
        if (bootstrap == null || rest.size() < 3) {
            fail("--bootstrap-server, a command, a resource type and a name are required");
        }
        String command = rest.get(0);
        ConfigResource resource = new ConfigResource(resourceType(rest.get(1)), rest.get(2));
        List<String> items = rest.subList(3, rest.size());

        Properties p = new Properties();
        p.put(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        p.put(AdminClientConfig.CLIENT_ID_CONFIG, "strom-e2e-java-configs");
        PrintStream stdout = new PrintStream(System.out, false, StandardCharsets.UTF_8);
        try (Admin admin = Admin.create(p)) {
            switch (command) {
                case "alter":
                    alter(admin, resource, items, validateOnly, stdout);
                    break;
                case "describe":
                    describe(admin, resource, items, stdout);
                    break;
                default:
                    fail("unknown command " + command);
            }
        }
        stdout.flush();
    }

    private static void alter(
            Admin admin, ConfigResource resource, List<String> items, boolean validateOnly,
            PrintStream out) throws InterruptedException {
        Collection<AlterConfigOp> ops = new ArrayList<>();
        for (String item : items) {
            int colon = item.indexOf(':');
            if (colon <= 0) {
                fail("expected OP:key[=value], got " + item);
            }
            AlterConfigOp.OpType type = AlterConfigOp.OpType.valueOf(
                    item.substring(0, colon).toUpperCase(java.util.Locale.ROOT));
            String keyValue = item.substring(colon + 1);
            int eq = keyValue.indexOf('=');
            String key = eq < 0 ? keyValue : keyValue.substring(0, eq);
            String value = eq < 0 ? null : keyValue.substring(eq + 1);
            ops.add(new AlterConfigOp(new ConfigEntry(key, value), type));
        }
        try {
            admin.incrementalAlterConfigs(
                            Map.of(resource, ops), new AlterConfigsOptions().validateOnly(validateOnly))
                    .all()
                    .get(60, TimeUnit.SECONDS);
            out.println("{\"ok\": true}");
        } catch (ExecutionException | java.util.concurrent.TimeoutException e) {
            printError(out, e);
        }
    }

    private static void describe(
            Admin admin, ConfigResource resource, List<String> keys, PrintStream out)
            throws InterruptedException {
        Config config;
        try {
            config = admin.describeConfigs(
                            List.of(resource),
                            new DescribeConfigsOptions().includeSynonyms(true).includeDocumentation(true))
                    .all()
                    .get(60, TimeUnit.SECONDS)
                    .get(resource);
        } catch (ExecutionException | java.util.concurrent.TimeoutException e) {
            printError(out, e);
            return;
        }
        for (ConfigEntry entry : config.entries()) {
            if (!keys.isEmpty() && !keys.contains(entry.name())) {
                continue;
            }
            StringBuilder sb = new StringBuilder();
            sb.append("{\"name\": ");
            Json.string(sb, entry.name());
            sb.append(", \"value\": ");
            Json.string(sb, entry.value());
            sb.append(", \"source\": ");
            Json.string(sb, entry.source().name());
            sb.append(", \"readOnly\": ").append(entry.isReadOnly());
            sb.append(", \"sensitive\": ").append(entry.isSensitive());
            sb.append(", \"type\": ");
            Json.string(sb, entry.type().name());
            sb.append(", \"documented\": ").append(entry.documentation() != null);
            sb.append(", \"synonyms\": [");
            boolean first = true;
            for (ConfigEntry.ConfigSynonym synonym : entry.synonyms()) {
                if (!first) {
                    sb.append(", ");
                }
                first = false;
                sb.append("{\"name\": ");
                Json.string(sb, synonym.name());
                sb.append(", \"value\": ");
                Json.string(sb, synonym.value());
                sb.append(", \"source\": ");
                Json.string(sb, synonym.source().name());
                sb.append('}');
            }
            sb.append("]}");
            out.println(sb);
        }
    }

    private static ConfigResource.Type resourceType(String name) {
        switch (name) {
            case "topic":
                return ConfigResource.Type.TOPIC;
            case "broker":
                return ConfigResource.Type.BROKER;
            default:
                fail("resource type must be topic or broker, got " + name);
                throw new AssertionError();
        }
    }

    private static void printError(PrintStream out, Exception e) {
        Throwable cause = e instanceof ExecutionException && e.getCause() != null ? e.getCause() : e;
        StringBuilder sb = new StringBuilder("{\"error\": ");
        Json.string(sb, cause.getClass().getSimpleName());
        sb.append(", \"message\": ");
        Json.string(sb, cause.getMessage());
        sb.append('}');
        out.println(sb);
    }


    private static void fail(String msg) {
        System.err.println("PeerConfigs: " + msg);
        System.err.println("usage: PeerConfigs --bootstrap-server B alter (topic|broker) NAME"
                + " [--validate-only] OP:key[=value]...");
        System.err.println("       PeerConfigs --bootstrap-server B describe (topic|broker) NAME"
                + " [key...]");
        System.exit(2);
    }

    private PeerConfigs() {}
}
