import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collection;
import java.util.Collections;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.TreeMap;
import java.util.TreeSet;
import java.util.concurrent.atomic.AtomicBoolean;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.clients.admin.ConsumerGroupDescription;
import org.apache.kafka.clients.admin.ConsumerGroupListing;
import org.apache.kafka.clients.admin.MemberDescription;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRebalanceListener;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.common.KafkaException;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.errors.WakeupException;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;

/**
 * The Java consumer as a consumer-group member for the e2e group tests (classic protocol).
 *
 * <p>Member mode (default): subscribes to --topic with --group, and prints one JSON line per
 * event to stdout, each with "t" = System.nanoTime() (CLOCK_MONOTONIC on Linux, the same
 * clock as Python's time.monotonic_ns(), so events of several processes can be ordered):
 * <pre>
 * {"t": ns, "event": "subscribed"}
 * {"t": ns, "event": "assigned"|"revoked"|"lost", "partitions": [..], "owned": [..]}
 * {"t": ns, "event": "record", "partition": p, "offset": o, "key": "..", "value": ".."}
 * {"t": ns, "event": "committed", "offsets": {"p": next offset, ..}}
 * {"t": ns, "event": "commit_failed", "error": ".."}
 * {"t": ns, "event": "closed", "reason": "stdin"|"max-records"|"deadline"}
 * </pre>
 * After every poll that returned records it commits their next offsets synchronously (with
 * --commit-metadata as metadata). It stops, closing the consumer (LeaveGroup), when a line
 * or EOF arrives on stdin, after the poll that reached --max-records, or at --timeout-ms
 * (exit status 3).
 *
 * <p>Admin mode ({@code PeerGroupConsumer admin --bootstrap-server B [--group G]...}): prints
 * one JSON object with Admin.listConsumerGroups, describeConsumerGroups and
 * listConsumerGroupOffsets of each --group.
 */
public final class PeerGroupConsumer {
    private static final PrintStream OUT = new PrintStream(System.out, true, StandardCharsets.UTF_8);

    public static void main(String[] args) throws Exception {
        boolean admin = args.length > 0 && args[0].equals("admin");
        String bootstrap = null;
        String topic = null;
        String commitMetadata = "";
        List<String> groups = new ArrayList<>();
        int maxRecords = -1;
        long timeoutMs = 120_000;
        Properties extra = new Properties();
        for (int i = admin ? 1 : 0; i < args.length; i++) {
            String a = args[i];
            switch (a) {
                case "--help":
                case "-h":
                    usage(System.out);
                    return;
                case "--bootstrap-server":
                case "--bootstrap":
                    bootstrap = args[++i];
                    break;
                case "--topic":
                    topic = args[++i];
                    break;
                case "--group":
                    groups.add(args[++i]);
                    break;
                case "--max-records":
                    maxRecords = Integer.parseInt(args[++i]);
                    break;
                case "--timeout-ms":
                    timeoutMs = Long.parseLong(args[++i]);
                    break;
                case "--commit-metadata":
                    commitMetadata = args[++i];
                    break;
                case "--prop": {
                    String kv = args[++i];
                    int eq = kv.indexOf('=');
                    if (eq <= 0) {
                        fail("--prop expects key=value, got " + kv);
                    }
                    extra.setProperty(kv.substring(0, eq), kv.substring(eq + 1));
                    break;
                }
                default:
                    fail("unknown argument " + a);
            }
        }
        if (bootstrap == null) {
            fail("--bootstrap-server is required");
        }
        if (admin) {
            admin(bootstrap, groups, extra);
            return;
        }
        if (topic == null || groups.size() != 1) {
            fail("--topic and one --group are required");
        }
        System.exit(member(bootstrap, topic, groups.get(0), maxRecords, timeoutMs, commitMetadata, extra));
    }

