import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Properties;

import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.common.PartitionInfo;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.header.Header;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;

/**
 * The Java consumer as an e2e peer, without a consumer group: assigns every partition of a
 * topic, seeks to the beginning, polls until --count records arrived or --timeout-ms passed,
 * and prints each record as one JSON line to stdout:
 * {"partition": p, "offset": o, "key": "...", "value": "...", "headers": [["k", "v"], ...],
 *  "timestamp": ts, "timestampType": "CreateTime"}.
 * Keys, values and header values are decoded as UTF-8 (null stays null).
 * Exit status 0 when --count records were read, 3 on the deadline.
 */
public final class PeerConsumer {
    public static void main(String[] args) throws Exception {
        String bootstrap = null;
        String topic = null;
        int count = -1;
        long timeoutMs = 60_000;
        Properties extra = new Properties();
        for (int i = 0; i < args.length; i++) {
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
                case "--count":
                    count = Integer.parseInt(args[++i]);
                    break;
                case "--timeout-ms":
                    timeoutMs = Long.parseLong(args[++i]);
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
        if (bootstrap == null || topic == null || count < 0) {
            fail("--bootstrap-server, --topic and --count are required");
        }

        Properties p = new Properties();
        p.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        p.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class.getName());
        p.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class.getName());
        p.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, "false");
        p.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "earliest");
        p.put(ConsumerConfig.CHECK_CRCS_CONFIG, "true");
        p.put(ConsumerConfig.CLIENT_ID_CONFIG, "strom-e2e-java-consumer");
        p.putAll(extra);

        long deadline = System.currentTimeMillis() + timeoutMs;
        PrintStream stdout = new PrintStream(System.out, false, StandardCharsets.UTF_8);
        int seen = 0;
        try (KafkaConsumer<byte[], byte[]> consumer = new KafkaConsumer<>(p)) {
            List<PartitionInfo> infos = consumer.partitionsFor(topic, Duration.ofMillis(timeoutMs));
            List<TopicPartition> tps = new ArrayList<>();
            for (PartitionInfo info : infos) {
                tps.add(new TopicPartition(info.topic(), info.partition()));
            }
            if (tps.isEmpty()) {
                System.err.println("PeerConsumer: topic " + topic + " has no partitions");
                System.exit(3);
            }
            consumer.assign(tps);
            consumer.seekToBeginning(tps);
            while (seen < count) {
                long left = deadline - System.currentTimeMillis();
                if (left <= 0) {
                    break;
                }
                ConsumerRecords<byte[], byte[]> records =
                        consumer.poll(Duration.ofMillis(Math.min(left, 500)));
                for (ConsumerRecord<byte[], byte[]> r : records) {
                    stdout.println(toJson(r));
                    seen++;
                }
            }
        }
        stdout.flush();
        if (seen < count) {
            System.err.println("PeerConsumer: read " + seen + " of " + count
                    + " records before the deadline");
            System.exit(3);
        }
    }

    private static String toJson(ConsumerRecord<byte[], byte[]> r) {
        StringBuilder sb = new StringBuilder();
        sb.append("{\"partition\": ").append(r.partition());
        sb.append(", \"offset\": ").append(r.offset());
        sb.append(", \"key\": ");
        Json.string(sb, r.key());
        sb.append(", \"value\": ");
        Json.string(sb, r.value());
        sb.append(", \"headers\": [");
        boolean first = true;
        for (Header h : r.headers()) {
            if (!first) {
                sb.append(", ");
            }
            first = false;
            sb.append('[');
            Json.string(sb, h.key().getBytes(StandardCharsets.UTF_8));
            sb.append(", ");
            Json.string(sb, h.value());
            sb.append(']');
        }
        sb.append("], \"timestamp\": ").append(r.timestamp());
        sb.append(", \"timestampType\": \"").append(r.timestampType().name).append("\"}");
        return sb.toString();
    }


    private static void usage(PrintStream out) {
        out.println("usage: PeerConsumer --bootstrap-server HOST:PORT --topic T --count N"
                + " [--timeout-ms MS=60000] [--prop key=value]...");
    }

    private static void fail(String msg) {
        System.err.println("PeerConsumer: " + msg);
        usage(System.err);
        System.exit(2);
    }

    private PeerConsumer() {}
}
