import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Locale;
import java.util.Properties;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.common.PartitionInfo;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;

/**
 * ConsumerPerformance without a consumer group: assign() every partition of the topic,
 * seekToBeginning, and poll until RECORDS records have arrived. Counting, fetch and socket
 * settings follow ConsumerPerformance's defaults (bytes = key + value sizes, MB = 2^20
 * bytes, max.partition.fetch.bytes = 1 MiB, receive.buffer.bytes = 2 MiB) so the figure
 * reads like its "MB.sec". Prints one JSON line.
 *
 * <pre>
 * AssignConsumerPerf BOOTSTRAP TOPIC RECORDS TIMEOUT_MS
 * </pre>
 */
public final class AssignConsumerPerf {
    private AssignConsumerPerf() {}

    public static void main(String[] args) {
        if (args.length != 4) {
            System.err.println("usage: AssignConsumerPerf BOOTSTRAP TOPIC RECORDS TIMEOUT_MS");
            System.exit(2);
        }
        String topic = args[1];
        long want = Long.parseLong(args[2]);
        long timeoutMs = Long.parseLong(args[3]);
        Properties props = new Properties();
        props.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, args[0]);
        props.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class.getName());
        props.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class.getName());
        props.put(ConsumerConfig.MAX_PARTITION_FETCH_BYTES_CONFIG, "1048576");
        props.put(ConsumerConfig.RECEIVE_BUFFER_CONFIG, "2097152");
        props.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, "false");
        long records = 0;
        long bytes = 0;
        long start;
        long end;
        try (KafkaConsumer<byte[], byte[]> consumer = new KafkaConsumer<>(props)) {
            List<TopicPartition> partitions = new ArrayList<>();
            for (PartitionInfo p : consumer.partitionsFor(topic, Duration.ofSeconds(10))) {
                partitions.add(new TopicPartition(topic, p.partition()));
            }
            consumer.assign(partitions);
            consumer.seekToBeginning(partitions);
            start = System.nanoTime();
            end = start;
            long deadline = System.currentTimeMillis() + timeoutMs;
            while (records < want && System.currentTimeMillis() < deadline) {
                ConsumerRecords<byte[], byte[]> batch = consumer.poll(Duration.ofMillis(100));
                for (ConsumerRecord<byte[], byte[]> r : batch) {
                    records++;
                    bytes += (r.key() == null ? 0 : r.key().length) + (r.value() == null ? 0 : r.value().length);
                }
                if (!batch.isEmpty()) {
                    end = System.nanoTime();
                }
            }
        }
        double seconds = (end - start) / 1e9;
        double mb = bytes / (1024.0 * 1024.0);
        System.out.println(String.format(Locale.ROOT,
            "{\"records\": %d, \"bytes\": %d, \"seconds\": %.6f, \"mb_per_s\": %.3f, \"records_per_s\": %.1f}",
            records, bytes, seconds, mb / seconds, records / seconds));
        if (records < want) {
            System.err.println("timed out after " + records + " of " + want + " records");
            System.exit(1);
        }
    }
}
