import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.concurrent.ExecutionException;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.clients.admin.CreateTopicsOptions;
import org.apache.kafka.clients.admin.DescribeClusterOptions;
import org.apache.kafka.clients.admin.DescribeTopicsOptions;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.admin.TopicDescription;
import org.apache.kafka.common.TopicPartitionInfo;

/**
 * The benchmark's admin steps in one JVM (a kafka-topics.sh call per topic would cost a JVM
 * start each): wait until a broker answers, create topics and wait until every partition has
 * a leader. A slow broker gets the whole TIMEOUT_MS to answer CreateTopics (1,000 partitions
 * can take seconds); the readiness and leader probes give up on one attempt after
 * PROBE_TIMEOUT_MS and retry, so a broker that accepts connections before it serves
 * requests does not stall them. `ready` with MIN_BROKERS (a cluster) waits until the cluster
 * metadata lists at least that many brokers (Kafka lists only unfenced ones).
 *
 * <pre>
 * BenchAdmin BOOTSTRAP ready TIMEOUT_MS [MIN_BROKERS]
 * BenchAdmin BOOTSTRAP create TIMEOUT_MS NAME:PARTITIONS:RF [NAME:PARTITIONS:RF ...]
 * </pre>
 */
public final class BenchAdmin {
    private static final int PROBE_TIMEOUT_MS = 5000;

    private BenchAdmin() {}

    public static void main(String[] args) throws Exception {
        if (args.length < 3) {
            System.err.println("usage: BenchAdmin BOOTSTRAP ready TIMEOUT_MS [MIN_BROKERS] | create TIMEOUT_MS NAME:P:RF ...");
            System.exit(2);
        }
        Properties props = new Properties();
        long timeoutMs = Long.parseLong(args[2]);
        long deadline = System.currentTimeMillis() + timeoutMs;
        props.put(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, args[0]);
        props.put(AdminClientConfig.REQUEST_TIMEOUT_MS_CONFIG, String.valueOf(timeoutMs));
        props.put(AdminClientConfig.DEFAULT_API_TIMEOUT_MS_CONFIG, String.valueOf(timeoutMs));
        try (Admin admin = Admin.create(props)) {
            int minBrokers = args[1].equals("ready") && args.length > 3 ? Integer.parseInt(args[3]) : 1;
            waitReady(admin, minBrokers, deadline);
            if (args[1].equals("create")) {
                List<NewTopic> topics = new ArrayList<>();
                List<String> names = new ArrayList<>();
                for (int i = 3; i < args.length; i++) {
                    String[] parts = args[i].split(":");
                    topics.add(new NewTopic(parts[0], Integer.parseInt(parts[1]), Short.parseShort(parts[2])));
                    names.add(parts[0]);
                }
                int remaining = (int) Math.max(1000, deadline - System.currentTimeMillis());
                admin.createTopics(topics, new CreateTopicsOptions().timeoutMs(remaining)).all().get();
                waitLeaders(admin, names, deadline);
            }
        }
        System.out.println("ok");
    }

    private static void waitReady(Admin admin, int minBrokers, long deadline) throws InterruptedException {
        while (true) {
            String problem;
            try {
                int seen = admin.describeCluster(new DescribeClusterOptions().timeoutMs(PROBE_TIMEOUT_MS))
                    .nodes().get().size();
                if (seen >= minBrokers) {
                    return;
                }
                problem = seen + " of " + minBrokers + " brokers registered";
            } catch (ExecutionException e) {
                problem = String.valueOf(e.getCause());
            }
            if (System.currentTimeMillis() > deadline) {
                throw new IllegalStateException("broker not ready: " + problem);
            }
            Thread.sleep(200);
        }
    }

    private static void waitLeaders(Admin admin, List<String> names, long deadline) throws InterruptedException {
        while (true) {
            String missing = null;
            try {
                DescribeTopicsOptions options = new DescribeTopicsOptions().timeoutMs(PROBE_TIMEOUT_MS);
                Map<String, TopicDescription> all = admin.describeTopics(names, options).allTopicNames().get();
                for (TopicDescription d : all.values()) {
                    for (TopicPartitionInfo p : d.partitions()) {
                        if (p.leader() == null || p.leader().isEmpty()) {
                            missing = d.name() + "-" + p.partition();
                        }
                    }
                }
            } catch (ExecutionException e) {
                missing = String.valueOf(e.getCause());
            }
            if (missing == null) {
                return;
            }
            if (System.currentTimeMillis() > deadline) {
                throw new IllegalStateException("no leader yet for " + missing);
            }
            Thread.sleep(100);
        }
    }
}
