import java.nio.ByteBuffer;
import java.time.Duration;
import java.util.Arrays;
import java.util.List;
import java.util.Locale;
import java.util.Properties;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.locks.LockSupport;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;
import org.apache.kafka.common.serialization.ByteArraySerializer;

/**
 * End-to-end latency at a fixed rate. Kafka's EndToEndLatency sends one record and waits
 * for it before the next, so it cannot hold a rate; this program sends RATE records/s from
 * one thread (open loop) and consumes them with assign() in another, in one JVM so
 * System.nanoTime() is one clock. Each record carries its index; latency is measured from
 * the record's scheduled send time (so a stalled producer counts against the broker run,
 * not hidden: no coordinated omission). Records sent during the first WARMUP_S seconds are
 * not counted. Prints one JSON line with percentiles in milliseconds.
 *
 * <pre>
 * FixedRateLatency BOOTSTRAP TOPIC RATE DURATION_S WARMUP_S RECORD_SIZE ACKS
 * </pre>
 */
public final class FixedRateLatency {
    private FixedRateLatency() {}

    public static void main(String[] args) throws Exception {
        if (args.length != 7) {
            System.err.println("usage: FixedRateLatency BOOTSTRAP TOPIC RATE DURATION_S WARMUP_S RECORD_SIZE ACKS");
            System.exit(2);
        }
        String bootstrap = args[0];
        String topic = args[1];
        int rate = Integer.parseInt(args[2]);
        double durationS = Double.parseDouble(args[3]);
        double warmupS = Double.parseDouble(args[4]);
        int size = Integer.parseInt(args[5]);
        int total = (int) Math.round(rate * durationS);
        int skip = (int) Math.round(rate * warmupS);
        long intervalNs = 1_000_000_000L / rate;

        Properties cprops = new Properties();
        cprops.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        cprops.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class.getName());
        cprops.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class.getName());
        cprops.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, "false");
        // EndToEndLatency's consumer settings: answer a fetch as soon as one byte is there.
        cprops.put(ConsumerConfig.FETCH_MAX_WAIT_MS_CONFIG, "500");
        cprops.put(ConsumerConfig.FETCH_MIN_BYTES_CONFIG, "1");
        Properties pprops = new Properties();
        pprops.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        pprops.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, ByteArraySerializer.class.getName());
        pprops.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, ByteArraySerializer.class.getName());
        pprops.put(ProducerConfig.ACKS_CONFIG, args[6]);
        // EndToEndLatency's producer settings: no batching delay.
        pprops.put(ProducerConfig.LINGER_MS_CONFIG, "0");

        long[] latencies = new long[total];
        AtomicLong sendErrors = new AtomicLong();
        long received = 0;
        long startNs;
        try (KafkaConsumer<byte[], byte[]> consumer = new KafkaConsumer<>(cprops);
             KafkaProducer<byte[], byte[]> producer = new KafkaProducer<>(pprops)) {
            TopicPartition tp = new TopicPartition(topic, 0);
            consumer.assign(List.of(tp));
            consumer.seekToEnd(List.of(tp));
            consumer.position(tp);  // resolve the end offset now, before anything is sent
            producer.partitionsFor(topic);  // metadata fetched before the clock starts
            startNs = System.nanoTime() + 100_000_000L;
            final long t0 = startNs;
            Thread sender = new Thread(() -> {
                byte[] value = new byte[size];
                for (int i = 0; i < total; i++) {
                    long due = t0 + i * intervalNs;
                    long wait;
                    while ((wait = due - System.nanoTime()) > 0) {
                        LockSupport.parkNanos(wait);
                    }
                    ByteBuffer.wrap(value).putInt(0, i);
                    producer.send(new ProducerRecord<>(topic, 0, null, value.clone()), (md, e) -> {
                        if (e != null) {
                            sendErrors.incrementAndGet();
                        }
                    });
                }
                producer.flush();
            }, "fixed-rate-sender");
            sender.start();
            long deadline = System.nanoTime() + (long) ((durationS + 30) * 1e9);
            while (received < total && System.nanoTime() < deadline) {
                for (ConsumerRecord<byte[], byte[]> r : consumer.poll(Duration.ofMillis(100))) {
                    long now = System.nanoTime();
                    int i = ByteBuffer.wrap(r.value()).getInt(0);
                    latencies[i] = now - (t0 + i * intervalNs);
                    received++;
                }
            }
            sender.join();
        }
        long[] counted = Arrays.copyOfRange(latencies, skip, total);
        Arrays.sort(counted);
        System.out.println(String.format(Locale.ROOT,
            "{\"sent\": %d, \"received\": %d, \"counted\": %d, \"send_errors\": %d, "
                + "\"p50_ms\": %.3f, \"p99_ms\": %.3f, \"p999_ms\": %.3f, \"max_ms\": %.3f}",
            total, received, counted.length, sendErrors.get(),
            pct(counted, 0.50), pct(counted, 0.99), pct(counted, 0.999), counted[counted.length - 1] / 1e6));
        if (received < total || sendErrors.get() > 0) {
            System.err.println("received " + received + " of " + total + " records, " + sendErrors.get() + " send errors");
            System.exit(1);
        }
    }

    /** Nearest-rank percentile of sorted nanoseconds, in milliseconds. */
    private static double pct(long[] sorted, double q) {
        int rank = (int) Math.ceil(q * sorted.length) - 1;
        return sorted[Math.max(0, Math.min(sorted.length - 1, rank))] / 1e6;
    }
}
