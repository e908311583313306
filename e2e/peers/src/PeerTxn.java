import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Properties;
import java.util.Set;
import java.util.TreeMap;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;

import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.clients.producer.RecordMetadata;
import org.apache.kafka.common.PartitionInfo;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.header.Header;
import org.apache.kafka.common.header.internals.RecordHeader;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;
import org.apache.kafka.common.serialization.ByteArraySerializer;

/**
 * The Java client's transactions as an e2e peer (issue 18). One JSON line per event on stdout.
 *
 * <pre>
 * PeerTxn produce --bootstrap-server B --topic T --transactional-id ID
 *         [--transactions N=5] [--records M=9] [--partitions P=3]
 *         [--abort-every K] [--abort 2,5] [--hang] [--transaction-timeout-ms MS=10000]
 *     A transactional producer: N transactions of M records, record j of transaction t
 *     (both from 1) with key "t{t}-r{j}", value "txn-{t}-record-{j}", headers txn=t,
 *     record=j, to partition (j - 1) % P. Transaction t is aborted when K divides it or it
 *     is listed in --abort, else committed. Every record is flushed and acknowledged
 *     before the commit or abort, so aborted records have offsets too. One line each:
 *     {"transaction": t, "result": "committed"|"aborted"|"open",
 *      "records": [{"partition": p, "offset": o, "key": k, "value": v}, ...]}
 *     --hang leaves the last transaction open ("open") and halts the JVM without closing
 *     the producer, as a crash would: the broker aborts it after the transaction timeout.
 *
 * PeerTxn fence --bootstrap-server B --topic T --transactional-id ID [--records M=6]
 *         [--partitions P=3] [--zombie-next send|commit] [--transaction-timeout-ms MS]
 *     Zombie fencing. A zombie producer initTransactions, begins, sends M records
 *     ("zombie-1-{j}") and has them acknowledged; a survivor with the same transactional.id
 *     calls initTransactions; the zombie sends M more ("zombie-2-{j}", to the same
 *     partitions) and commits (--zombie-next send, the default), or commits at once
 *     (--zombie-next commit); if the commit fails it aborts. The survivor then sends M
 *     records ("survivor-{j}") and commits. Lines:
 *     {"event": "zombie_sent", "records": [...]}
 *     {"event": "survivor_initialized"}
 *     {"event": "zombie_fenced", "send_errors": [[class, cause classes...], ...],
 *      "commit_error": [class, cause classes...] or null, "abort_error": [...] or null}
 *     {"event": "survivor_committed", "records": [...]}
 *
 * PeerTxn ctp --bootstrap-server B --input IN --output OUT --group G --transactional-id ID
 *         [--abort-every K] [--max-records N] [--idle-ms MS=5000] [--timeout-ms MS=120000]
 *         [--halt-in T] [--consumer-prop k=v]... [--producer-prop k=v]...
 *     Consume-transform-produce, exactly once: a read_committed group member of IN (classic
 *     protocol, no auto-commit) and a transactional producer. Per non-empty poll one
 *     transaction: each record to OUT, same partition and key, value upper-cased, headers
 *     source-partition and source-offset; sendOffsetsToTransaction(next offsets,
 *     consumer.groupMetadata()); commit, or abort when K divides the transaction number and
 *     then seek every assigned partition back to its committed offset (the beginning if
 *     none), as Kafka's KafkaProducer javadoc does. One line per transaction:
 *     {"transaction": t, "result": "committed"|"aborted"|"halted", "records": n,
 *      "offsets": {"p": next offset, ...}}
 *     It stops, closing both clients, once N input records are committed or after MS with
 *     an empty poll: {"event": "stopped", "reason": "max-records"|"idle",
 *     "committed_records": n}; at the deadline it exits 3. --halt-in T halts the JVM in
 *     transaction T after its records are acknowledged and its offsets sent, uncommitted.
 *
 * PeerTxn read --bootstrap-server B --topic T [--isolation read_committed|read_uncommitted]
 *         [--timeout-ms MS=60000]
 *     Assigns every partition, seekToBeginning, takes endOffsets (the last stable offset
 *     under read_committed, the high watermark under read_uncommitted) and polls until each
 *     position reaches its end offset. One line per record, then the end offsets:
 *     {"partition": p, "offset": o, "key": k, "value": v, "headers": {"k": "v", ...}}
 *     {"end_offsets": {"p": o, ...}, "positions": {"p": o, ...}}
 *     Exit status 3 if the positions did not reach the end offsets before the deadline.
 * </pre>
 *
 * Exit status 0 when the mode ran to its end, 1 on an unexpected error, 2 on bad arguments.
 */
