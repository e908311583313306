// Prints every broker/controller config Apache Kafka knows (KafkaConfig's ConfigDef), one
// per line: name, type, default ("\0" when null), static|dynamic, documentation.
// Run by kafka_broker_configs.py with Kafka's jars (e2e/peers/lib) on the class path.
import java.util.Map;
import java.util.Set;
import java.util.TreeMap;
import org.apache.kafka.common.config.ConfigDef;
import org.apache.kafka.server.config.AbstractKafkaConfig;
import org.apache.kafka.server.config.DynamicBrokerConfig;

public class DumpKafkaBrokerConfigs {
    public static void main(String[] args) {
        Set<String> dynamic = DynamicBrokerConfig.ALL_DYNAMIC_CONFIGS;
        Map<String, ConfigDef.ConfigKey> keys = new TreeMap<>(AbstractKafkaConfig.CONFIG_DEF.configKeys());
        for (ConfigDef.ConfigKey key : keys.values()) {
            String value = key.hasDefault() && key.defaultValue != null
                ? ConfigDef.convertToString(key.defaultValue, key.type) : "\0";
            String doc = key.documentation == null ? "" : key.documentation;
            System.out.println(String.join("\t", key.name, key.type.name(), clean(value),
                dynamic.contains(key.name) ? "dynamic" : "static", clean(doc)));
        }
    }

    private static String clean(String text) {
        return text.replace('\t', ' ').replace('\n', ' ');
    }
}
