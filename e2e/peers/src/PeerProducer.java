import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.Properties;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.clients.producer.RecordMetadata;
import org.apache.kafka.common.header.internals.RecordHeader;
import org.apache.kafka.common.serialization.ByteArraySerializer;

/**
 * The Java producer as an e2e peer: sends deterministic keyed records with headers and
 * explicit CreateTime timestamps round-robin over the partitions of a topic, waits for every
 * acknowledgement and prints one JSON line per record to stdout:
 * {"index": i, "partition": p, "offset": o, "timestamp": ts}.
 *
 * Records follow the same recipe as e2e/e2e_records.py (keep the two in step):
 * key "key-<i>", value "value-<i>-" + "abcdefghij" * (i % 20), headers index=<i>, source=<source>,
 * timestamp BASE + i * 1000, partition i % partitions.
 *
 * The producer config is Kafka's default (acks=all, idempotence on in 4.x) unless --prop or
 * --acks says otherwise. Exit status 0 only if every record was acknowledged.
 */
public final class PeerProducer {
    static final long BASE_TIMESTAMP_MS = 1_700_000_000_000L;

    public static void main(String[] args) throws Exception {
        String bootstrap = null;
        String topic = null;
        int count = 300;
        int partitions = 3;
        int create = 0;
        String compression = "none";
        String acks = null;
        String source = "java";
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
                case "--partitions":
                    partitions = Integer.parseInt(args[++i]);
                    break;
                case "--create":
                    create = Integer.parseInt(args[++i]);
                    break;
                case "--compression":
                    compression = args[++i];
                    break;
                case "--acks":
                    acks = args[++i];
                    break;
                case "--source":
                    source = args[++i];
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
        if (bootstrap == null || topic == null) {
            fail("--bootstrap-server and --topic are required");
        }

        if (create > 0) {
            Properties ap = new Properties();
            ap.put(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
            try (Admin admin = Admin.create(ap)) {
                admin.createTopics(Collections.singleton(new NewTopic(topic, create, (short) 1)))
                        .all()
                        .get(60, TimeUnit.SECONDS);
            }
        }

        Properties p = new Properties();
        p.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        p.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, ByteArraySerializer.class.getName());
        p.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, ByteArraySerializer.class.getName());
        p.put(ProducerConfig.COMPRESSION_TYPE_CONFIG, compression);
        p.put(ProducerConfig.CLIENT_ID_CONFIG, "strom-e2e-java-producer");
        if (acks != null) {
            p.put(ProducerConfig.ACKS_CONFIG, acks);
        }
        p.putAll(extra);

        List<Future<RecordMetadata>> futures = new ArrayList<>(count);
        try (KafkaProducer<byte[], byte[]> producer = new KafkaProducer<>(p)) {
            for (int i = 0; i < count; i++) {
                ProducerRecord<byte[], byte[]> rec = new ProducerRecord<>(
                        topic,
                        i % partitions,
                        BASE_TIMESTAMP_MS + i * 1000L,
                        utf8("key-" + i),
                        utf8("value-" + i + "-" + "abcdefghij".repeat(i % 20)),
                        List.of(
                                new RecordHeader("index", utf8(Integer.toString(i))),
                                new RecordHeader("source", utf8(source))));
                futures.add(producer.send(rec));
            }
            producer.flush();
            StringBuilder out = new StringBuilder();
            int failed = 0;
            for (int i = 0; i < count; i++) {
                try {
                    RecordMetadata md = futures.get(i).get(60, TimeUnit.SECONDS);
                    out.append("{\"index\": ").append(i)
                            .append(", \"partition\": ").append(md.partition())
                            .append(", \"offset\": ").append(md.offset())
                            .append(", \"timestamp\": ").append(md.timestamp())
                            .append("}\n");
                } catch (ExecutionException e) {
                    failed++;
                    System.err.println("record " + i + " failed: " + e.getCause());
                }
            }
            PrintStream stdout = new PrintStream(System.out, false, StandardCharsets.UTF_8);
            stdout.print(out);
            stdout.flush();
            if (failed > 0) {
                System.err.println(failed + " of " + count + " records were not acknowledged");
                System.exit(1);
            }
        }
    }

    private static byte[] utf8(String s) {
        return s.getBytes(StandardCharsets.UTF_8);
    }

    private static void usage(PrintStream out) {
        out.println("usage: PeerProducer --bootstrap-server HOST:PORT --topic T [--count N=300]"
                + " [--partitions P=3] [--create P] [--compression none|gzip|snappy|lz4|zstd]"
                + " [--acks 0|1|all] [--source NAME=java] [--prop key=value]...");
    }

    private static void fail(String msg) {
        System.err.println("PeerProducer: " + msg);
        usage(System.err);
        System.exit(2);
    }

    private PeerProducer() {}
}