public final class PeerTxn {
    private static final PrintStream OUT = new PrintStream(System.out, true, StandardCharsets.UTF_8);

    public static void main(String[] args) throws Exception {
        if (args.length == 0 || args[0].equals("--help") || args[0].equals("-h")) {
            usage(System.out);
            return;
        }
        String mode = args[0];
        Options o = Options.parse(args, 1);
        switch (mode) {
            case "produce":
                produce(o);
                break;
            case "fence":
                fence(o);
                break;
            case "ctp":
                System.exit(ctp(o));
                break;
            case "read":
                System.exit(read(o));
                break;
            default:
                fail("unknown mode " + mode);
        }
    }

    // ---------------------------------------------------------------- produce

    private static void produce(Options o) throws Exception {
        String topic = o.required("--topic");
        int transactions = o.integer("--transactions", 5);
        int records = o.integer("--records", 9);
        int partitions = o.integer("--partitions", 3);
        int abortEvery = o.integer("--abort-every", 0);
        Set<Integer> abort = new HashSet<>();
        for (String t : o.get("--abort", "").split(",")) {
            if (!t.isBlank()) {
                abort.add(Integer.parseInt(t.trim()));
            }
        }
        boolean hang = o.flag("--hang");
        KafkaProducer<byte[], byte[]> producer = new KafkaProducer<>(producerProps(o, o.required("--transactional-id")));
        producer.initTransactions();
        for (int t = 1; t <= transactions; t++) {
            producer.beginTransaction();
            List<ProducerRecord<byte[], byte[]>> sent = new ArrayList<>();
            for (int j = 1; j <= records; j++) {
                sent.add(new ProducerRecord<>(topic, (j - 1) % partitions, null,
                        utf8("t" + t + "-r" + j), utf8("txn-" + t + "-record-" + j),
                        List.of(new RecordHeader("txn", utf8(Integer.toString(t))),
                                new RecordHeader("record", utf8(Integer.toString(j))))));
            }
            String acked = sendAll(producer, sent);
            String result;
            if (hang && t == transactions) {
                result = "open";
            } else if ((abortEvery > 0 && t % abortEvery == 0) || abort.contains(t)) {
                producer.abortTransaction();
                result = "aborted";
            } else {
                producer.commitTransaction();
                result = "committed";
            }
            OUT.println("{\"transaction\": " + t + ", \"result\": \"" + result + "\", \"records\": "
                    + acked + "}");
        }
        if (hang) {
            OUT.flush();
            Runtime.getRuntime().halt(0);
        }
        producer.close(Duration.ofSeconds(30));
    }

    /** Sends, flushes and waits for every acknowledgement; the records as a JSON array. */
    private static String sendAll(KafkaProducer<byte[], byte[]> producer,
            List<ProducerRecord<byte[], byte[]>> records) throws Exception {
        List<Future<RecordMetadata>> futures = new ArrayList<>();
        for (ProducerRecord<byte[], byte[]> r : records) {
            futures.add(producer.send(r));
        }
        producer.flush();
        StringBuilder sb = new StringBuilder("[");
        for (int i = 0; i < records.size(); i++) {
            RecordMetadata md = futures.get(i).get(60, TimeUnit.SECONDS);
            sb.append(i == 0 ? "" : ", ");
            recordJson(sb, md.partition(), md.offset(), records.get(i).key(), records.get(i).value());
        }
        return sb.append(']').toString();
    }

    // ---------------------------------------------------------------- fence

