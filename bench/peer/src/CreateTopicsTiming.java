import java.util.ArrayList;
import java.util.Collection;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Properties;
import java.util.concurrent.ExecutionException;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.clients.admin.CreatePartitionsOptions;
import org.apache.kafka.clients.admin.CreateTopicsOptions;
import org.apache.kafka.clients.admin.DescribeClusterOptions;
import org.apache.kafka.clients.admin.DescribeTopicsOptions;
import org.apache.kafka.clients.admin.NewPartitions;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.admin.TopicDescription;
import org.apache.kafka.common.Node;
import org.apache.kafka.common.TopicPartitionInfo;

/**
 * Times topic creation as a client sees it: TOPICS topics of PARTITIONS partitions each
 * (replication factor RF), sent in createTopics calls of at most TOPICS_PER_REQUEST topics
 * one after the other, then describeTopics polled until every partition of every topic has a
 * leader. With PARTITIONS_PER_REQUEST below PARTITIONS, each topic is created with that many
 * partitions and grown to PARTITIONS by createPartitions calls adding at most that many each
 * (one topic per call): Kafka's controller refuses a request making more than 10,000
 * metadata records, and a topic of 10,000 partitions makes 10,001. The clock starts just before the first createTopics call (the admin client has
 * already connected and seen the cluster, so connection set-up is not counted) and stops
 * when the first describeTopics answer shows all the leaders. Prints one JSON line.
 *
 * <p>Topics are named PREFIX when TOPICS is 1, else PREFIX-0 .. PREFIX-(TOPICS-1).
 *
 * <pre>
 * CreateTopicsTiming BOOTSTRAP TIMEOUT_MS PREFIX TOPICS PARTITIONS RF [TOPICS_PER_REQUEST [PARTITIONS_PER_REQUEST]]
 * </pre>
 */
public final class CreateTopicsTiming {
    private static final int PROBE_TIMEOUT_MS = 10000;
    private static final long POLL_INTERVAL_MS = 50;

    private CreateTopicsTiming() {}

    public static void main(String[] args) throws Exception {
        if (args.length < 6 || args.length > 8) {
            System.err.println("usage: CreateTopicsTiming BOOTSTRAP TIMEOUT_MS PREFIX TOPICS PARTITIONS RF"
                + " [TOPICS_PER_REQUEST [PARTITIONS_PER_REQUEST]]");
            System.exit(2);
        }
        long timeoutMs = Long.parseLong(args[1]);
        String prefix = args[2];
        int topicCount = Integer.parseInt(args[3]);
        int partitions = Integer.parseInt(args[4]);
        short rf = Short.parseShort(args[5]);
        int perRequest = args.length >= 7 ? Integer.parseInt(args[6]) : topicCount;
        int partitionsPerRequest = args.length == 8 ? Integer.parseInt(args[7]) : partitions;
        int firstPartitions = Math.min(partitions, partitionsPerRequest);
        long deadline = System.currentTimeMillis() + timeoutMs;
        List<NewTopic> topics = new ArrayList<>();
        List<String> names = new ArrayList<>();
        for (int i = 0; i < topicCount; i++) {
            String name = topicCount == 1 ? prefix : prefix + "-" + i;
            topics.add(new NewTopic(name, firstPartitions, rf));
            names.add(name);
        }
        Properties props = new Properties();
        props.put(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, args[0]);
        props.put(AdminClientConfig.REQUEST_TIMEOUT_MS_CONFIG, String.valueOf(timeoutMs));
        props.put(AdminClientConfig.DEFAULT_API_TIMEOUT_MS_CONFIG, String.valueOf(timeoutMs));
        try (Admin admin = Admin.create(props)) {
            Collection<Node> nodes = admin.describeCluster(
                new DescribeClusterOptions().timeoutMs(PROBE_TIMEOUT_MS)).nodes().get();
            long start = System.nanoTime();
            int requests = 0;
            for (int from = 0; from < topics.size(); from += perRequest) {
                List<NewTopic> batch = topics.subList(from, Math.min(topics.size(), from + perRequest));
                int remaining = (int) Math.max(1000, deadline - System.currentTimeMillis());
                admin.createTopics(batch, new CreateTopicsOptions().timeoutMs(remaining)).all().get();
                requests++;
            }
            for (String name : names) {
                for (int total = firstPartitions; total < partitions; ) {
                    total = Math.min(partitions, total + partitionsPerRequest);
                    int remaining = (int) Math.max(1000, deadline - System.currentTimeMillis());
                    admin.createPartitions(Map.of(name, NewPartitions.increaseTo(total)),
                        new CreatePartitionsOptions().timeoutMs(remaining)).all().get();
                    requests++;
                }
            }
            long created = System.nanoTime();
            int polls = waitLeaders(admin, names, topicCount * partitions, deadline);
            long end = System.nanoTime();
            System.out.println(String.format(Locale.ROOT,
                "{\"brokers\": %d, \"topics\": %d, \"partitions_per_topic\": %d, \"partitions\": %d, "
                    + "\"replication_factor\": %d, \"requests\": %d, \"describe_polls\": %d, "
                    + "\"create_ms\": %.3f, \"leaders_ms\": %.3f, \"total_ms\": %.3f}",
                nodes.size(), topicCount, partitions, topicCount * partitions, rf, requests, polls,
                (created - start) / 1e6, (end - created) / 1e6, (end - start) / 1e6));
        }
    }

    /** Polls describeTopics until all `expected` partitions have a leader; the polls it took. */
    private static int waitLeaders(Admin admin, List<String> names, int expected, long deadline)
            throws InterruptedException {
        int polls = 0;
        while (true) {
            polls++;
            String missing = null;
            try {
                DescribeTopicsOptions options = new DescribeTopicsOptions().timeoutMs(PROBE_TIMEOUT_MS);
                Map<String, TopicDescription> all = admin.describeTopics(names, options).allTopicNames().get();
                int led = 0;
                for (TopicDescription d : all.values()) {
                    for (TopicPartitionInfo p : d.partitions()) {
                        if (p.leader() == null || p.leader().isEmpty()) {
                            missing = d.name() + "-" + p.partition();
                        } else {
                            led++;
                        }
                    }
                }
                if (missing == null && led != expected) {
                    missing = led + " of " + expected + " partitions described";
                }
            } catch (ExecutionException e) {
                missing = String.valueOf(e.getCause());
            }
            if (missing == null) {
                return polls;
            }
            if (System.currentTimeMillis() > deadline) {
                throw new IllegalStateException("no leader yet for " + missing);
            }
            Thread.sleep(POLL_INTERVAL_MS);
        }
    }
}
