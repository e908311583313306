import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Properties;
import java.util.Random;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.atomic.AtomicReference;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.clients.admin.FinalizedVersionRange;
import org.apache.kafka.clients.admin.ListOffsetsOptions;
import org.apache.kafka.clients.admin.ListOffsetsResult.ListOffsetsResultInfo;
import org.apache.kafka.clients.admin.OffsetSpec;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.producer.Callback;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.IsolationLevel;
import org.apache.kafka.common.PartitionInfo;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;
import org.apache.kafka.common.serialization.ByteArraySerializer;

/**
 * TX1: a transactional producer's throughput, then a read_committed check of what it wrote.
 *
 * <p>One KafkaProducer with a transactional.id (so idempotent, acks=all) runs TRANSACTIONS
 * transactions one after the other: beginTransaction, RECORDS_PER_TXN records of RECORD_SIZE
 * bytes (record i of a transaction to partition i % partitions, so every transaction spans
 * every partition when it has as many records), commitTransaction (which flushes them and
 * returns once the coordinator has the commit). initTransactions and the topic's metadata
 * come before the clock; the first WARMUP_TXNS transactions are not timed (the steady state,
 * as ProducerPerformance's --warmup-records). PROPERTY=VALUE arguments go to the producer.
 *
 * <p>Then, not timed: one more transaction of RECORDS_PER_TXN records (a different value) is
 * aborted; an admin client waits until every partition's last stable offset reaches its high
 * watermark (the markers are all written); a read_committed consumer (assign, from the
 * beginning) reads up to those offsets and counts the committed records and any aborted ones
 * it was given. The harness checks committed_read == transactions x records_per_txn,
 * aborted_read == 0 and that the high watermarks hold exactly the records plus one marker per
 * partition per transaction. Prints one JSON line (times in ms, MB = 2^20 bytes).
 *
 * <pre>
 * TxnProducerPerf BOOTSTRAP TOPIC TRANSACTIONS RECORDS_PER_TXN RECORD_SIZE WARMUP_TXNS TIMEOUT_MS
 *     [PROPERTY=VALUE ...]
 * </pre>
 */
public final class TxnProducerPerf {
    private TxnProducerPerf() {}

    private static final String TRANSACTIONAL_ID = "bench-tx1";