    private static void fence(Options o) throws Exception {
        String topic = o.required("--topic");
        String id = o.required("--transactional-id");
        int records = o.integer("--records", 6);
        int partitions = o.integer("--partitions", 3);
        String zombieNext = o.get("--zombie-next", "send");
        if (!zombieNext.equals("send") && !zombieNext.equals("commit")) {
            fail("--zombie-next is send or commit, got " + zombieNext);
        }
        try (KafkaProducer<byte[], byte[]> zombie = new KafkaProducer<>(producerProps(o, id))) {
            zombie.initTransactions();
            zombie.beginTransaction();
            String first = sendAll(zombie, named(topic, "zombie-1-", records, partitions));
            OUT.println("{\"event\": \"zombie_sent\", \"records\": " + first + "}");

            try (KafkaProducer<byte[], byte[]> survivor = new KafkaProducer<>(producerProps(o, id))) {
                survivor.initTransactions();
                OUT.println("{\"event\": \"survivor_initialized\"}");

                List<String> sendErrors = new ArrayList<>();
                List<Future<RecordMetadata>> futures = new ArrayList<>();
                List<ProducerRecord<byte[], byte[]>> more = zombieNext.equals("send")
                        ? named(topic, "zombie-2-", records, partitions) : List.of();
                for (ProducerRecord<byte[], byte[]> r : more) {
                    try {
                        futures.add(zombie.send(r));
                    } catch (RuntimeException e) { // the producer may refuse at once
                        sendErrors.add(classes(e));
                    }
                }
                if (!more.isEmpty()) {
                    try {
                        zombie.flush();
                    } catch (RuntimeException e) {
                        sendErrors.add(classes(e));
                    }
                }
                for (Future<RecordMetadata> f : futures) {
                    try {
                        f.get(60, TimeUnit.SECONDS);
                        sendErrors.add("null");
                    } catch (ExecutionException e) {
                        sendErrors.add(classes(e.getCause()));
                    }
                }
                String commitError = "null";
                String abortError = "null";
                try {
                    zombie.commitTransaction();
                } catch (RuntimeException e) {
                    commitError = classes(e);
                    try {
                        zombie.abortTransaction();
                    } catch (RuntimeException e2) {
                        abortError = classes(e2);
                    }
                }
                OUT.println("{\"event\": \"zombie_fenced\", \"send_errors\": " + sendErrors
                        + ", \"commit_error\": " + commitError + ", \"abort_error\": " + abortError + "}");

                survivor.beginTransaction();
                String mine = sendAll(survivor, named(topic, "survivor-", records, partitions));
                survivor.commitTransaction();
                OUT.println("{\"event\": \"survivor_committed\", \"records\": " + mine + "}");
            }
            zombie.close(Duration.ZERO);
        }
    }

    private static List<ProducerRecord<byte[], byte[]>> named(String topic, String prefix, int n,
            int partitions) {
        List<ProducerRecord<byte[], byte[]>> out = new ArrayList<>();
        for (int j = 1; j <= n; j++) {
            out.add(new ProducerRecord<>(topic, (j - 1) % partitions, utf8(prefix + j), utf8(prefix + j)));
        }
        return out;
    }

    /** An exception as a JSON array: its class and its causes' classes (simple names). */
    private static String classes(Throwable e) {
        StringBuilder sb = new StringBuilder("[");
        for (Throwable c = e; c != null; c = c.getCause() == c ? null : c.getCause()) {
            sb.append(c == e ? "" : ", ");
            Json.string(sb, c.getClass().getSimpleName());
        }
        return sb.append(']').toString();
    }

    // ---------------------------------------------------------------- ctp

