import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.Properties;
import java.util.concurrent.Semaphore;
import java.util.concurrent.TimeUnit;

import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.serialization.ByteArraySerializer;

/**
 * The Java producer of the chaos test (e2e/test_chaos.py): an idempotent acks=all producer
 * that writes sequence-numbered values "NAME-SEQUENCE" (sequence zero-padded to 9 digits)
 * to partition SEQUENCE % PARTITIONS, at about RATE records a second, until SECONDS have
 * passed; then it waits (up to the delivery timeout) for what is in flight and exits.
 *
 * One JSON line per outcome on stdout, in the order the client reported them:
 * {"ack": "java-000000007", "partition": 1, "offset": 3} or
 * {"failed": "java-000000008", "partition": 2, "error": "TimeoutException: ..."}.
 * A send the client refuses at once (buffer full, fatal producer state) is a "failed" line;
 * after a fatal error the producer is replaced by a new one (a new producer id) and a
 * {"fatal": "..."} line says so. The last line is {"sent": N}, the records it sent.
 * Exit status 0 when the run ended on time, whatever was acknowledged.
 */
public final class PeerSequenceProducer {
    private static final int MAX_IN_FLIGHT_RECORDS = 1000;

    public static void main(String[] args) throws Exception {
        String bootstrap = null;
        String topic = null;
        String name = "java";
        int partitions = 1;
        double seconds = 10;
        double rate = 50;
        int deliveryTimeoutMs = 30_000;
        for (int i = 0; i < args.length; i++) {
            String a = args[i];
            switch (a) {
                case "--help":
                case "-h":
                    usage(System.out);
                    return;
                case "--bootstrap-server":
                    bootstrap = args[++i];
                    break;
                case "--topic":
                    topic = args[++i];
                    break;
                case "--name":
                    name = args[++i];
                    break;
                case "--partitions":
                    partitions = Integer.parseInt(args[++i]);
                    break;
                case "--seconds":
                    seconds = Double.parseDouble(args[++i]);
                    break;
                case "--rate":
                    rate = Double.parseDouble(args[++i]);
                    break;
                case "--delivery-timeout-ms":
                    deliveryTimeoutMs = Integer.parseInt(args[++i]);
                    break;
                default:
                    fail("unknown argument " + a);
            }
        }
        if (bootstrap == null || topic == null) {
            fail("--bootstrap-server and --topic are required");
        }

        Properties p = new Properties();
        p.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        p.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, ByteArraySerializer.class.getName());
        p.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, ByteArraySerializer.class.getName());
        p.put(ProducerConfig.CLIENT_ID_CONFIG, "strom-chaos-" + name);
        p.put(ProducerConfig.ACKS_CONFIG, "all");
        p.put(ProducerConfig.ENABLE_IDEMPOTENCE_CONFIG, "true");
        p.put(ProducerConfig.MAX_IN_FLIGHT_REQUESTS_PER_CONNECTION, "5");
        p.put(ProducerConfig.LINGER_MS_CONFIG, "5");
        p.put(ProducerConfig.REQUEST_TIMEOUT_MS_CONFIG, Integer.toString(Math.min(10_000, deliveryTimeoutMs - 5)));
        p.put(ProducerConfig.DELIVERY_TIMEOUT_MS_CONFIG, Integer.toString(deliveryTimeoutMs));
        p.put(ProducerConfig.MAX_BLOCK_MS_CONFIG, "2000");
        p.put(ProducerConfig.RETRY_BACKOFF_MS_CONFIG, "100");
        p.put(ProducerConfig.METADATA_MAX_AGE_CONFIG, "5000");

        PrintStream out = new PrintStream(System.out, true, StandardCharsets.UTF_8);
        Semaphore inFlight = new Semaphore(MAX_IN_FLIGHT_RECORDS);
        long start = System.nanoTime();
        long end = start + (long) (seconds * 1e9);
        long intervalNs = (long) (1e9 / rate);
        KafkaProducer<byte[], byte[]> producer = new KafkaProducer<>(p);
        long sequence = 0;
        while (System.nanoTime() < end) {
            long due = start + sequence * intervalNs;
            long wait = due - System.nanoTime();
            if (wait > 0) {
                TimeUnit.NANOSECONDS.sleep(wait);
            }
            if (!inFlight.tryAcquire(100, TimeUnit.MILLISECONDS)) {
                continue; // everything is stuck: do not pile up more
            }
            String value = String.format("%s-%09d", name, sequence);
            int partition = (int) (sequence % partitions);
            sequence++;
            try {
                producer.send(
                        new ProducerRecord<>(topic, partition, null, value.getBytes(StandardCharsets.UTF_8)),
                        (md, error) -> {
                            inFlight.release();
                            print(out, value, partition, md == null ? -1 : md.offset(), error);
                        });
            } catch (RuntimeException e) {
                inFlight.release();
                print(out, value, partition, -1, e);
                if (!(e instanceof org.apache.kafka.common.errors.TimeoutException)) {
                    // a fatal state (e.g. an unrecoverable sequence error): start over
                    StringBuilder sb = new StringBuilder("{\"fatal\": ");
                    Json.string(sb, e.getClass().getSimpleName() + ": " + e.getMessage());
                    out.println(sb.append('}'));
                    producer.close(Duration.ZERO);
                    producer = new KafkaProducer<>(p);
                }
            }
        }
        producer.close(Duration.ofMillis(deliveryTimeoutMs + 5_000L));
        out.println("{\"sent\": " + sequence + "}");
        out.flush();
    }

    private static synchronized void print(
            PrintStream out, String value, int partition, long offset, Exception error) {
        StringBuilder sb = new StringBuilder();
        if (error == null) {
            sb.append("{\"ack\": ");
            Json.string(sb, value);
            sb.append(", \"partition\": ").append(partition).append(", \"offset\": ").append(offset);
        } else {
            sb.append("{\"failed\": ");
            Json.string(sb, value);
            sb.append(", \"partition\": ").append(partition).append(", \"error\": ");
            Json.string(sb, error.getClass().getSimpleName() + ": " + error.getMessage());
        }
        sb.append('}');
        out.println(sb);
    }

    private static void usage(PrintStream out) {
        out.println("usage: PeerSequenceProducer --bootstrap-server HOST:PORT --topic T"
                + " [--name NAME=java] [--partitions P=1] [--seconds S=10] [--rate R=50]"
                + " [--delivery-timeout-ms MS=30000]");
    }

    private static void fail(String msg) {
        System.err.println("PeerSequenceProducer: " + msg);
        usage(System.err);
        System.exit(2);
    }

    private PeerSequenceProducer() {}
}