    private static int member(String bootstrap, String topic, String group, int maxRecords,
            long timeoutMs, String commitMetadata, Properties extra) {
        Properties p = new Properties();
        p.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        p.put(ConsumerConfig.GROUP_ID_CONFIG, group);
        p.put(ConsumerConfig.GROUP_PROTOCOL_CONFIG, "classic");
        p.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class.getName());
        p.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class.getName());
        p.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, "false");
        p.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "earliest");
        p.put(ConsumerConfig.CLIENT_ID_CONFIG, "strom-e2e-java-group-consumer");
        p.putAll(extra);

        long deadline = System.currentTimeMillis() + timeoutMs;
        AtomicBoolean stop = new AtomicBoolean(false);
        String reason = "deadline";
        int seen = 0;
        try (KafkaConsumer<byte[], byte[]> consumer = new KafkaConsumer<>(p)) {
            Thread stdin = new Thread(() -> {
                try (BufferedReader in = new BufferedReader(
                        new InputStreamReader(System.in, StandardCharsets.UTF_8))) {
                    in.readLine();
                } catch (Exception e) {
                    // EOF or a closed stdin: stop as well
                }
                stop.set(true);
                consumer.wakeup();
            }, "stdin-watcher");
            stdin.setDaemon(true);
            stdin.start();

            TreeSet<Integer> owned = new TreeSet<>();
            consumer.subscribe(Collections.singletonList(topic), new ConsumerRebalanceListener() {
                @Override
                public void onPartitionsRevoked(Collection<TopicPartition> partitions) {
                    change("revoked", partitions, owned, false);
                }

                @Override
                public void onPartitionsAssigned(Collection<TopicPartition> partitions) {
                    change("assigned", partitions, owned, true);
                }

                @Override
                public void onPartitionsLost(Collection<TopicPartition> partitions) {
                    change("lost", partitions, owned, false);
                }
            });
            emit("{\"event\": \"subscribed\"");
            while (!stop.get()) {
                if (System.currentTimeMillis() >= deadline) {
                    break;
                }
                ConsumerRecords<byte[], byte[]> records;
                try {
                    records = consumer.poll(Duration.ofMillis(200));
                } catch (WakeupException e) {
                    if (stop.get()) {
                        reason = "stdin";
                        break;
                    }
                    continue;
                }
                if (records.isEmpty()) {
                    continue;
                }
                Map<TopicPartition, OffsetAndMetadata> next = new HashMap<>();
                for (ConsumerRecord<byte[], byte[]> r : records) {
                    StringBuilder sb = new StringBuilder("{\"event\": \"record\", \"partition\": ");
                    sb.append(r.partition()).append(", \"offset\": ").append(r.offset());
                    sb.append(", \"key\": ");
                    Json.string(sb, r.key());
                    sb.append(", \"value\": ");
                    Json.string(sb, r.value());
                    emit(sb.toString());
                    next.put(new TopicPartition(r.topic(), r.partition()),
                            new OffsetAndMetadata(r.offset() + 1, r.leaderEpoch(), commitMetadata));
                    seen++;
                }
                if (commit(consumer, next) && maxRecords >= 0 && seen >= maxRecords) {
                    reason = "max-records";
                    break;
                }
                if (stop.get()) {
                    reason = "stdin";
                }
            }
            if (stop.get()) {
                reason = "stdin";
            }
        }
        emit("{\"event\": \"closed\", \"reason\": \"" + reason + "\"");
        return reason.equals("deadline") ? 3 : 0;
    }

    private static boolean commit(KafkaConsumer<byte[], byte[]> consumer,
            Map<TopicPartition, OffsetAndMetadata> next) {
        while (true) {
            try {
                consumer.commitSync(next, Duration.ofSeconds(30));
                StringBuilder sb = new StringBuilder("{\"event\": \"committed\", \"offsets\": {");
                boolean first = true;
                for (Map.Entry<Integer, OffsetAndMetadata> e : new TreeMap<>(byPartition(next)).entrySet()) {
                    sb.append(first ? "" : ", ").append('"').append(e.getKey()).append("\": ")
                            .append(e.getValue().offset());
                    first = false;
                }
                emit(sb.append('}').toString());
                return true;
            } catch (WakeupException e) {
                // the stop request arrived during the commit: finish the commit first
                continue;
            } catch (KafkaException e) { // CommitFailedException, RebalanceInProgressException, ...
                StringBuilder sb = new StringBuilder("{\"event\": \"commit_failed\", \"error\": ");
                Json.string(sb, e.toString().getBytes(StandardCharsets.UTF_8));
                emit(sb.toString());
                return false;
            }
        }
    }

    private static Map<Integer, OffsetAndMetadata> byPartition(Map<TopicPartition, OffsetAndMetadata> m) {
        Map<Integer, OffsetAndMetadata> out = new HashMap<>();
        for (Map.Entry<TopicPartition, OffsetAndMetadata> e : m.entrySet()) {
            out.put(e.getKey().partition(), e.getValue());
        }
        return out;
    }

    private static void change(String event, Collection<TopicPartition> partitions,
            TreeSet<Integer> owned, boolean add) {
        TreeSet<Integer> ps = new TreeSet<>();
        for (TopicPartition tp : partitions) {
            ps.add(tp.partition());
        }
        if (add) {
            owned.addAll(ps);
        } else {
            owned.removeAll(ps);
        }
        emit("{\"event\": \"" + event + "\", \"partitions\": " + ps + ", \"owned\": " + owned);
    }

    /** Prints one event line: `body` is a JSON object without its closing brace or "t". */
    private static synchronized void emit(String body) {
        OUT.println("{\"t\": " + System.nanoTime() + ", " + body.substring(1) + "}");
    }

    @SuppressWarnings({"deprecation", "removal"})
    private static void admin(String bootstrap, List<String> groups, Properties extra) throws Exception {
        Properties p = new Properties();
        p.put(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        p.put(AdminClientConfig.CLIENT_ID_CONFIG, "strom-e2e-java-group-admin");
        p.putAll(extra);
        StringBuilder sb = new StringBuilder("{\"groups\": [");
        try (Admin admin = Admin.create(p)) {
            boolean first = true;
            for (ConsumerGroupListing g : admin.listConsumerGroups().all().get()) {
                sb.append(first ? "" : ", ").append("{\"groupId\": ");
                first = false;
                Json.string(sb, g.groupId());
                sb.append(", \"state\": ");
                Json.string(sb, g.groupState().map(Object::toString).orElse(null));
                sb.append(", \"type\": ");
                Json.string(sb, g.type().map(Object::toString).orElse(null));
                sb.append(", \"isSimple\": ").append(g.isSimpleConsumerGroup()).append('}');
            }
            sb.append("], \"described\": {");
            Map<String, ConsumerGroupDescription> described = groups.isEmpty()
                    ? Collections.emptyMap() : admin.describeConsumerGroups(groups).all().get();
            first = true;
            for (String id : groups) {
                ConsumerGroupDescription d = described.get(id);
                sb.append(first ? "" : ", ");
                first = false;
                Json.string(sb, id);
                sb.append(": {\"state\": ");
                Json.string(sb, d.groupState().toString());
                sb.append(", \"type\": ");
                Json.string(sb, d.type() == null ? null : d.type().toString());
                sb.append(", \"isSimple\": ").append(d.isSimpleConsumerGroup());
                sb.append(", \"partitionAssignor\": ");
                Json.string(sb, d.partitionAssignor());
                sb.append(", \"coordinator\": ").append(d.coordinator() == null ? "null" : d.coordinator().id());
                sb.append(", \"members\": [");
                boolean firstMember = true;
                for (MemberDescription m : d.members()) {
                    sb.append(firstMember ? "" : ", ").append("{\"memberId\": ");
                    firstMember = false;
                    Json.string(sb, m.consumerId());
                    sb.append(", \"groupInstanceId\": ");
                    Json.string(sb, m.groupInstanceId().orElse(null));
                    sb.append(", \"clientId\": ");
                    Json.string(sb, m.clientId());
                    sb.append(", \"host\": ");
                    Json.string(sb, m.host());
                    sb.append(", \"assignment\": [");
                    boolean firstTp = true;
                    for (TopicPartition tp : m.assignment().topicPartitions()) {
                        sb.append(firstTp ? "" : ", ").append('[');
                        firstTp = false;
                        Json.string(sb, tp.topic());
                        sb.append(", ").append(tp.partition()).append(']');
                    }
                    sb.append("]}");
                }
                sb.append("]}");
            }
            sb.append("}, \"offsets\": {");
            first = true;
            for (String id : groups) {
                sb.append(first ? "" : ", ");
                first = false;
                Json.string(sb, id);
                sb.append(": [");
                Map<TopicPartition, OffsetAndMetadata> offsets =
                        admin.listConsumerGroupOffsets(id).partitionsToOffsetAndMetadata().get();
                boolean firstTp = true;
                for (Map.Entry<TopicPartition, OffsetAndMetadata> e : offsets.entrySet()) {
                    sb.append(firstTp ? "" : ", ").append("{\"topic\": ");
                    firstTp = false;
                    Json.string(sb, e.getKey().topic());
                    sb.append(", \"partition\": ").append(e.getKey().partition());
                    OffsetAndMetadata om = e.getValue();
                    if (om == null) {
                        sb.append(", \"offset\": null}");
                        continue;
                    }
                    sb.append(", \"offset\": ").append(om.offset());
                    sb.append(", \"metadata\": ");
                    Json.string(sb, om.metadata());
                    sb.append(", \"leaderEpoch\": ").append(om.leaderEpoch().map(Object::toString).orElse("null"));
                    sb.append('}');
                }
                sb.append(']');
            }
            sb.append("}}");
        }
        OUT.println(sb);
    }



    private static void usage(PrintStream out) {
        out.println("usage: PeerGroupConsumer --bootstrap-server HOST:PORT --topic T --group G"
                + " [--max-records N] [--timeout-ms MS=120000] [--commit-metadata S]"
                + " [--prop key=value]...\n"
                + "       PeerGroupConsumer admin --bootstrap-server HOST:PORT [--group G]..."
                + " [--prop key=value]...");
    }

    private static void fail(String msg) {
        System.err.println("PeerGroupConsumer: " + msg);
        usage(System.err);
        System.exit(2);
    }

    private PeerGroupConsumer() {}
}
