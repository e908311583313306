import java.io.FileDescriptor;
import java.io.FileOutputStream;
import java.io.PrintStream;
import java.time.Instant;
import java.util.List;
import java.util.Properties;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.locks.LockSupport;
import java.util.stream.Collectors;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.clients.admin.DescribeMetadataQuorumOptions;
import org.apache.kafka.clients.admin.DescribeTopicsOptions;
import org.apache.kafka.clients.admin.TopicDescription;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.Node;
import org.apache.kafka.common.TopicPartitionInfo;
import org.apache.kafka.common.serialization.ByteArraySerializer;

/**
 * F1's load and clock: an idempotent acks=all producer sends one record every INTERVAL_MS to
 * partition 0 of TOPIC (open loop, from one thread) and prints every acknowledgement; an
 * admin client in another thread describes the partition and the metadata quorum every
 * STATE_POLL_MS and prints the partition's leader and ISR and the active controller whenever
 * they change. The harness reads the lines while it kills and
 * restarts brokers. Times are microseconds since the epoch (the harness's clock is the same
 * host's wall clock):
 *
 * <pre>
 * ack SEQ SEND_US ACK_US          record SEQ, sent at SEND_US, acknowledged at ACK_US
 * error SEQ SEND_US ACK_US CLASS  record SEQ failed (the callback's exception)
 * state TIME_US LEADER ISR CONTROLLER
 *                                 partition 0's leader (-1: none), its ISR (ids, comma-separated)
 *                                 and the metadata quorum's leader, the active controller (-1:
 *                                 not known yet; a failed DescribeQuorum keeps the last one)
 * </pre>
 *
 * Runs for at most DURATION_S, or until killed. The producer keeps the client's defaults
 * (retries, backoffs, timeouts) but for acks=all, idempotence and linger.ms=0.
 *
 * <pre>
 * FailoverProbe BOOTSTRAP TOPIC INTERVAL_MS RECORD_SIZE DURATION_S
 * </pre>
 */
public final class FailoverProbe {
    private static final long STATE_POLL_MS = 100;
    private static final int PROBE_TIMEOUT_MS = 1000;
    private static final PrintStream OUT = new PrintStream(new FileOutputStream(FileDescriptor.out), true);

    private FailoverProbe() {}

    public static void main(String[] args) throws Exception {
        if (args.length != 5) {
            System.err.println("usage: FailoverProbe BOOTSTRAP TOPIC INTERVAL_MS RECORD_SIZE DURATION_S");
            System.exit(2);
        }
        String bootstrap = args[0];
        String topic = args[1];
        long intervalNs = TimeUnit.MILLISECONDS.toNanos(Long.parseLong(args[2]));
        int size = Integer.parseInt(args[3]);
        long endNs = System.nanoTime() + TimeUnit.SECONDS.toNanos(Long.parseLong(args[4]));

        Properties pprops = new Properties();
        pprops.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        pprops.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, ByteArraySerializer.class.getName());
        pprops.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, ByteArraySerializer.class.getName());
        pprops.put(ProducerConfig.ACKS_CONFIG, "all");
        pprops.put(ProducerConfig.ENABLE_IDEMPOTENCE_CONFIG, "true");
        pprops.put(ProducerConfig.LINGER_MS_CONFIG, "0");
        Properties aprops = new Properties();
        aprops.put(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        aprops.put(AdminClientConfig.REQUEST_TIMEOUT_MS_CONFIG, String.valueOf(PROBE_TIMEOUT_MS));
        aprops.put(AdminClientConfig.DEFAULT_API_TIMEOUT_MS_CONFIG, String.valueOf(PROBE_TIMEOUT_MS));

        try (Admin admin = Admin.create(aprops);
             KafkaProducer<byte[], byte[]> producer = new KafkaProducer<>(pprops)) {
            Thread watcher = new Thread(() -> watchPartition(admin, topic, endNs), "partition-watcher");
            watcher.setDaemon(true);
            watcher.start();
            producer.partitionsFor(topic);  // metadata fetched before the first send
            byte[] value = new byte[size];
            long next = System.nanoTime();
            for (long seq = 0; System.nanoTime() < endNs; seq++) {
                long wait;
                while ((wait = next - System.nanoTime()) > 0) {
                    LockSupport.parkNanos(wait);
                }
                next += intervalNs;
                final long n = seq;
                final long sentUs = nowMicros();
                producer.send(new ProducerRecord<>(topic, 0, null, value), (md, e) -> {
                    long ackUs = nowMicros();
                    if (e == null) {
                        OUT.println("ack " + n + " " + sentUs + " " + ackUs);
                    } else {
                        OUT.println("error " + n + " " + sentUs + " " + ackUs + " " + e.getClass().getSimpleName());
                    }
                });
            }
        }
    }

    private static long nowMicros() {
        Instant now = Instant.now();
        return now.getEpochSecond() * 1_000_000L + now.getNano() / 1_000;
    }

    /** Print partition 0's leader and ISR whenever they change (a failed describe: skipped). */
    private static void watchPartition(Admin admin, String topic, long endNs) {
        String last = "";
        int controller = -1;
        DescribeTopicsOptions options = new DescribeTopicsOptions().timeoutMs(PROBE_TIMEOUT_MS);
        DescribeMetadataQuorumOptions quorumOptions = new DescribeMetadataQuorumOptions().timeoutMs(PROBE_TIMEOUT_MS);
        while (System.nanoTime() < endNs) {
            try {
                controller = admin.describeMetadataQuorum(quorumOptions).quorumInfo().get().leaderId();
            } catch (ExecutionException e) {
                // the quorum is electing, or the node asked is down: keep the last one seen
            } catch (InterruptedException e) {
                return;
            }
            try {
                TopicDescription d = admin.describeTopics(List.of(topic), options).allTopicNames().get().get(topic);
                TopicPartitionInfo p = d.partitions().get(0);
                int leader = p.leader() == null || p.leader().isEmpty() ? -1 : p.leader().id();
                String isr = p.isr().stream().map(Node::id).sorted().map(String::valueOf).collect(Collectors.joining(","));
                String state = leader + " " + (isr.isEmpty() ? "-" : isr) + " " + controller;
                if (!state.equals(last)) {
                    OUT.println("state " + nowMicros() + " " + state);
                    last = state;
                }
            } catch (ExecutionException e) {
                // a broker is down or the metadata is moving: the next poll will tell
            } catch (InterruptedException e) {
                return;
            }
            LockSupport.parkNanos(TimeUnit.MILLISECONDS.toNanos(STATE_POLL_MS));
        }
    }
}