    public static void main(String[] args) throws Exception {
        if (args.length < 7) {
            System.err.println("usage: TxnProducerPerf BOOTSTRAP TOPIC TRANSACTIONS RECORDS_PER_TXN "
                + "RECORD_SIZE WARMUP_TXNS TIMEOUT_MS [PROPERTY=VALUE ...]");
            System.exit(2);
        }
        String bootstrap = args[0];
        String topic = args[1];
        int transactions = Integer.parseInt(args[2]);
        int perTxn = Integer.parseInt(args[3]);
        int size = Integer.parseInt(args[4]);
        int warmup = Integer.parseInt(args[5]);
        long deadline = System.currentTimeMillis() + Long.parseLong(args[6]);
        if (warmup >= transactions) {
            System.err.println("WARMUP_TXNS must be below TRANSACTIONS");
            System.exit(2);
        }

        Properties pprops = new Properties();
        pprops.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        pprops.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, ByteArraySerializer.class.getName());
        pprops.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, ByteArraySerializer.class.getName());
        pprops.put(ProducerConfig.TRANSACTIONAL_ID_CONFIG, TRANSACTIONAL_ID);
        for (int i = 7; i < args.length; i++) {
            int eq = args[i].indexOf('=');
            if (eq <= 0) {
                System.err.println("not PROPERTY=VALUE: " + args[i]);
                System.exit(2);
            }
            pprops.put(args[i].substring(0, eq), args[i].substring(eq + 1));
        }
        Properties aprops = new Properties();
        aprops.put(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);

        // ProducerPerformance's payload: random upper-case letters, the same for every record
        Random random = new Random(0);
        byte[] committedValue = new byte[size];
        for (int i = 0; i < size; i++) {
            committedValue[i] = (byte) ('A' + random.nextInt(26));
        }
        byte[] abortedValue = Arrays.copyOf(committedValue, size);
        abortedValue[0] = (byte) 'a';  // lower case: no committed record starts so

        long[] txnNs = new long[transactions - warmup];
        long[] commitNs = new long[transactions - warmup];
        AtomicLong sendErrors = new AtomicLong();
        AtomicReference<Exception> firstError = new AtomicReference<>();
        Callback callback = (metadata, exception) -> {
            if (exception != null) {
                sendErrors.incrementAndGet();
                firstError.compareAndSet(null, exception);
            }
        };
        int transactionVersion;
        List<TopicPartition> partitions = new ArrayList<>();
        long measuredNs;
        try (Admin admin = Admin.create(aprops);
             KafkaProducer<byte[], byte[]> producer = new KafkaProducer<>(pprops)) {
            FinalizedVersionRange tv = admin.describeFeatures().featureMetadata()
                .get(60, TimeUnit.SECONDS).finalizedFeatures().get("transaction.version");
            transactionVersion = tv == null ? 0 : tv.maxVersionLevel();
            for (PartitionInfo p : producer.partitionsFor(topic)) {
                partitions.add(new TopicPartition(topic, p.partition()));
            }
            int count = partitions.size();
            producer.initTransactions();
            long start = 0;
            for (int t = 0; t < transactions; t++) {
                if (t == warmup) {
                    start = System.nanoTime();
                }
                long began = System.nanoTime();
                producer.beginTransaction();
                for (int i = 0; i < perTxn; i++) {
                    producer.send(new ProducerRecord<>(topic, i % count, null, committedValue), callback);
                }
                long committing = System.nanoTime();
                producer.commitTransaction();
                long done = System.nanoTime();
                if (t >= warmup) {
                    txnNs[t - warmup] = done - began;
                    commitNs[t - warmup] = done - committing;
                }
                if (sendErrors.get() > 0) {
                    fail("a send failed in transaction " + t, firstError.get());
                }
                if (System.currentTimeMillis() > deadline) {
                    fail("timed out after " + (t + 1) + " of " + transactions + " transactions", null);
                }
            }
            measuredNs = System.nanoTime() - start;
            producer.beginTransaction();
            for (int i = 0; i < perTxn; i++) {
                producer.send(new ProducerRecord<>(topic, i % count, null, abortedValue), callback);
            }
            producer.flush();
            producer.abortTransaction();
            if (sendErrors.get() > 0) {
                fail("a send failed in the aborted transaction", firstError.get());
            }

            // Every marker written: the last stable offsets have caught up with the ends.
            Map<TopicPartition, OffsetSpec> latest = new HashMap<>();
            for (TopicPartition tp : partitions) {
                latest.put(tp, OffsetSpec.latest());
            }
            long endSum;
            long stableSum;
            Map<TopicPartition, Long> stable = new HashMap<>();
            while (true) {
                Map<TopicPartition, ListOffsetsResultInfo> ends = admin.listOffsets(
                    latest, new ListOffsetsOptions(IsolationLevel.READ_UNCOMMITTED)).all().get();
                Map<TopicPartition, ListOffsetsResultInfo> lsos = admin.listOffsets(
                    latest, new ListOffsetsOptions(IsolationLevel.READ_COMMITTED)).all().get();
                endSum = 0;
                stableSum = 0;
                for (TopicPartition tp : partitions) {
                    endSum += ends.get(tp).offset();
                    stableSum += lsos.get(tp).offset();
                    stable.put(tp, lsos.get(tp).offset());
                }
                if (stableSum == endSum) {
                    break;
                }
                if (System.currentTimeMillis() > deadline) {
                    fail("the last stable offsets (" + stableSum + " in all) never reached the "
                        + "high watermarks (" + endSum + ")", null);
                }
                Thread.sleep(50);
            }

            long[] read = readCommitted(bootstrap, partitions, stable, committedValue[0], deadline);
            System.out.println(String.format(Locale.ROOT,
                "{\"transactions\": %d, \"timed_transactions\": %d, \"records_per_transaction\": %d, "
                + "\"record_size\": %d, \"partitions\": %d, \"transaction_version\": %d, "
                + "\"seconds\": %.6f, \"records_per_s\": %.1f, \"transactions_per_s\": %.2f, "
                + "\"mb_per_s\": %.3f, \"txn_p50_ms\": %.3f, \"txn_p99_ms\": %.3f, "
                + "\"txn_max_ms\": %.3f, \"commit_p50_ms\": %.3f, \"commit_p99_ms\": %.3f, "
                + "\"committed_read\": %d, \"aborted_read\": %d, \"end_offsets\": %d, "
                + "\"stable_offsets\": %d}",
                transactions, transactions - warmup, perTxn, size, count, transactionVersion,
                measuredNs / 1e9,
                (double) (transactions - warmup) * perTxn / (measuredNs / 1e9),
                (transactions - warmup) / (measuredNs / 1e9),
                (double) (transactions - warmup) * perTxn * size / (1024.0 * 1024.0) / (measuredNs / 1e9),
                percentileMs(txnNs, 0.50), percentileMs(txnNs, 0.99), percentileMs(txnNs, 1.0),
                percentileMs(commitNs, 0.50), percentileMs(commitNs, 0.99),
                read[0], read[1], endSum, stableSum));
        }
    }

    /** {committed records, aborted records} a read_committed consumer is given up to `ends`. */
    private static long[] readCommitted(String bootstrap, List<TopicPartition> partitions,
                                        Map<TopicPartition, Long> ends, byte committedFirst,
                                        long deadline) {
        Properties cprops = new Properties();
        cprops.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        cprops.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class.getName());
        cprops.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class.getName());
        cprops.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, "false");
        cprops.put(ConsumerConfig.ISOLATION_LEVEL_CONFIG, "read_committed");
        cprops.put(ConsumerConfig.MAX_PARTITION_FETCH_BYTES_CONFIG, "1048576");
        long committed = 0;
        long aborted = 0;
        try (KafkaConsumer<byte[], byte[]> consumer = new KafkaConsumer<>(cprops)) {
            consumer.assign(partitions);
            consumer.seekToBeginning(partitions);
            while (true) {
                boolean done = true;
                for (TopicPartition tp : partitions) {
                    if (consumer.position(tp) < ends.get(tp)) {
                        done = false;
                        break;
                    }
                }
                if (done) {
                    break;
                }
                if (System.currentTimeMillis() > deadline) {
                    fail("the read_committed consumer timed out after " + committed + " records", null);
                }
                for (ConsumerRecord<byte[], byte[]> r : consumer.poll(Duration.ofMillis(100))) {
                    if (r.value() != null && r.value().length > 0 && r.value()[0] == committedFirst) {
                        committed++;
                    } else {
                        aborted++;
                    }
                }
            }
        }
        return new long[] {committed, aborted};
    }

    private static double percentileMs(long[] ns, double q) {
        long[] sorted = ns.clone();
        Arrays.sort(sorted);
        int index = (int) Math.ceil(q * sorted.length) - 1;
        return sorted[Math.max(0, Math.min(sorted.length - 1, index))] / 1e6;
    }

    private static void fail(String message, Exception cause) {
        System.err.println(message + (cause == null ? "" : ": " + cause));
        if (cause != null) {
            cause.printStackTrace();
        }
        System.out.flush();
        System.exit(1);
    }
}