    private static int ctp(Options o) throws Exception {
        String input = o.required("--input");
        String output = o.required("--output");
        String group = o.required("--group");
        String id = o.required("--transactional-id");
        int abortEvery = o.integer("--abort-every", 0);
        int maxRecords = o.integer("--max-records", -1);
        int haltIn = o.integer("--halt-in", -1);
        long idleMs = o.integer("--idle-ms", 5000);
        long deadline = System.currentTimeMillis() + o.integer("--timeout-ms", 120_000);

        Properties cp = new Properties();
        cp.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, o.required("--bootstrap-server"));
        cp.put(ConsumerConfig.GROUP_ID_CONFIG, group);
        cp.put(ConsumerConfig.GROUP_PROTOCOL_CONFIG, "classic");
        cp.put(ConsumerConfig.ISOLATION_LEVEL_CONFIG, "read_committed");
        cp.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, "false");
        cp.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "earliest");
        cp.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class.getName());
        cp.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class.getName());
        cp.put(ConsumerConfig.CLIENT_ID_CONFIG, "strom-e2e-java-ctp-consumer");
        cp.putAll(o.consumerProps);

        int committed = 0;
        String reason = null;
        try (KafkaConsumer<byte[], byte[]> consumer = new KafkaConsumer<>(cp);
                KafkaProducer<byte[], byte[]> producer = new KafkaProducer<>(producerProps(o, id))) {
            producer.initTransactions();
            consumer.subscribe(List.of(input));
            long lastRecords = System.currentTimeMillis();
            int t = 0;
            while (reason == null) {
                if (System.currentTimeMillis() >= deadline) {
                    System.err.println("PeerTxn ctp: deadline, " + committed + " records committed");
                    return 3;
                }
                ConsumerRecords<byte[], byte[]> records = consumer.poll(Duration.ofMillis(200));
                if (records.isEmpty()) {
                    if (System.currentTimeMillis() - lastRecords >= idleMs) {
                        reason = "idle";
                    }
                    continue;
                }
                lastRecords = System.currentTimeMillis();
                t++;
                producer.beginTransaction();
                Map<TopicPartition, OffsetAndMetadata> next = new HashMap<>();
                List<Future<RecordMetadata>> futures = new ArrayList<>();
                for (ConsumerRecord<byte[], byte[]> r : records) {
                    String value = new String(r.value(), StandardCharsets.UTF_8).toUpperCase(Locale.ROOT);
                    futures.add(producer.send(new ProducerRecord<>(output, r.partition(), null, r.key(),
                            utf8(value),
                            List.of(new RecordHeader("source-partition", utf8(Integer.toString(r.partition()))),
                                    new RecordHeader("source-offset", utf8(Long.toString(r.offset())))))));
                    next.put(new TopicPartition(r.topic(), r.partition()), new OffsetAndMetadata(r.offset() + 1));
                }
                producer.sendOffsetsToTransaction(next, consumer.groupMetadata());
                producer.flush();
                for (Future<RecordMetadata> f : futures) {
                    f.get(60, TimeUnit.SECONDS);
                }
                String result;
                if (t == haltIn) {
                    result = "halted";
                } else if (abortEvery > 0 && t % abortEvery == 0) {
                    producer.abortTransaction();
                    rewind(consumer);
                    result = "aborted";
                } else {
                    producer.commitTransaction();
                    committed += records.count();
                    result = "committed";
                }
                StringBuilder sb = new StringBuilder("{\"transaction\": ").append(t);
                sb.append(", \"result\": \"").append(result).append("\", \"records\": ").append(records.count());
                sb.append(", \"offsets\": ").append(byPartition(next)).append('}');
                OUT.println(sb);
                if (t == haltIn) {
                    OUT.flush();
                    Runtime.getRuntime().halt(0);
                }
                if (maxRecords >= 0 && committed >= maxRecords) {
                    reason = "max-records";
                }
            }
        }
        OUT.println("{\"event\": \"stopped\", \"reason\": \"" + reason + "\", \"committed_records\": "
                + committed + "}");
        return 0;
    }

    /** After an abort: every assigned partition back to its committed offset. */
    private static void rewind(KafkaConsumer<byte[], byte[]> consumer) {
        Set<TopicPartition> assigned = consumer.assignment();
        Map<TopicPartition, OffsetAndMetadata> committed = consumer.committed(assigned);
        for (TopicPartition tp : assigned) {
            OffsetAndMetadata om = committed.get(tp);
            if (om == null) {
                consumer.seekToBeginning(List.of(tp));
            } else {
                consumer.seek(tp, om.offset());
            }
        }
    }

    private static String byPartition(Map<TopicPartition, ?> m) {
        TreeMap<Integer, String> sorted = new TreeMap<>();
        for (Map.Entry<TopicPartition, ?> e : m.entrySet()) {
            Object v = e.getValue();
            sorted.put(e.getKey().partition(),
                    v instanceof OffsetAndMetadata ? Long.toString(((OffsetAndMetadata) v).offset()) : v.toString());
        }
        StringBuilder sb = new StringBuilder("{");
        for (Map.Entry<Integer, String> e : sorted.entrySet()) {
            sb.append(sb.length() == 1 ? "" : ", ").append('"').append(e.getKey()).append("\": ").append(e.getValue());
        }
        return sb.append('}').toString();
    }

    // ---------------------------------------------------------------- read

    private static int read(Options o) {
        String topic = o.required("--topic");
        String isolation = o.get("--isolation", "read_committed");
        long timeoutMs = o.integer("--timeout-ms", 60_000);
        long deadline = System.currentTimeMillis() + timeoutMs;
        Properties p = new Properties();
        p.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, o.required("--bootstrap-server"));
        p.put(ConsumerConfig.ISOLATION_LEVEL_CONFIG, isolation);
        p.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, "false");
        p.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class.getName());
        p.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class.getName());
        p.put(ConsumerConfig.CLIENT_ID_CONFIG, "strom-e2e-java-txn-reader");
        p.putAll(o.consumerProps);
        try (KafkaConsumer<byte[], byte[]> consumer = new KafkaConsumer<>(p)) {
            List<TopicPartition> tps = new ArrayList<>();
            for (PartitionInfo info : consumer.partitionsFor(topic, Duration.ofMillis(timeoutMs))) {
                tps.add(new TopicPartition(topic, info.partition()));
            }
            if (tps.isEmpty()) {
                System.err.println("PeerTxn read: topic " + topic + " has no partitions");
                return 3;
            }
            consumer.assign(tps);
            consumer.seekToBeginning(tps);
            Map<TopicPartition, Long> end = consumer.endOffsets(tps, Duration.ofMillis(timeoutMs));
            while (!reached(consumer, end)) {
                long left = deadline - System.currentTimeMillis();
                if (left <= 0) {
                    System.err.println("PeerTxn read: positions did not reach " + end + " in time");
                    return 3;
                }
                for (ConsumerRecord<byte[], byte[]> r : consumer.poll(Duration.ofMillis(Math.min(left, 200)))) {
                    StringBuilder sb = new StringBuilder("{\"partition\": ").append(r.partition());
                    sb.append(", \"offset\": ").append(r.offset()).append(", \"key\": ");
                    Json.string(sb, r.key());
                    sb.append(", \"value\": ");
                    Json.string(sb, r.value());
                    sb.append(", \"headers\": {");
                    boolean first = true;
                    for (Header h : r.headers()) {
                        sb.append(first ? "" : ", ");
                        first = false;
                        Json.string(sb, h.key());
                        sb.append(": ");
                        Json.string(sb, h.value());
                    }
                    OUT.println(sb.append("}}"));
                }
            }
            Map<TopicPartition, Long> positions = new HashMap<>();
            for (TopicPartition tp : tps) {
                positions.put(tp, consumer.position(tp));
            }
            OUT.println("{\"end_offsets\": " + byPartition(end) + ", \"positions\": " + byPartition(positions) + "}");
        }
        return 0;
    }

    private static boolean reached(KafkaConsumer<byte[], byte[]> consumer, Map<TopicPartition, Long> end) {
        for (Map.Entry<TopicPartition, Long> e : end.entrySet()) {
            if (consumer.position(e.getKey()) < e.getValue()) {
                return false;
            }
        }
        return true;
    }

    // ---------------------------------------------------------------- common

    private static Properties producerProps(Options o, String transactionalId) {
        Properties p = new Properties();
        p.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, o.required("--bootstrap-server"));
        p.put(ProducerConfig.TRANSACTIONAL_ID_CONFIG, transactionalId);
        p.put(ProducerConfig.ENABLE_IDEMPOTENCE_CONFIG, "true");
        p.put(ProducerConfig.ACKS_CONFIG, "all");
        p.put(ProducerConfig.TRANSACTION_TIMEOUT_CONFIG, o.get("--transaction-timeout-ms", "10000"));
        p.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, ByteArraySerializer.class.getName());
        p.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, ByteArraySerializer.class.getName());
        p.put(ProducerConfig.CLIENT_ID_CONFIG, "strom-e2e-java-txn-" + transactionalId);
        p.putAll(o.producerProps);
        return p;
    }

    private static void recordJson(StringBuilder sb, int partition, long offset, byte[] key, byte[] value) {
        sb.append("{\"partition\": ").append(partition).append(", \"offset\": ").append(offset);
        sb.append(", \"key\": ");
        Json.string(sb, key);
        sb.append(", \"value\": ");
        Json.string(sb, value);
        sb.append('}');
    }

    private static byte[] utf8(String s) {
        return s.getBytes(StandardCharsets.UTF_8);
    }

    /** `--key value` options, `--hang` flags and repeatable `--consumer-prop`/`--producer-prop`. */
    private static final class Options {
        private static final Set<String> FLAGS = Set.of("--hang");
        final Map<String, String> values = new HashMap<>();
        final Properties consumerProps = new Properties();
        final Properties producerProps = new Properties();

        static Options parse(String[] args, int from) {
            Options o = new Options();
            for (int i = from; i < args.length; i++) {
                String a = args[i];
                if (!a.startsWith("--")) {
                    fail("unexpected argument " + a);
                }
                if (FLAGS.contains(a)) {
                    o.values.put(a, "true");
                    continue;
                }
                if (i + 1 >= args.length) {
                    fail(a + " needs a value");
                }
                String v = args[++i];
                if (a.equals("--consumer-prop") || a.equals("--producer-prop")) {
                    int eq = v.indexOf('=');
                    if (eq <= 0) {
                        fail(a + " expects key=value, got " + v);
                    }
                    (a.equals("--consumer-prop") ? o.consumerProps : o.producerProps)
                            .setProperty(v.substring(0, eq), v.substring(eq + 1));
                } else {
                    o.values.put(a.equals("--bootstrap") ? "--bootstrap-server" : a, v);
                }
            }
            return o;
        }

        String get(String key, String fallback) {
            return values.getOrDefault(key, fallback);
        }

        String required(String key) {
            String v = values.get(key);
            if (v == null) {
                fail(key + " is required");
            }
            return v;
        }

        int integer(String key, int fallback) {
            String v = values.get(key);
            return v == null ? fallback : Integer.parseInt(v);
        }

        boolean flag(String key) {
            return values.containsKey(key);
        }
    }

    private static void usage(PrintStream out) {
        out.println("usage: PeerTxn produce --bootstrap-server B --topic T --transactional-id ID"
                + " [--transactions N=5] [--records M=9] [--partitions P=3] [--abort-every K]"
                + " [--abort 2,5] [--hang] [--transaction-timeout-ms MS=10000] [--producer-prop k=v]...\n"
                + "       PeerTxn fence --bootstrap-server B --topic T --transactional-id ID"
                + " [--records M=6] [--partitions P=3] [--zombie-next send|commit]\n"
                + "       PeerTxn ctp --bootstrap-server B --input IN --output OUT --group G"
                + " --transactional-id ID [--abort-every K] [--max-records N] [--idle-ms MS=5000]"
                + " [--timeout-ms MS=120000] [--halt-in T] [--consumer-prop k=v]... [--producer-prop k=v]...\n"
                + "       PeerTxn read --bootstrap-server B --topic T"
                + " [--isolation read_committed|read_uncommitted] [--timeout-ms MS=60000]"
                + " [--consumer-prop k=v]...");
    }

    private static void fail(String msg) {
        System.err.println("PeerTxn: " + msg);
        usage(System.err);
        System.exit(2);
    }

    private PeerTxn() {}
}
